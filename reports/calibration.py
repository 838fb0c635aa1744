"""`harness calibrate`'s tables, plots and verdicts: this machine's decode speedup as a function
of acceptance, per runtime and gamma, beside theory.

Input: forced-acceptance rows (`synthetic`, runtimes/loop.py's accept rule core.sampling.forced or
llama-server's --spec-synth-rates: each draft position accepted with probability alpha whatever
the tokens, every model pass run for real) and the same runtime's baseline rows. Per runtime and
gamma:
- measured: pooled decode rate (tokens / (wall - prefill)) of the alpha cell over the baseline's;
- costs: c, v, o, o_base pooled over all alphas of that gamma (core.metrics.step_costs: they do
  not depend on alpha), c_flops from the pair's shapes;
- curves over alpha: Leviathan's E[speedup] with c from FLOPs and with c measured (Theorem 3.8),
  the cost model with c, v, o (explain's: tau (1 + o_base) / (g c + v + o)), and the ceiling of
  perfect overlap (a round costing max(g c, v) + o: drafting hidden behind verification);
- breakeven alpha: where the measured points cross 1 (linear between them), and each model's;
- the pair's own alpha_hat at that gamma, from a normal run folder (--run), and a verdict.
What it does not do: measure (harness/runner.py, RunConfig.forced) or read files (reports/runs.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from matplotlib.figure import Figure

from spec_harness.core import metrics, theory
from spec_harness.reports import tables

GOAL = 0.10  # measured within this fraction of the cost model: the calibration's goal
ALPHAS = [i / 50 for i in range(51)]  # where the curves are drawn


def _decode_rate(rows: list[dict]) -> Optional[float]:
    """Pooled tokens per second after prefill (core.metrics.tokens_per_s of the summed rows)."""
    p = metrics.pooled(rows)
    return metrics.tokens_per_s(p["new_tokens"], p["wall_s"], p["prefill_s"] or 0.0)


def _crossing(points: list[tuple[float, float]]) -> Optional[float]:
    """The first alpha at which a rising series of (alpha, speedup) reaches 1, linear in between;
    0 when it starts at or above 1, None when it never does."""
    pts = sorted(points)
    if pts and pts[0][1] >= 1:
        return pts[0][0]
    for (a0, s0), (a1, s1) in zip(pts, pts[1:]):
        if s0 < 1 <= s1:
            return a0 + (1 - s0) * (a1 - a0) / (s1 - s0)
    return None


def _overlap(a: float, g: int, k: theory.RoundCosts) -> float:
    """tau (1 + o_base) / (max(g c, v) + o): the ceiling if drafting overlapped verification."""
    return theory.expected_tokens(a, g) * (1 + k.o_base) / (max(g * k.c, k.verify(g)) + k.overhead(g))


def entries(rows: list[dict], c_flops_for: Callable[[Optional[dict]], Optional[float]],
            pair_rows: Optional[list[dict]] = None) -> list[dict]:
    """One record per (runtime, pair, gamma) of the forced-acceptance rows: points, costs, curves,
    breakevens, the pair's alpha_hat (from pair_rows, a normal run's rows) and the goal's check."""
    ok = [r for r in rows if not r.get("error")]
    out = []
    for group in tables.groups(ok, ["runtime", "pair", "temperature", "max_new_tokens", "concurrency"]):
        base = [r for r in group if r["mode"] == "baseline"]
        spec = [r for r in group if r["mode"] == "speculative" and r.get("synthetic")]
        base_rate = _decode_rate(base)
        for g in sorted({r["gamma"] for r in spec}):
            cell = [r for r in spec if r["gamma"] == g]
            k = metrics.step_costs(metrics.pooled(cell), metrics.pooled(base))
            if base_rate is None or None in (k["c"], k["v"], k["o"], k["o_base"]):
                continue
            costs = theory.RoundCosts(k["c"], k["v"], k["o"], k["o_base"])
            points, realized = [], []  # (alpha, measured speedup); the alpha_hat the draws gave
            for alpha in sorted({r["forced_rates"][0] for r in cell if r.get("forced_rates")}):
                at = [r for r in cell if r["forced_rates"][0] == alpha]
                rate = _decode_rate(at)
                if rate is not None:
                    points.append((alpha, rate / base_rate))
                    realized.append(metrics.alpha_hat([rd for r in at for rd in r["rounds"]]))
            first = cell[0]
            c_flops = c_flops_for(first.get("pair_refs"), first.get("drafter"))
            # the model at the acceptance the random draws realized (a few hundred rounds stray from alpha)
            model = [(a, theory.costed_speedup(a if ah is None else ah, g, costs)) for (a, _), ah in zip(points, realized)]
            n = first.get("concurrency") or 1
            e = {"runtime": first["runtime"] + (f" at N = {n}" if n > 1 else ""), "concurrency": n, "pair": first["pair"], "pair_label": first.get("pair_label") or first["pair"],
                 "gamma": g, "points": points, "realized_alpha": realized, "c": k["c"], "v": k["v"], "o": k["o"], "o_base": k["o_base"],
                 "c_flops": c_flops, "costs": costs,
                 "breakeven_measured": _crossing(points),
                 "breakeven_model": theory.breakeven_alpha(g, costs),
                 "breakeven_c_measured": theory.breakeven_alpha(g, k["c"]),
                 "breakeven_flops": theory.breakeven_alpha(g, c_flops) if c_flops is not None else None,
                 "off_model": max((abs(m / p - 1) for (_, m), (_, p) in zip(points, model) if p), default=None),
                 "pair_alpha": _pair_alpha(pair_rows, first["runtime"], g)}
            out.append(e)
    return out


