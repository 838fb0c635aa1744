"""The verdict: the answer a person came for, first. "On this machine, does speculation pay, where,
and why not" in one screen that fits 100 columns: one line per runtime and drafting (its device,
target-only and speculative tokens/s, speedup, alpha_hat, tau and the largest cost of
reports/explain.py in a few words); one line per group of runtimes whose greedy baselines agree,
the greedy mismatches and what was skipped; then, last, at most three sentences: the fastest
setting and where speculation pays, where it loses and the one reason, and the setting the cost
model expects to do better (with the `harness run` line that tries it).

Why a cost and not acceptance: tau, the tokens a round yields (from alpha_hat and the drafted
length), is what speculation could gain if drafting and verifying were free, and it is at least 1,
so acceptance bounds the gain but cannot by itself make speculation lose; the costs (a draft
token c, a verify pass v, the loop's o per round, prefill; explain's factors) take the speedup
from tau down to what was measured, and the largest of them is the one to act on. Acceptance is
the reason only where tau stays near 1 (under NO_GAIN: too few drafts accepted for any cost to
matter).

`harness run`, `sweep` and `report` print it last (harness/summary.py); report.md opens with it,
as a table and the same sentences (reports/markdown.py), beside verdict.png (plots.verdict).
A line is a runtime and drafting under one set of settings (pair, sampling, length, device) at
the gamma that ran fastest; one request at a time only (under load: the report's own section).
What it does not do: compute metrics or factors (core/metrics.py, reports/explain.py), group
rows (tables.py) or print.
"""

from __future__ import annotations

import textwrap
from typing import Optional

from spec_harness.core import drafters, metrics
from spec_harness.reports import explain, mismatch, routing, tables

WIDTH = 100  # the console's columns
NAME_WIDTH = 24  # a line's runtime label; a longer one has a line of its own, its numbers under it
PAYS = 1.0  # a speedup above this pays
NOTICEABLE = 1.05  # the cost model's setting is named when it predicts at least this factor over the run
COSTS = ("draft", "verify", "overhead", "costs", "prefill")  # explain's factors that take speed from tau
# tau below this: even free drafting and verifying would gain at most 25 %, less than a verify pass
# alone costs beyond a step on these machines (v 1.3-3 target steps): acceptance is the reason
NO_GAIN = 1.25
SAME_SPEEDUP = 0.02  # decode and end-to-end speedups this close are one number


def _short_device(device: Optional[str]) -> str:
    """'gpu (all layers)' -> 'gpu'; 'cuda:0' -> 'cuda:0'; None -> '-'."""
    return "-" if not device else str(device).split(" (")[0]


def _registry_name(label: str) -> str:
    """'torch [kernels, eagle3]' -> 'torch'."""
    return label.split(" [")[0]


def _key(rec: dict) -> tuple:
    return tuple(str(rec.get(k)) for k in tables.SETTINGS)


def largest_cost(e: dict) -> Optional[tuple[str, float]]:
    """(key, factor) of the explanation's largest cost below 1; ("acceptance", tau / (g + 1)) where
    tau is about 1; None when nothing costs speed or nothing could be decomposed."""
    if e is None or e["unavailable"]:
        return None
    if e["tau_model"] < NO_GAIN:
        return "acceptance", e["tau_model"] / (e["gamma_eff"] + 1)
    costs = [(f["key"], f["factor"]) for f in e["factors"] if f["key"] in COSTS and f["factor"] < 1]
    return min(costs, key=lambda kv: kv[1]) if costs else None


def loss_words(e: Optional[dict]) -> str:
    """The largest cost of an explanation in a few words: its measure, in target steps (a draft
    token's, a verify pass's, the loop's per round, a whole round's where draft and verify are not
    separable), and its factor, e.g. 'verify = 3.3 steps x0.45'."""
    if e is None:
        return "-"
    if e["unavailable"]:
        return e["unavailable"].split(" (")[0]
    top = largest_cost(e)
    if top is None:
        return "none"
    key, f = top
    words = {
        "acceptance": lambda: f"acceptance: {e['tau_model']:.2f} tok/round",
        "draft": lambda: f"draft = {e['c']:.2f} steps/tok",
        "verify": lambda: f"verify = {e['v']:.1f} steps",
        "overhead": lambda: f"loop = {e['o']:.2f} steps",
        "costs": lambda: f"round = {e['cost_per_round']:.1f} steps",
        "prefill": lambda: "prefill",
    }[key]()
    return f"{words} x{f:.2f}"


