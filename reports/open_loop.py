"""The report's "Open-loop load" section, open_loop.csv and its figure: per runtime (as
reports.runs.by_drafting names it: a drafting is a runtime of its own beside its baseline) and
offered rate (--request-rate), the target alone and speculative side by side: achieved request and
token throughput, p50/p90 TTFT, TPOT and E2E latency, p90 ITL, goodput under --slo; the client's
scheduling lag; then per runtime the highest rate that meets the latency targets with and without
speculation, and the rates where speculation lowers the median latency and where it stops.

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

MET_SHARE = 0.9  # a rate meets the targets when at least this share of its answered requests meets every one
METRICS = ("request_throughput", "output_throughput", "ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "tpot_p90_s",
           "itl_p90_s", "e2el_p50_s", "e2el_p90_s", "goodput", "errors", "lag_p99_s", "client_cpu_share")
COLS = [("runtime", "runtime", "s"), ("rate", "offered req/s", "s"), ("requests", "requests", ""),
        *((f"{m}_{k}", f"{m} {what}", fmt) for k, what, fmt in (
            ("request_throughput", "req/s", ".2f"), ("ttft_p90_s", "TTFT p90 s", ".3f"), ("tpot_p90_s", "TPOT p90 ms", "ms"),
            ("e2el_p50_s", "E2E p50 s", ".2f"), ("goodput", "goodput req/s", ".2f")) for m in ("base", "spec")),
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


def rate_text(x) -> str:
    """A row's request_rate as a flag gives it: 1, 0.25, inf."""
    return f"{float(x):g}"


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
                                     "burstiness": r.get("burstiness"), "gamma": None, "drafter": None})
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


def _met(rec: dict, side: str) -> Optional[bool]:
    """Whether a side of a record meets the targets (MET_SHARE of its answered requests); None without --slo."""
    good, done = rec.get(f"{side}_goodput"), rec.get(f"{side}_request_throughput")
    if not rec.get("slo") or good is None or not done:
        return None if not rec.get("slo") else False
    return good >= MET_SHARE * done


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
            best = {s: max((c["rate"] for c in both if _met(c, s)), key=_rate, default=None) for s in ("base", "spec")}
            parts.append(f"the targets are met up to {best['base'] or 'no rate'} req/s without speculation, "
                         f"{best['spec'] or 'no rate'} with it")
        pays = [c["rate"] for c in both if c["spec_e2el_p50_s"] < c["base_e2el_p50_s"]]
        if len(pays) == len(both):
            parts.append(f"speculation lowers the median latency at every rate measured (up to {both[-1]['rate']} req/s)")
        elif not pays:
            parts.append("speculation raises the median latency at every rate measured")
        else:
            stop = next(c["rate"] for c in both if c["rate"] not in pays and _rate(c["rate"]) > _rate(pays[0]))
            parts.append(f"speculation lowers the median latency at {', '.join(pays)} req/s and stops paying at {stop} req/s")
        out.append(f"{name}: " + "; ".join(parts) + ".")
    lost = [c for c in recs if c["kept"] != "yes"]
    if lost:
        out.append("Not kept by the client (its sends lagged: the offered rate was not the one measured): "
                   + ", ".join(f"{c['runtime']} at {c['rate']} req/s ({c['kept'][4:-1]})" for c in lost) + ".")
    return out


def _cell(c: dict, key: str, fmt: str) -> str:
    v = c.get(key)
    if v is None:
        return "-"
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
