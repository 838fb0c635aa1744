"""`harness tune --request-rate`: tune's fourth step, what to run at each offered request rate.

    load/RUNTIME/  for each server runtime whose confirm run measured a candidate: the best
                   measured candidate of each drafter and the baseline under the open-loop load of
                   --request-rate (its --slo, --num-requests, --burstiness, --max-concurrency), every
                   rate of a setting on one server start, as `harness run --request-rate` measures it

Then per runtime and rate the setting to run (`choose`): among the settings whose requests meet
the --slo targets (MET_SHARE of them), the lowest median E2E latency; where none meets them, the
most goodput; without --slo, the lowest median E2E latency. Where the choice is speculative up to
a rate and the target alone above it, "turn speculation off above R req/s", with the rate the
queueing prediction (reports/open_loop.py's `predict`) puts it at, and in the server's own terms
where it has a switch by load (Runtime.switches_by_load: vLLM's speculation by running batch size,
the batch size at R from Little's law: requests finished per second x their median E2E).

A runtime that cannot take an open load (in-process) is said, not measured; one whose every
candidate the probe ruled out has no confirmed setting to load.
What it does not own: the probe, the prediction and the confirm (harness/tune.py), the requests'
summaries (runtimes/open_loop.py), the records and the prediction per rate (reports/open_loop.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from spec_harness.core.errors import HarnessError
from spec_harness.core.results import rate_text, read_results, read_run_json

BASELINE = "target alone"


def split(run) -> tuple:
    """(the run's open load, the run without it): tune's probe and confirm runs are closed-loop.
    A load that none of --runtime can take is refused before anything runs."""
    from spec_harness import runtimes
    from spec_harness.harness.open_load import OpenLoad

    if not any(runtimes.get(n).serves_concurrently for n in run.runtimes):
        raise HarnessError(f"--request-rate loads a server runtime ({runtimes.listed(runtimes.able('serves_concurrently'))}); "
                           f"--runtime {','.join(run.runtimes)} has none")
    return run.open_load, replace(run, open_load=OpenLoad())


def settings(picks: list) -> list:
    """The candidates loaded: the best measured at N = 1 of each drafter (tune.Candidate), fastest
    first, on the fastest one's target variant."""
    measured = sorted((c for c in picks if c.n == 1 and c.tokens_per_s), key=lambda c: -c.tokens_per_s)
    best: dict = {}
    for c in (c for c in measured if c.pair == measured[0].pair):  # one target variant: one server each
        best.setdefault(str(c.drafter), c)
    return list(best.values())


def step(tc, recommendations: list[dict], picks: dict, confirm_config: Callable, log: Callable[[str], None]) -> list[dict]:
    """Measure each server runtime's loaded settings under tc.open_load (into load/RUNTIME/) and
    choose per rate; -> one entry per runtime recommended at N = 1 (tune.json's "load")."""
    from spec_harness import runtimes
    from spec_harness.harness.runner import run as run_grid

    out = []
    rates = ", ".join(rate_text(r) for r in tc.open_load.rates)
    for rec in (r for r in recommendations if r["n"] == 1):
        runtime, name = rec["runtime"], rec["name"]
        chosen = settings(picks.get(runtime, []))
        if not runtimes.get(name).serves_concurrently:
            out.append({"runtime": runtime, "name": name, "skipped": "in-process: an open-loop load needs a server"})
            continue
        if not chosen:
            out.append({"runtime": runtime, "name": name, "skipped": "no candidate was confirmed (the probe ruled them "
                        "all out, or the confirm run measured none): nothing to load"})
            continue
        cfg = confirm_config(tc, runtime, chosen)
        cfg = replace(cfg, concurrencies=[1], open_load=tc.open_load, out=tc.out / "load" / cfg.out.name)
        log(f"tune, under --request-rate: {runtime}: the baseline and " + ", ".join(c.label() for c in chosen)
            + f" at {rates} req/s -> {cfg.out}")
        run_grid(cfg)
        rows = read_results(cfg.out / "results.jsonl")
        costs = (read_run_json(cfg.out) or {}).get("batched_costs")
        out.append({"runtime": runtime, "name": name, "pair": chosen[0].pair, "slots": tc.open_load.slots,
                    "slo": bool(tc.open_load.slo), "folder": str(cfg.out),
                    "settings": [{"drafter": str(c.drafter), "gamma": c.gamma, "policy": c.policy} for c in chosen],
                    **choose(rows, costs, name)})
    return out


def choose(rows: list[dict], costs: Optional[dict], name: str) -> dict:
    """Per offered rate of runtime `name`'s open-loop rows, the setting to run (module docstring),
    and where speculation stops being the choice, measured and predicted: {"rates": [...],
    "off_above", "predicted_off_above", "batch_at_switch"}."""
    from spec_harness.reports import open_loop
    from spec_harness.reports.runs import by_drafting

    viewed = by_drafting(rows)
    recs = [r for r in open_loop.records(viewed) if r["runtime"].split(" [")[0] == name]
    open_loop.predict(recs, viewed, costs)
    per_rate = []
    for rate in sorted({r["rate"] for r in recs}, key=float):
        at = [r for r in recs if r["rate"] == rate]
        base = next((r for r in at if "base_errors" in r), None)  # each view holds a copy of the baseline
        options = ([_option(base, "base")] if base else []) + [_option(r, "spec") for r in at if "spec_errors" in r]
        answered = [o for o in options if o["e2el_p50_s"] is not None]
        pick = _best(answered, at[0]["slo"]) if answered else None
        predicted = [r["predicted_pays"] for r in at if r.get("predicted_pays") is not None]
        per_rate.append({"rate": rate, "kept": all(r["kept"] == "yes" for r in at), "choice": pick,
                         "options": options, "predicted_speculate": any(predicted) if predicted else None})
    kept = [p for p in per_rate if p["kept"] and p["choice"]]
    measured = _off_above(kept, lambda p: p["choice"]["setting"] != BASELINE)
    predicted = _off_above([p for p in kept if p["predicted_speculate"] is not None], lambda p: p["predicted_speculate"])
    batch = None
    if measured and measured not in ("always", "never"):
        last = next(p for p in kept if p["rate"] == measured)["choice"]
        batch = max(1, round(last["request_throughput"] * last["e2el_p50_s"]))
    return {"rates": per_rate, "off_above": measured, "predicted_off_above": predicted, "batch_at_switch": batch}


def _option(rec: dict, side: str) -> dict:
    """One setting at one rate: its name, its drafter and gamma (none for the baseline), its
    median E2E, goodput and whether it meets the targets."""
    from spec_harness.reports import open_loop

    spec = side == "spec"
    return {"setting": rec["runtime"] if spec else BASELINE, "drafter": rec["drafter"] if spec else None,
            "gamma": rec["gamma"] if spec else None, "e2el_p50_s": rec.get(f"{side}_e2el_p50_s"),
            "request_throughput": rec.get(f"{side}_request_throughput"), "goodput": rec.get(f"{side}_goodput"),
            "meets": open_loop.meets(rec, side) if rec.get("slo") else None}


def _best(options: list[dict], slo: bool) -> dict:
    """The setting to run among `options` (module docstring)."""
    met = [o for o in options if o["meets"]] if slo else options
    if met:
        return min(met, key=lambda o: o["e2el_p50_s"])
    return min(options, key=lambda o: (-(o["goodput"] or 0.0), o["e2el_p50_s"]))


def _off_above(per_rate: list[dict], speculates: Callable[[dict], bool]) -> Optional[str]:
    """The highest rate up to which speculation is chosen at every rate and not above it; "always"
    or "never" where it is chosen at every rate or at none; None where the choices alternate (no
    one switch says them) or no rate is there."""
    if not per_rate:
        return None
    flags = [speculates(p) for p in per_rate]
    if all(flags):
        return "always"
    if not any(flags):
        return "never"
    k = flags.index(False)
    return per_rate[k - 1]["rate"] if k and not any(flags[k:]) else None