def _range(xs: list, spec: str) -> str:
    """'0.58-0.67' over xs, or one value where they print alike."""
    lo, hi = min(xs), max(xs)
    return format(lo, spec) if format(lo, spec) == format(hi, spec) else f"{format(lo, spec)}-{format(hi, spec)}"


REASONS = {  # the one reason of the cells that lose, from their explanations
    "acceptance": lambda es: (f"too few drafts are accepted (alpha_hat {_range([e['alpha_hat'] for e in es], '.2f')}, "
                              f"{_range([e['tau_model'] for e in es], '.2f')} tokens a round: at most that gain even "
                              "with free drafting and verifying)"),
    "draft": lambda es: f"a draft token costs {_range([e['c'] for e in es], '.2f')} target steps",
    "verify": lambda es: (f"a verify pass of {_range([e['gamma'] + 1 for e in es], 'd')} tokens costs "
                          f"{_range([e['v'] for e in es], '.1f')} target steps (the paper assumes 1)"),
    "overhead": lambda es: f"the loop spends {_range([e['o'] for e in es], '.2f')} target steps a round outside the models",
    "costs": lambda es: (f"a round costs {_range([e['cost_per_round'] for e in es], '.1f')} target steps for "
                         f"{_range([e['tau_model'] for e in es], '.2f')} tokens (draft and verify not separable)"),
    "prefill": lambda es: "the prompt's prefill in both models weighs on these short generations",
}


def _command(rec: dict, gamma: int) -> str:
    """The `harness run` line that runs a verdict line's runtime and drafting at another gamma."""
    from spec_harness.models.presets import DEFAULT_PAIR, PRESETS

    parts = ["harness run", f"--runtime {_registry_name(rec['runtime'])}"]
    quant = rec.get("target_quant")
    pair = str(rec.get("pair") or "").removesuffix(f"@{quant}" if quant else "")
    if pair.split(":")[0] in PRESETS and pair != DEFAULT_PAIR:
        parts.append(f"--pair {pair}")
    if quant:
        parts.append(f"--target-quant {quant}")
    if rec.get("torch_forward") == "eager":
        parts.append("--torch-forward eager")
    if rec.get("drafter") and drafters.of(rec["drafter"]) != drafters.default():
        parts.append(f"--drafter {rec['drafter']}")
    if rec.get("draft_policy") and rec["draft_policy"] != "fixed":
        parts.append(f"--draft-policy {rec['draft_policy']}")
    parts.append(f"--gamma {gamma}")
    if rec.get("temperature"):
        parts.append(f"--temperature {rec['temperature']:g}")
        if rec.get("top_p") not in (None, 1.0):
            parts.append(f"--top-p {rec['top_p']:g}")
        if rec.get("top_k"):
            parts.append(f"--top-k {rec['top_k']}")
    return " ".join(parts)


def _same_settings(a: dict, b: dict) -> bool:
    return all(str(a.get(k)) == str(b.get(k)) for k in tables.SETTINGS if k != "runtime")


def _named(cells: list[dict]) -> list[dict]:
    """Each cell with `name`: its runtime and whatever settings vary among the cells."""
    vary = [k for k in tables.varying(cells) if k not in ("device", "dtype")]
    return [{**c, "name": " · ".join(x for x in (c["runtime"], tables.settings_label(c, vary)) if x)} for c in cells]


