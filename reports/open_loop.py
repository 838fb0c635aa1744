"""The report's "Open-loop load" section, open_loop.csv and its figure: per runtime (as
reports.runs.by_drafting names it: a drafting is a runtime of its own beside its baseline) and
offered rate (--request-rate), the target alone and speculative side by side: achieved request and
token throughput, p50/p90 TTFT, TPOT and E2E latency, p90 ITL, goodput under --slo; the client's
scheduling lag; then per runtime the highest rate that meets the latency targets with and without
speculation, and the rates where speculation lowers the median latency and where it stops.

The prediction (`predict`): a request's latency E2E = prefill + tokens x the per-token decode time
at b sequences in the server / (1 - rate x prefill), b = rate x E2E (Little's law), at most the
slots; solved for b. The per-token times at b are the ones measured one request at a time, grown
as the batched cost model (reports/concurrency.py's `at_load`: the target's one-token pass and the
speculative speedup, priced at 1 and at the slots, linear between) grows them; the server spends
rate x prefill of each second on arriving prompts, which the others' steps wait for. A rate at
which more requests arrive than the slots finish (rate x E2E at full slots > slots, or prompts
alone fill the server) saturates: its queue grows for as long as requests come. Speculation pays
at a rate where its E2E is below the target alone's (a saturated side loses; both saturated: the
one that finishes more per second wins). The queue's own variance is not in it.

Every number is the cell's summary as `summary` in runtimes/open_loop.py computed it when the cell
ran (each row of the cell carries it in extra["cell"]["open_loop"]); nothing is defined here. A
rate whose sends lagged their plan (lag p99 above core/metrics.py's LAG_KEPT_S) is listed, marked
not kept, and left out of the decisions and the figure.
What it does not own: closed loops (reports/concurrency.py), the rows (harness/under_load.py).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from spec_harness.core.metrics import LAG_KEPT_S
from spec_harness.core.results import rate_text

MET_SHARE = 0.9  # a rate meets the targets when at least this share of its answered requests meets every one
METRICS = ("request_throughput", "output_throughput", "ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "tpot_p90_s",
           "itl_p90_s", "e2el_p50_s", "e2el_p90_s", "goodput", "errors", "lag_p99_s", "client_cpu_share")
COLS = [("runtime", "runtime", "s"), ("rate", "offered req/s", "s"), ("requests", "requests", ""),
        *((f"{m}_{k}", f"{m} {what}", fmt) for k, what, fmt in (
            ("request_throughput", "req/s", ".2f"), ("ttft_p90_s", "TTFT p90 s", ".3f"), ("tpot_p90_s", "TPOT p90 ms", "ms"),
            ("e2el_p50_s", "E2E p50 s", ".2f"), ("e2e_predicted_s", "E2E predicted s", ".2f"),
            ("goodput", "goodput req/s", ".2f")) for m in ("base", "spec")),
        ("kept", "schedule kept", "s")]
TEXT = (
    "Requests sent at the offered rate whatever the answers before them were doing (an open loop: seeded gamma "
    "arrivals, `--burstiness`; the same schedule and prompts for the target alone and with speculation), as "
    "`vllm bench serve --request-rate` sends them. TTFT to the first streamed token; TPOT = (E2E - TTFT) / "
    "(tokens - 1); a chunk of k tokens counts as k tokens; goodput: requests per second meeting every `--slo` "
    f"target. A rate is kept when the client's sends lagged their plan by at most {1000 * LAG_KEPT_S:.0f} ms "
    "(p99); a rate not kept is not the rate offered.")


def _rate(x) -> float:
    return float(x)  # "inf" too


def records(rows: list[dict]) -> list[dict]:
    """One record per (pair, runtime view, offered rate, burstiness) that has a baseline or a
    speculative cell: each side's summary, prefixed base_ / spec_."""
    cells: dict[tuple, dict] = {}
    for r in rows:
        summary = ((r.get("extra") or {}).get("cell") or {}).get("open_loop")
        if r.get("request_rate") is None or summary is None:
            continue
        key = (r["pair"], r["runtime"], rate_text(r["request_rate"]), r.get("burstiness"))
        rec = cells.setdefault(key, {"pair": r["pair"], "runtime": r["runtime"], "rate": rate_text(r["request_rate"]),
                                     "burstiness": r.get("burstiness"), "gamma": None, "drafter": None,
                                     "slots": r.get("concurrency")})
        side = "spec" if r["mode"] == "speculative" else "base"
        if side == "spec":
            rec.update(gamma=r.get("gamma"), drafter=r.get("drafter"))
        rec["requests"] = summary["requests"]
        rec["slo"] = "goodput" in summary
        for m in METRICS:
            rec[f"{side}_{m}"] = summary.get(m)
    out = []
    for rec in cells.values():
        lags = [rec.get(f"{s}_lag_p99_s") for s in ("base", "spec") if rec.get(f"{s}_lag_p99_s") is not None]
        rec["kept"] = "yes" if all(x <= LAG_KEPT_S for x in lags) else f"no (lag p99 {1000 * max(lags):.0f} ms)"
        out.append(rec)
    return sorted(out, key=lambda c: (c["pair"], c["runtime"], c["burstiness"] or 0, _rate(c["rate"])))