def _pair_alpha(rows: Optional[list[dict]], runtime: str, gamma: int) -> Optional[float]:
    if not rows:
        return None
    # reports/runs.py names rows of other draft policies or drafters "RUNTIME [how]": these drafted as usual
    spec = [r for r in rows if r["runtime"] == runtime and r["mode"] == "speculative" and r.get("gamma") == gamma
            and not r.get("error")]
    return metrics.alpha_hat([rd for r in spec for rd in r.get("rounds") or []]) if spec else None


def verdict(e: dict) -> str:
    """One sentence: where this runtime breaks even at this gamma, against theory, and the pair."""
    be, flops = e["breakeven_measured"], e["breakeven_flops"] or e["breakeven_c_measured"]
    what = "c from FLOPs" if e["breakeven_flops"] is not None else "c measured"
    head = f"{e['runtime']} at gamma {e['gamma']} on this machine "
    if be is None:
        head += "does not break even at any alpha measured"
    else:
        head += f"needs alpha >= {be:.2f} to break even"
    head += f" (theory with {what} only: {flops:.2f})" if flops is not None else ""
    costs = f"c = {e['c']:.2f}, v = {e['v']:.2f}, o = {e['o']:.2f} target steps where theory has v = 1, o = 0"
    a = e["pair_alpha"]
    if a is None:
        return f"{head}; {costs}."
    if be is not None and a >= be:
        return f"{head}; your pair reaches {a:.2f}: it pays here ({costs})."
    if flops is not None and a >= flops:
        return (f"{head}; your pair reaches {a:.2f}, enough in theory: a hardware-and-runtime problem first "
                f"({costs}), a model problem second.")
    return (f"{head}; your pair reaches {a:.2f}, below even the theory's breakeven: a model problem first "
            f"(a draft closer to the target), the hardware and runtime second ({costs}).")


def plot(mine: list[dict], path: Path) -> Optional[Path]:
    """One runtime: measured speedup vs alpha per gamma, with the four curves and the breakevens."""
    if not mine:
        return None
    fig = Figure(figsize=(8.5, 5.5))
    ax = fig.add_subplot()
    for i, e in enumerate(sorted(mine, key=lambda x: x["gamma"])):
        color, g, k = f"C{i % 10}", e["gamma"], e["costs"]
        ax.plot(*zip(*e["points"]), "o", color=color, label=f"gamma {g}: measured")
        ax.plot(ALPHAS, [theory.costed_speedup(a, g, k) for a in ALPHAS], "-", color=color, lw=1.2,
                label=f"gamma {g}: cost model (c {k.c:.2f}, v {e['v']:.2f}, o {e['o']:.2f})")
        ax.plot(ALPHAS, [theory.expected_speedup(a, g, k.c) for a in ALPHAS], "--", color=color, lw=0.8,
                label=f"gamma {g}: Leviathan, c measured")
        if e["c_flops"] is not None:
            ax.plot(ALPHAS, [theory.expected_speedup(a, g, e["c_flops"]) for a in ALPHAS], ":", color=color, lw=0.8,
                    label=f"gamma {g}: Leviathan, c FLOPs {e['c_flops']:.3f}")
        ax.plot(ALPHAS, [_overlap(a, g, k) for a in ALPHAS], "-.", color=color, lw=0.6, alpha=0.7,
                label=f"gamma {g}: perfect overlap, max(g c, v) + o")
        if e["breakeven_measured"] is not None:
            ax.axvline(e["breakeven_measured"], color=color, lw=0.6, ls=(0, (1, 3)))
        if e["pair_alpha"] is not None:
            ax.plot([e["pair_alpha"]], [theory.costed_speedup(e["pair_alpha"], g, k)], "*", ms=13, color=color,
                    markeredgecolor="black", label=f"gamma {g}: your pair's alpha_hat {e['pair_alpha']:.2f}")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xlabel("alpha (forced acceptance per draft token)")
    ax.set_ylabel("decode speedup over the same runtime's baseline (x)")
    ax.set_title(f"{mine[0]['runtime']}: speedup vs acceptance on this machine\n{mine[0]['pair_label']}", fontsize=10)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def markdown(es: list[dict], plots: list[str]) -> str:
    out = ["# Calibration: speedup vs acceptance on this machine", ""]
    alphas = sorted({a for e in es for a, _ in e["points"]})
    head = "| runtime | gamma | " + " | ".join(f"alpha {a:g}" for a in alphas) + \
        " | breakeven (measured) | cost model | c measured only | c FLOPs only | c | v | o | worst vs cost model |"
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    f = lambda x, s=".2f": "-" if x is None else format(x, s)  # noqa: E731
    for e in es:
        got = dict(e["points"])
        out.append(f"| {e['runtime']} | {e['gamma']} | " + " | ".join(f(got.get(a)) + ("x" if a in got else "") for a in alphas)
                   + f" | {f(e['breakeven_measured'])} | {f(e['breakeven_model'])} | {f(e['breakeven_c_measured'])} | "
                   f"{f(e['breakeven_flops'])} | {f(e['c'], '.3f')} | {f(e['v'])} | {f(e['o'])} | "
                   f"{_pct(e['off_model'])} |")
    out += ["", "Measured: decode speedup (tokens per second after prefill, over the same runtime's baseline) with each "
            "draft position accepted with probability alpha whatever the tokens, every model pass run for real. Cost "
            "model: tau (1 + o_base) / (g c + v + o) with c, v, o measured in these rows (explain's); Leviathan: "
            "tau / (g c + 1); perfect overlap: a round costing max(g c, v) + o. Goal: the measured points within "
            f"{GOAL:.0%} of the cost model (at the alpha_hat the random draws realized: 'worst vs cost model').", ""]
    out += [f"- {verdict(e)}" for e in es] + [""]
    out += [f"![{p}]({p})\n" for p in plots]
    return "\n".join(out)