def _lines(cells: list[dict], expls: dict) -> list[dict]:
    """A line per runtime and drafting under one set of settings, at its fastest gamma, each
    runtime's baseline speed on its first line (its draftings share it); a runtime without
    speculative cells keeps a line of its baseline."""
    best: dict[tuple, dict] = {}
    for c in cells:
        if c["mode"] == "speculative" and ((b := best.get(_key(c))) is None or (c["tokens_per_s"] or 0) > (b["tokens_per_s"] or 0)):
            best[_key(c)] = c
    lines: list[dict] = []
    for b in (c for c in cells if c["mode"] == "baseline"):
        mine = [x for x in best.values() if x["runtime_name"] == b["runtime"] and _same_settings(x, b)]
        if not mine:
            lines.append({**b, "base_tokens_per_s": b["tokens_per_s"], "tokens_per_s": None, "expl": None,
                          "loss": "no speculative rows"})
        for i, x in enumerate(mine):
            e = expls.get((_key(x), x["gamma"]))
            decode = x["tokens_per_s"] / b["tokens_per_s"] if x["tokens_per_s"] and b["tokens_per_s"] else None
            lines.append({**x, "base_tokens_per_s": b["tokens_per_s"] if i == 0 else None, "expl": e, "loss": loss_words(e),
                          "decode_speedup": decode})
    return lines + [{**x, "base_tokens_per_s": None, "expl": None, "loss": "no baseline"} for x in best.values()
                    if not any(x["runtime"] == y["runtime"] and _same_settings(x, y) for y in lines)]