def meets(rec: dict, side: str) -> bool:
    """Whether a side of a record (of a run with --slo) meets the targets: MET_SHARE of its answered requests."""
    good, done = rec.get(f"{side}_goodput"), rec.get(f"{side}_request_throughput")
    return good is not None and bool(done) and good >= MET_SHARE * done


def predict(recs: list[dict], rows: list[dict], costs: Optional[dict]) -> None:
    """Each record's predicted E2E latency with and without speculation (module docstring:
    `base_e2e_predicted_s`, `spec_e2e_predicted_s`, None when that side saturates) and whether
    speculation pays there (`predicted_pays`), from `costs` (run.json's batched_costs, by pair);
    left out where the run has no N = 1 rows or prices."""
    from spec_harness.reports import concurrency

    inputs: dict[tuple, Optional[dict]] = {}  # at_load's, once per runtime and setting, for all its rates
    for rec in recs:
        rate, slots = _rate(rec["rate"]), rec.get("slots")
        if not slots or math.isinf(rate):
            continue
        key = (rec["pair"], rec["runtime"], rec["gamma"], slots)
        if key not in inputs:
            inputs[key] = concurrency.at_load(rows, (costs or {}).get(rec["pair"]), rec["runtime"], rec["gamma"], slots)
        m = inputs[key]
        if m is None:
            continue
        growth = lambda b: 1 + (m["step_growth"] - 1) * (b - 1) / max(slots - 1, 1)  # noqa: E731
        gain = lambda b: m["speedup_1"] + (m["speedup_n"] - m["speedup_1"]) * (b - 1) / max(slots - 1, 1)  # noqa: E731
        sides = {}
        for side, r in (("base", m["base"]), ("spec", m["spec"])):
            per_token = 1 / r["decode_tps_median"] if r["decode_tps_median"] else None
            if per_token is None or r["ttft_median_s"] is None:
                break
            scale = (lambda b: growth(b)) if side == "base" else (lambda b: growth(b) * m["speedup_1"] / gain(b))
            sides[side] = queue_e2e(rate, r["ttft_median_s"], r["tokens"] / r["requests"], per_token, scale, slots)
        if len(sides) < 2:
            continue
        (eb, cb), (es, cs) = sides["base"], sides["spec"]
        rec.update(base_e2e_predicted_s=eb, spec_e2e_predicted_s=es, predicted_pays=_pays(eb, cb, es, cs))


def _pays(base_e2e: Optional[float], base_capacity: float, spec_e2e: Optional[float], spec_capacity: float) -> bool:
    """Whether speculation pays at a rate: the lower latency where neither saturates; the side that
    does not saturate where one does; the one that finishes more requests per second where both do."""
    if base_e2e is not None and spec_e2e is not None:
        return spec_e2e < base_e2e
    if base_e2e is None and spec_e2e is None:
        return spec_capacity > base_capacity
    return spec_e2e is not None


def queue_e2e(rate: float, prefill: float, tokens: float, per_token: float, scale, slots: int) -> tuple[Optional[float], float]:
    """(E2E at `rate`, None when saturated; the requests per second the slots finish when full):
    E2E = prefill + tokens x per_token x scale(b) / (1 - rate x prefill), b = rate x E2E sequences
    (1 to slots): of each second, rate x prefill goes to arriving prompts."""
    free = 1.0 - rate * prefill
    if free <= 0:
        return None, 1.0 / prefill
    e2e = lambda b: prefill + tokens * per_token * scale(min(max(b, 1.0), slots)) / free  # noqa: E731
    capacity = slots / e2e(slots)
    if rate >= capacity:
        return None, capacity
    b = 1.0
    for _ in range(200):  # b = rate x e2e(b) has one root below the slots: e2e grows with b, slowlier than b / rate
        b = 0.5 * b + 0.5 * rate * e2e(b)
    return e2e(b), capacity


def first_loss(recs: list[dict], key: str) -> Optional[str]:
    """The lowest rate at which speculation does not pay by `key` (a truth value per record), the
    records sorted by rate; None where it pays at every one."""
    return next((c["rate"] for c in recs if c.get(key) is False), None)


