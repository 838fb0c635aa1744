"""What `harness tune` prints: predicted against measured for every confirmed setting, then each
recommendation in the runtime's own terms (Runtime.library_command) and as the `harness run` line
that reproduces it, each command whole on one line, ready to paste.

What it does not do: predict, measure or choose (harness/tune.py).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import replace
from typing import Optional

from spec_harness.core import drafters
from spec_harness.core.config import DraftPolicy
from spec_harness.harness.tune import Candidate, quant_of
from spec_harness.harness.tune_load import BASELINE


# ---------------------------------------------------------------- what to paste


def harness_line(rec: dict, pair_arg: Optional[str]) -> str:
    """The `harness run` line that measures a recommendation again."""
    parts = ["harness run", f"--runtime {rec['name']}"]
    if pair_arg:
        parts.append(f"--pair {pair_arg}")
    quant = quant_of((rec["best"] if rec["speculate"] else rec["base"])["pair"])
    if quant:
        parts.append(f"--target-quant {quant}")
    if rec.get("forward"):
        parts.append(f"--torch-forward {rec['forward']}")
    if rec["speculate"]:
        parts += [f"--drafter {rec['best']['drafter']}", f"--gamma {rec['best']['gamma']}"]
        if rec["best"]["policy"] != "fixed":
            parts.append(f"--draft-policy {rec['best']['policy']}")
    if rec["n"] > 1:
        parts.append(f"--concurrency {rec['n']}")
    return " ".join(parts)


def library_line(rec: dict, pairs: dict, up_to: Optional[int] = None) -> Optional[str]:
    """The recommendation in the runtime's own terms, where its library has them (`up_to`, where
    the runtime switches by load: speculation off above that many running sequences)."""
    from spec_harness import runtimes

    best = rec["best"] if rec["speculate"] else rec["base"]
    pair = pairs.get(best["pair"].rpartition("@")[0] if quant_of(best["pair"]) else best["pair"])
    if pair is None:
        return None
    if quant_of(best["pair"]):  # the variant's file (made by the run, cached)
        from spec_harness.models.quantize import variants

        pair = variants(pair, [quant_of(best["pair"])])[0]
    cls = runtimes.get(rec["name"])
    if not cls.reads_target_gguf:  # a GGUF target or draft runs as its float32 folder
        from spec_harness.models.loading import converted_folder

        folders = {k: converted_folder(v) for k, v in (("target", pair.target), ("draft", pair.draft))
                   if v and str(v).endswith(".gguf")}
        pair = replace(pair, **{k: str(f) for k, f in folders.items() if f is not None})
    p_min = DraftPolicy.parse(best.get("policy") or "fixed").confidence if rec["speculate"] else None
    return cls.library_command(pair, drafters.of(best["drafter"]) if rec["speculate"] else None, best.get("gamma"), p_min,
                               **({"up_to": up_to} if up_to else {}))


# ---------------------------------------------------------------- the console


def _x(v: Optional[float], down: bool = False) -> str:
    """A speedup in hundredths; `down` rounds it down, so that a prediction under --rule-out never
    reads as --rule-out itself (0.8996 reads 0.89x, not 0.90x beside "predicted below 0.9x")."""
    if v is None:
        return "-"
    return f"{math.floor(v * 100) / 100:.2f}x" if down else f"{v:.2f}x"


def _t(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.1f}"


def unsteady_line(u: dict) -> str:
    """A runtime whose baseline decoded one input at two speeds during tune (tune.unsteady), in words."""
    rates = f"at {u['low']:.1f} and {u['high']:.1f} tok/s ({u['high'] / u['low']:.2f}x)"
    slow, fast = u.get("prompts") or [None, None]
    if slow is None:  # an entry without its prompts (an older tune.json): its rates may span inputs of any length
        return (f"{u['runtime']}: its baseline decoded {rates} from prompt to prompt: this machine's speed changed "
                "during tune, or the prompts' inputs differ in length")
    n = u.get("prompt_tokens") or [None, None]
    what = f"prompt {slow}" if slow == fast else f"prompts {slow} and {fast} ({n[0]} and {n[1]} input tokens)"
    return (f"{u['runtime']}: its baseline decoded {what} {rates}: this machine's speed changed during tune, "
            "and a prediction made at one speed misses a measurement made at the other")


def lines(result: dict, pairs: dict, pair_arg: Optional[str], width: int = 100) -> list[str]:
    """Predicted against measured for every confirmed candidate, then one recommendation per
    runtime and N with the lines to paste; every line but those commands within `width` columns."""
    multi_pair = len({c["pair"] for c in result["confirmed"]}) > 1
    out = [f"{'runtime':<20} {'setting':<24} {'N':>3} {'predicted':>9} {'measured':>9} {'tok/s':>7} {'baseline':>8}"]
    base = {(b["runtime"], b["pair"], b["n"]): b["tokens_per_s"] for b in result["baselines"]}
    for c in result["confirmed"]:
        setting = Candidate(**c).label() + (f" @{quant_of(c['pair'])}" if multi_pair and quant_of(c["pair"]) else "")
        out.append(f"{c['runtime'][:20]:<20} {setting[:24]:<24} {c['n']:>3} {_x(c['predicted']):>9} {_x(c['measured']):>9} "
                   f"{_t(c['tokens_per_s']):>7} {_t(base.get((c['runtime'], c['pair'], c['n']))):>8}")
    out.append("tok/s and speedups end to end: prompt processing included; under load, all streams' tokens")
    for u in result.get("unsteady", []):
        out += textwrap.wrap(unsteady_line(u), width, subsequent_indent="  ")
    out.append("")
    for rec in result["recommendations"]:
        at = f" at N={rec['n']}" if rec["n"] > 1 else ""
        if rec["speculate"] is None:
            out.append(f"{rec['runtime']}{at}: no recommendation: {rec['why']}")
            continue
        b, best = rec["base"], rec["best"]
        on = f" on the {quant_of(b['pair'])} target" if multi_pair and quant_of(b["pair"]) else ""
        if rec["speculate"]:
            stop = DraftPolicy.parse(best["policy"]).confidence
            quant = quant_of(best["pair"]) if multi_pair else None
            head = (f"{rec['runtime']}{at}: speculate with {best['drafter']} at gamma {best['gamma']}"
                    f"{'' if stop is None else f', stopping below p {stop:g}'}"
                    f"{f' on the {quant} target' if quant else ''}: {best['tokens_per_s']:.1f} tok/s, "
                    f"{best['tokens_per_s'] / b['tokens_per_s']:.2f}x the baseline{on} ({b['tokens_per_s']:.1f})")
            out += textwrap.wrap(head, width, subsequent_indent="  ")
        else:
            out += textwrap.wrap(f"{rec['runtime']}{at}: do not speculate{on} ({b['tokens_per_s']:.1f} tok/s; the best "
                                 f"candidate, {Candidate(**best).label()}, "
                                 f"{'predicted ' + _x(best['predicted'], down=True) if best['measured'] is None else 'measured ' + _x(best['measured'])}). "
                                 f"{rec['why']}", width, subsequent_indent="  ")
        lib = library_line(rec, pairs)
        # the commands whole, one line each, ready to paste (the only lines that may pass `width`)
        out += [f"    {cmd}" for cmd in ([lib] if lib else []) + [harness_line(rec, pair_arg)]]
    for said in result.get("per_task", []):  # where categories, turns or input lengths want other settings
        out += textwrap.wrap(said, width, subsequent_indent="  ")
    return out + [line for e in result.get("load") or [] for line in load_lines(e, pairs, width)]


# ---------------------------------------------------------------- under an open-loop load


def load_lines(e: dict, pairs: dict, width: int = 100) -> list[str]:
    """One runtime under --request-rate (an entry of tune.json's "load"): the setting chosen at each
    offered rate, where speculation is turned off (measured, predicted), and the commands to paste."""
    if e.get("skipped"):
        return textwrap.wrap(f"{e['runtime']} under load: not measured: {e['skipped']}", width, subsequent_indent="  ")
    among = " among those meeting --slo" if e["slo"] else ""
    said = "; ".join(_at_rate(p, e["slo"]) for p in e["rates"])
    out = [""] + textwrap.wrap(f"{e['runtime']} under load, the setting of the lowest median latency{among} at each "
                               f"offered rate: {said}.", width, subsequent_indent="  ")
    kept = [p for p in e["rates"] if p["kept"] and p["choice"]]
    if not kept:
        return out + textwrap.wrap(f"{e['runtime']}: no rate kept its schedule with an answer: nothing to choose from.",
                                   width, subsequent_indent="  ")
    off = e["off_above"]
    predicted = _off_text(e["predicted_off_above"], [p["rate"] for p in kept if p.get("predicted_speculate")]) \
        if any(p.get("predicted_speculate") is not None for p in kept) else "not predicted (no batched step prices)"
    if off is None:
        where = _off_text(None, [p["rate"] for p in kept if p["choice"]["setting"] != BASELINE])
        return out + textwrap.wrap(f"{e['runtime']}: {where}: no one switch says it (predicted from the batched step costs: "
                                   f"{predicted}).", width, subsequent_indent="  ")
    spec = next((p["choice"] for p in reversed(kept) if p["choice"]["setting"] != BASELINE), None)
    out += textwrap.wrap(f"{e['runtime']}: {_off_text(off)} (predicted from the batched step costs: {predicted}).",
                         width, subsequent_indent="  ")

    def rec(speculate: bool) -> dict:  # a recommendation as library_line reads it: the chosen drafter's setting
        best = next((s for s in e["settings"] if spec and s["drafter"] == spec["drafter"]), None)
        return {"name": e["name"], "speculate": speculate, "base": {"pair": e["pair"]},
                "best": {"pair": e["pair"], **best} if best else None}

    if off == "never":
        commands = [library_line(rec(False), pairs)]
    elif off == "always":
        commands = [library_line(rec(True), pairs)]
    else:
        from spec_harness import runtimes

        if runtimes.get(e["name"]).switches_by_load:
            out += textwrap.wrap(f"In {e['name']}'s own terms, speculation off above {e['batch_at_switch']} running "
                                 f"requests (about as many as were in the server at {off} req/s):", width, subsequent_indent="  ")
            commands = [library_line(rec(True), pairs, up_to=e["batch_at_switch"])]
        else:
            out += textwrap.wrap(f"{e['name']} has no switch by load: run it with speculation below {off} req/s and "
                                 "without it above:", width, subsequent_indent="  ")
            commands = [library_line(rec(True), pairs), library_line(rec(False), pairs)]
    return out + [f"    {c}" for c in commands if c]


def _at_rate(p: dict, slo: bool) -> str:
    """One offered rate's choice in words ("2 req/s: model g=4, E2E p50 1.20 s")."""
    c = p["choice"]
    if not p["kept"]:
        return f"{p['rate']} req/s: not kept by the client"
    if c is None:
        return f"{p['rate']} req/s: no request answered"
    name = c["setting"] if c["setting"] == BASELINE else f"{c['drafter']} g={c['gamma']}"
    met = "" if not slo else ", meets the targets" if c["meets"] else f", misses them (goodput {c['goodput']:.2f} req/s)"
    e2e = c["e2el_p50_s"]
    return f"{p['rate']} req/s: {name}, E2E p50 " + (f"{e2e:.2f} s" if e2e >= 0.1 else f"{1000 * e2e:.0f} ms") + met


def _off_text(off: Optional[str], on: list[str] = ()) -> str:
    """Where speculation stops being the choice, in words (`on`: the rates where it is, said where
    no one switch says them)."""
    if off is None:
        return f"speculate at {', '.join(on)} req/s only" if on else "no rate to say"
    if off == "always":
        return "speculate at every rate measured"
    if off == "never":
        return "do not speculate at any rate measured"
    return f"speculate up to {off} req/s, turn it off above"