def _flagged(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The cells, at every concurrency (load must not change acceptance), whose acceptance is not
    what their models predict, and those whose sampled tokens are not the target's samples."""
    every = _named(tables.cells([r for r in rows if not r.get("synthetic")]))
    return ([c for c in every if (c.get("acceptance_check") or {}).get("verdict") in ("below", "above")],
            [c for c in every if (c.get("output_check") or {}).get("verdict") == "unlikely"])


def build(rows: list[dict]) -> dict:
    """The verdict of loaded rows (reports.runs: views by drafting applied). -> {"lines" (_lines:
    cell records of tables.py with `name`, `expl`, `loss`, `base_tokens_per_s`), "fastest" (the
    fastest cell, baseline or speculative), "pays", "loses", "reason", "try", "off_models",
    "unlikely_outputs", "agreement", "mismatches", "skipped", "rules"}; one request at a time but
    for the flagged cells; text() and markdown() put it in words."""
    one = [r for r in rows if metrics.one_at_a_time(r) and not r.get("synthetic")]
    cells = _named(tables.cells(one))
    lines = _lines(cells, {(_key(e), e["gamma"]): e for e in explain.explain(one)})
    spec = [x for x in lines if x.get("speedup") is not None]
    loses = sorted((x for x in spec if x["speedup"] <= PAYS), key=lambda x: x["speedup"])
    off, unlikely = _flagged(rows)
    return {"lines": lines, "fastest": max((c for c in cells if c["tokens_per_s"] is not None), key=lambda c: c["tokens_per_s"],
                                           default=None),
            "pays": sorted((x for x in spec if x["speedup"] > PAYS), key=lambda x: -x["speedup"]), "loses": loses,
            "reason": _reason(loses), "try": _try(lines), "off_models": off, "unlikely_outputs": unlikely,
            "agreement": agreement_groups(one), "mismatches": _mismatches(one), "skipped": _skipped(rows), "rules": _rules(one),
            "routing": [routing.sentence(r) for r in routing.routings(one) if r.differs]}


def _rules(rows: list[dict]) -> list[str]:
    """The acceptance rules of runtimes sampling at the same temperature, where they differ (greedy
    rows all use one rule; a sampled row beside a greedy one is no difference)."""
    by_t: dict = {}
    for r in rows:
        if r.get("temperature"):
            by_t.setdefault(r["temperature"], []).append(r)
    return max((tables.verify_rules(rs) for rs in by_t.values()), key=len, default=[])


def _reason(loses: list[dict]) -> Optional[dict]:
    """The one reason of the losing lines: the largest cost most of them share (ties: the one of the
    worst speedup), in words with the range of its measure over those lines."""
    keyed = [(largest_cost(x["expl"])[0], x) for x in loses if largest_cost(x["expl"])]
    if not keyed:
        return None
    counts: dict[str, int] = {}
    for k, _ in keyed:
        counts[k] = counts.get(k, 0) + 1
    key = max(counts, key=lambda k: (counts[k], -min(x["speedup"] for kk, x in keyed if kk == k)))
    mine = [x for k, x in keyed if k == key]
    others = {}
    for k, x in keyed:
        if k != key:
            others.setdefault(k, []).append(x)
    return {"key": key, "text": REASONS[key]([x["expl"] for x in mine]), "lines": mine,
            "others": [{"key": k, "text": REASONS[k]([x["expl"] for x in xs]), "lines": xs} for k, xs in others.items()]}


def _try(lines: list[dict]) -> Optional[dict]:
    """The setting the cost model expects to do best beyond what ran: the line whose best gamma at
    its measured costs (explain's what-if) predicts the highest speedup, if it is another gamma, at
    most twice the largest gamma run (v beyond that is extrapolated too far) and at least NOTICEABLE
    over the run; else, where nothing pays, the acceptance it would take."""
    cands = [x for x in lines if x["expl"] and x["expl"].get("what_if")]
    most = max((x["gamma"] for x in cands), default=0)
    better = [x for x in cands if x["expl"]["what_if"]["best_gamma"] != x["expl"]["gamma"]
              and x["expl"]["what_if"]["best_gamma"] <= 2 * most  # not far beyond the verify passes measured
              and x["expl"]["what_if"]["run_speedup_best"] >= NOTICEABLE * x["expl"]["measured"]]
    if better:
        x = max(better, key=lambda x: x["expl"]["what_if"]["run_speedup_best"])
        w = x["expl"]["what_if"]
        return {"label": x["name"], "gamma": x["gamma"], "best_gamma": w["best_gamma"], "predicted": w["run_speedup_best"],
                "measured": x["speedup"], "command": _command(x, w["best_gamma"])}
    if cands and all(x["speedup"] <= PAYS for x in cands):
        need = [(x["expl"]["what_if"]["breakeven_alpha_any_gamma"], x) for x in cands]
        reachable = [(b, x) for b, x in need if b is not None]
        if reachable:
            b, x = min(reachable, key=lambda t: t[0])
            return {"label": x["name"], "breakeven_alpha": b, "alpha_hat": x["alpha_hat"]}
    return None


def agreement_groups(rows: list[dict]) -> list[dict]:
    """Runtimes whose greedy baselines gave the same ids on every prompt they share, grouped per
    pair: [{"pair", "runtimes", "prompts", "parts_at"}], "parts_at" the first differing token
    positions against the other groups (None for a group alone)."""
    measured = [r for r in rows if "runtime_name" not in r]  # views carry copies of their runtime's baseline
    recs = mismatch.agreement(measured)
    out = []
    for pair in dict.fromkeys(r["pair"] for r in recs):
        mine = [r for r in recs if r["pair"] == pair]
        names = list(dict.fromkeys([r["a"] for r in mine] + [r["b"] for r in mine]))
        same = {n: {n} for n in names}
        for a in names:
            for b in names:
                ab = [r for r in mine if {r["a"], r["b"]} == {a, b}]
                if a != b and ab and all(r["agree"] for r in ab):
                    same[a].add(b)
        groups = list(dict.fromkeys(tuple(n for n in names if n in same[a]) for a in names))
        prompts = len({r["prompt"] for r in mine})
        for g in groups:
            apart = [r["position"] for r in mine if (r["a"] in g) != (r["b"] in g) and r["position"] is not None]
            out.append({"pair": pair, "runtimes": list(g), "prompts": prompts,
                        "parts_at": (min(apart), max(apart)) if apart else None})
    return out


def _mismatches(rows: list[dict]) -> list[dict]:
    """Per runtime label with greedy mismatches: near-tie flips, suspected bugs, unexplained."""
    out = []
    for rt in dict.fromkeys(r["runtime"] for r in mismatch.mismatch_rows(rows)):
        ms = [r.get("mismatch") for r in mismatch.mismatch_rows(rows) if r["runtime"] == rt]
        verdicts = [m.get("verdict") if isinstance(m, dict) else None for m in ms]
        out.append({"runtime": rt, "flips": verdicts.count(mismatch.NEAR_TIE), "bugs": verdicts.count(mismatch.SUSPECTED_BUG),
                    "unexplained": sum(v not in (mismatch.NEAR_TIE, mismatch.SUSPECTED_BUG) for v in verdicts)})
    return out


def _skipped(rows: list[dict]) -> list[dict]:
    """Runtimes and draftings that did not run: [{"runtime", "reason", "skipped"}] (skipped: the
    runtime said it cannot; else an error), each once; one that did not run under load only (at
    --concurrency above 1 or --request-rate) is named so ("torch under load")."""
    seen = dict.fromkeys((r["runtime"] + ("" if metrics.one_at_a_time(r) else " under load"), r["error"])
                         for r in rows if r.get("error"))
    return [{"runtime": rt, "skipped": err.startswith("skipped: "), "reason": err.removeprefix("skipped: ")}
            for rt, err in seen]


# ---------------------------------------------------------------- words


def _names(xs: list[str], most: int = 4) -> str:
    return ", ".join(xs[:most]) + (f" and {len(xs) - most} more" if len(xs) > most else "")


def _fastest(f: dict) -> str:
    if f["mode"] == "baseline":
        return f"Fastest here: {f['name']} without speculation, {f['tokens_per_s']:.1f} tok/s decoding."
    return (f"Fastest here: {f['name']} at gamma {f['gamma']}, {f['tokens_per_s']:.1f} tok/s decoding "
            f"({f['speedup']:.2f}x its own baseline end to end)." if f.get("speedup") is not None
            else f"Fastest here: {f['name']} at gamma {f['gamma']}, {f['tokens_per_s']:.1f} tok/s.")


def sentences(v: dict) -> list[str]:
    """At most three sentences: the fastest setting and where speculation pays; where it loses and
    the one reason; the setting the cost model expects to do better."""
    out = []
    if v["fastest"] is None:
        return ["Nothing was measured successfully."]
    pays = v["pays"]
    head = _fastest(v["fastest"])
    if pays:
        head += " Speculation pays in " + _names([f"{x['name']} ({_speedups(x)})" for x in pays], 3) + "."
    elif v["loses"]:
        best = max(v["loses"], key=lambda x: x["speedup"])
        head += f" Speculation pays nowhere here (best {best['name']}, {_speedups(best)})."
    out.append(head)
    if v["loses"]:
        r = v["reason"]
        mine = r["lines"] if r else v["loses"]
        text = f"It loses in {_names([x['name'] for x in mine], 4)} ({_range([x['speedup'] for x in mine], '.2f')}x{_e2e(mine)})"
        text += f": {r['text']}" if r else ""
        for o in (r["others"] if r else [])[:2]:
            text += f"; {_names([x['name'] for x in o['lines']], 2)} ({_range([x['speedup'] for x in o['lines']], '.2f')}x): {o['text']}"
        out.append(text + ".")
    t = v["try"]
    if t and "command" in t:
        out.append(f"Cost model: {t['label']} at gamma {t['best_gamma']} would give about {t['predicted']:.2f}x "
                   f"({t['measured']:.2f}x at gamma {t['gamma']}): {t['command']}")
    elif t:
        out.append(f"Cost model: no gamma pays at these costs; {t['label']} would need alpha_hat above "
                   f"{t['breakeven_alpha']:.2f} (now {t['alpha_hat']:.2f}): a better-matched draft.")
    return out


def _differs(x: dict) -> bool:
    """Whether a line's decode speedup is another number than its end-to-end one (prefill)."""
    d, e = x.get("decode_speedup"), x.get("speedup")
    return d is not None and e is not None and abs(d / e - 1) > SAME_SPEEDUP


def _speedups(x: dict) -> str:
    """`1.22x`, or `0.57x end to end, 1.30x decode` where a long prefill makes them differ."""
    return f"{x['speedup']:.2f}x end to end, {x['decode_speedup']:.2f}x decode" if _differs(x) else f"{x['speedup']:.2f}x"


def _e2e(lines: list[dict]) -> str:
    return " end to end" if any(_differs(x) for x in lines) else ""


def notes(v: dict) -> list[str]:
    """The lines between the table and the sentences: baselines that agree, greedy mismatches,
    what did not run, different acceptance rules, the best setting per task where it differs."""
    out = list(v.get("routing") or [])
    groups = v["agreement"]
    for g in groups:
        n = len(g["runtimes"])
        if len(groups) == 1 and n > 1:
            out.append(f"Greedy baselines: {'both' if n == 2 else f'all {n}'} runtimes give the same tokens on "
                       f"{g['prompts']} prompt{'s' * (g['prompts'] != 1)}.")
        elif n > 1:
            apart = "" if not g["parts_at"] else f" (the others part at token {_range(list(g['parts_at']), 'd')})"
            out.append(f"Same greedy tokens on all {g['prompts']} prompts: {', '.join(g['runtimes'])}{apart}.")
    alone = [g["runtimes"][0] for g in groups if len(g["runtimes"]) == 1]
    if alone and len(groups) > 1:
        out.append(f"Greedy tokens of their own: {', '.join(alone)} (near ties between runtimes: see the report).")
    for c in v["unlikely_outputs"]:
        o = c["output_check"]
        out.append(f"OUTPUT NOT THE TARGET'S SAMPLES in {c['name']}{_at_gamma(c)}: its {o['tokens']} tokens are far less "
                   f"likely under the target than the target's own samples at these settings (z = {o['z']:.1f}): "
                   "its sampler draws from another distribution (the rows' `output_check`).")
    for c in v["off_models"]:
        out.append(f"ACCEPTANCE NOT THE MODELS' in {c['name']}{_at_gamma(c)}: "
                   + off_models_words(c["acceptance_check"]))
    for m in v["mismatches"]:
        if m["bugs"]:
            out.append(f"SUSPECTED BUG in {m['runtime']}: {m['bugs']} greedy output(s) left the baseline where numerics "
                       "cannot explain it (the rows' `mismatch` field).")
    flips = [m for m in v["mismatches"] if m["flips"]]
    if flips:
        out.append("Near-tie flips of greedy outputs (numerics of batched passes; evidence in the report): "
                   + ", ".join(f"{m['runtime']} {m['flips']}" for m in flips) + ".")
    blind = [m for m in v["mismatches"] if m["unexplained"]]
    if blind:
        out.append("Greedy outputs that left their baseline, without evidence: "
                   + ", ".join(f"{m['runtime']} {m['unexplained']}" for m in blind) + ".")
    skipped = [s["runtime"] for s in v["skipped"] if s["skipped"]]
    if skipped:
        out.append(f"Skipped: {', '.join(dict.fromkeys(skipped))} (reasons in the report).")
    errors = [s for s in v["skipped"] if not s["skipped"]]
    if errors:
        out.append(f"Errors: {', '.join(dict.fromkeys(s['runtime'] for s in errors))} (errors.log and the report).")
    if len(v["rules"]) > 1:
        out.append(f"The runtimes accept drafts by different rules ({', '.join(v['rules'])}): their alpha_hat differ in meaning.")
    return out


def _at_gamma(c: dict) -> str:
    return "" if c.get("gamma") is None else f" at gamma {c['gamma']}"


def off_models_words(chk: dict) -> str:
    """A cell's pooled acceptance check in words: what it accepted, what its models predict for its
    rule, and that the difference is not the models'."""
    return (f"alpha_hat {chk['alpha']:.2f} over {chk['tested']} tested drafts, where {chk['source']} and the target "
            f"predict {chk['alpha_lo']:.2f}-{chk['alpha_hi']:.2f} for its rule ({chk['rule']}): not the models "
            "(the rows' `expected_acceptance`).")


def cut(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 1] + "…"


# (key, header above, header, width, format): one space between columns
COLUMNS = [("device", "", "device", 6, ""), ("gamma", "", "g", 2, "d"), ("base", "base", "tok/s", 7, ".1f"),
           ("spec", "spec", "tok/s", 7, ".1f"), ("speedup", "", "speedup", 7, ".2fx"), ("alpha_hat", "", "alpha", 5, ".2f"),
           ("tau", "", "tau", 5, ".2f")]
# where some line's decode and end-to-end speedups differ (long inputs): both, each named
BOTH = [*COLUMNS[:4], ("speedup", "speedup", "e2e", 7, ".2fx"), ("decode_speedup", "speedup", "decode", 7, ".2fx"),
        *COLUMNS[5:]]


def columns(v: dict) -> list[tuple]:
    """The console's columns: the decode speedup beside the end-to-end one where they differ."""
    return BOTH if any(_differs(x) for x in v["lines"]) else COLUMNS


def table_rows(v: dict) -> list[dict]:
    """The lines as plain values: runtime (with whatever settings vary), device, gamma, tok/s, ..."""
    out = []
    for x in v["lines"]:
        out.append({"runtime": x["name"], "device": _short_device(x.get("device")),
                    "gamma": x.get("gamma"), "base": x.get("base_tokens_per_s"), "spec": x.get("tokens_per_s"),
                    "speedup": x.get("speedup"), "decode_speedup": x.get("decode_speedup"), "alpha_hat": x.get("alpha_hat"),
                    "tau": (x["expl"] or {}).get("tau_model"), "loss": x["loss"]})
    return out


def _fmt(x, spec: str) -> str:
    """A value by a format spec whose trailing 'x' is appended as a sign; None -> ''."""
    if x is None:
        return ""
    return format(x, spec[:-1]) + "x" if spec.endswith("x") else format(x, spec)


def text(v: dict, width: int = WIDTH) -> list[str]:
    """The console's verdict, every line at most `width` columns: the table, the notes, then the
    sentences (last, where a person looks first)."""
    rows, cols = table_rows(v), columns(v)
    name_w = min(NAME_WIDTH, max([len("runtime")] + [len(r["runtime"]) for r in rows]))
    above = " " * name_w + "".join(f" {a:>{w}}" for _, a, _, w, _ in cols)
    head = f"{'runtime':<{name_w}}" + "".join(f" {h:>{w}}" for _, _, h, w, _ in cols) + "  largest cost"
    out = [cut(above.rstrip(), width), cut(head, width)]
    for r in rows:
        name = r["runtime"]
        if len(name) > name_w:  # a long name on a line of its own, the numbers under it
            out.append(cut(name, width))
            name = ""
        cells = f"{name:<{name_w}}" + "".join(f" {_fmt(r[k], spec):>{w}}" for k, _, _, w, spec in cols)
        out.append(cut(f"{cells}  {r['loss']}", width))
    wrap = textwrap.TextWrapper(width=width, subsequent_indent="  ", break_on_hyphens=False)
    for s in notes(v) + sentences(v):
        out += wrap.wrap(s)
    return out


MD_COLUMNS = [("runtime", "runtime"), ("device", "device"), ("gamma", "gamma"), ("base", "base decode tok/s"),
              ("spec", "spec decode tok/s"), ("speedup", "speedup end to end"), ("decode_speedup", "decode speedup"),
              ("alpha_hat", "alpha_hat"), ("tau", "tau"), ("loss", "largest cost")]


def markdown(v: dict) -> list[str]:
    """The report's opening: the sentences, the same lines as a table, and the notes."""
    out = [f"- {s}" for s in sentences(v)] + [""]
    both = any(_differs(x) for x in v["lines"])
    cols = [(k, h) for k, h in MD_COLUMNS if both or k != "decode_speedup"]
    out += ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    for r in table_rows(v):
        vals = {**r, **{k: _fmt(r[k], spec) for k, _, _, _, spec in BOTH if spec}}
        out.append("| " + " | ".join(str(vals[k]) or "-" for k, _ in cols) + " |")
    return out + [""] + [f"- {n}" for n in notes(v)]


def record(v: dict) -> dict:
    """The verdict for report.json: its table, sentences and notes."""
    return {"lines": table_rows(v), "sentences": sentences(v), "notes": notes(v)}