def decisions(recs: list[dict]) -> list[str]:
    """Per pair and runtime (kept rates only): the highest rate meeting the targets with and
    without speculation, and where speculation lowers the median E2E latency and where it stops."""
    out = []
    for key in dict.fromkeys((c["pair"], c["runtime"]) for c in recs):
        same = [c for c in recs if (c["pair"], c["runtime"]) == key and c["kept"] == "yes"]
        both = [c for c in same if c.get("spec_e2el_p50_s") is not None and c.get("base_e2el_p50_s") is not None]
        if not both:
            continue
        name, parts = key[1], []
        if both[0].get("slo"):
            best = {s: max((c["rate"] for c in both if meets(c, s)), key=_rate, default=None) for s in ("base", "spec")}
            upto = lambda r: f"up to {r} req/s" if r else "at no rate"  # noqa: E731
            parts.append(f"the targets are met {upto(best['base'])} without speculation, {upto(best['spec'])} with it")
        pays = [c["rate"] for c in both if c["spec_e2el_p50_s"] < c["base_e2el_p50_s"]]
        if len(pays) == len(both):
            parts.append(f"speculation lowers the median latency at every rate measured (up to {both[-1]['rate']} req/s)")
        elif not pays:
            parts.append("speculation raises the median latency at every rate measured")
        else:  # where it stops: the first rate above the lowest that pays where it does not (none: it pays above)
            stop = next((c["rate"] for c in both if c["rate"] not in pays and _rate(c["rate"]) > _rate(pays[0])), None)
            loses = [c["rate"] for c in both if c["rate"] not in pays]
            parts.append(f"speculation lowers the median latency at {', '.join(pays)} req/s and "
                         + (f"stops paying at {stop} req/s" if stop else f"raises it at {', '.join(loses)} req/s"))
        predicted = [c for c in both if c.get("predicted_pays") is not None]
        if predicted:
            stop = first_loss(predicted, "predicted_pays")
            parts.append("predicted from the batched step costs: " + (
                "it pays at every rate" if stop is None else "it pays at no rate" if stop == predicted[0]["rate"]
                else f"it stops paying at {stop} req/s"))
        out.append(f"{name}: " + "; ".join(parts) + ".")
    lost = [c for c in recs if c["kept"] != "yes"]
    if lost:
        out.append("Not kept by the client (its sends lagged: the offered rate was not the one measured): "
                   + ", ".join(f"{c['runtime']} at {c['rate']} req/s ({c['kept'][4:-1]})" for c in lost) + ".")
    return out


def _cell(c: dict, key: str, fmt: str) -> str:
    v = c.get(key)
    if v is None:
        return "saturated" if key.endswith("e2e_predicted_s") and "predicted_pays" in c else "-"
    if fmt == "ms":
        return f"{1000 * v:.0f}"
    return format(v, fmt) if fmt else str(v)


def markdown(recs: list[dict], png: Optional[str]) -> list[str]:
    """The report's section "Open-loop load"."""
    if not recs:
        return []
    lines = ["## Open-loop load: request rates, latency and goodput", "", TEXT, "",
             "| " + " | ".join(h for _, h, _ in COLS) + " |", "|" + " --- |" * len(COLS)]
    lines += ["| " + " | ".join(_cell(c, k, fmt) for k, _, fmt in COLS) + " |" for c in recs]
    lines += [""] + [f"- {x}" for x in decisions(recs)]
    if png:
        lines += ["", f"![open-loop load against the offered rate]({png})"]
    return lines + [""]


def plot(recs: list[dict], path: Path) -> Optional[Path]:
    """Against the offered rate (finite, kept rates): achieved output tokens/s, p90 TPOT, and
    goodput where there are targets; per runtime view, the target alone dashed, speculative solid."""
    kept = [c for c in recs if c["kept"] == "yes" and not math.isinf(_rate(c["rate"]))]
    if len({c["rate"] for c in kept}) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("output_throughput", "output tokens/s"), ("tpot_p90_s", "TPOT p90 (s)")]
    if any(c.get("slo") for c in kept):
        panels.append(("goodput", "goodput (req/s)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8))
    for ax, (metric, ylabel) in zip(axes, panels):
        for runtime in dict.fromkeys(c["runtime"] for c in kept):
            cs = [c for c in kept if c["runtime"] == runtime]
            xs = [_rate(c["rate"]) for c in cs]
            line, = ax.plot(xs, [c.get(f"spec_{metric}") for c in cs], "o-", label=f"{runtime}")
            ax.plot(xs, [c.get(f"base_{metric}") for c in cs], "s--", color=line.get_color(), alpha=0.6,
                    label=f"{runtime}: target alone")
        ax.set_xlabel("offered request rate (req/s)")
        ax.set_ylabel(ylabel)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
