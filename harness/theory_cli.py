"""The text `harness theory` prints: c (given or from FLOPs), the expected speedup at (alpha, gamma),
the breakeven alpha, the best gamma, and a small table over gamma.

What it does not do: any formula (core/theory.py), reading models (models/shape.py) or flag
parsing (harness/cli.py).
"""

from __future__ import annotations

from typing import Optional

from spec_harness.core import theory
from spec_harness.core.errors import HarnessError
from spec_harness.models import shape

CONTEXT = 0  # --context: the context length the attention term is added at (0: none)
MAX_GAMMA = 8  # --max-gamma: the last gamma of the table


def resolve_c(c: Optional[float], target: Optional[str], draft: Optional[str], context: int) -> tuple[float, list[str]]:
    """-> (c, lines describing where it came from). Exactly one of --c or --target/--draft."""
    if c is not None and (target or draft):
        raise HarnessError("give either --c or --target and --draft, not both")
    if c is not None:
        theory.check_inputs(c=c)
        return c, [f"c = {c:.4f} (given)"]
    if not (target and draft):
        raise HarnessError("give --c C, or --target and --draft (HF ids, local folders, config.json or .gguf files)")
    t = shape.flops_for(target, "target")
    d = shape.flops_for(draft, "draft")
    at = f" at context {context}" if context else ""
    width = max(len(target), len(draft))
    lines = [
        f"target {target:<{width}}  {t.flops(context):>18,} FLOPs/token{at}  ({t.matmul_params:,} matmul weights)",
        f"draft  {draft:<{width}}  {d.flops(context):>18,} FLOPs/token{at}  ({d.matmul_params:,} matmul weights)",
    ]
    c = theory.c_flops(t, d, context)
    lines.append(f"c_flops = {c:.4f} (draft / target FLOPs per token; a hardware-free lower bound on c in practice)")
    return c, lines


def _x(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _n(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}"


def _a(v: Optional[float]) -> str:
    return "never (c > 1)" if v is None else f"{v:.3f}"


def summary_lines(alpha: Optional[float], gamma: Optional[int], c: float, max_gamma: int) -> list[str]:
    theory.check_inputs(alpha=alpha, gamma=gamma, c=c)
    if max_gamma < 1:
        raise HarnessError(f"--max-gamma must be >= 1, got {max_gamma}")
    lines = []
    if alpha is not None and gamma is not None:
        s = theory.expected_speedup(alpha, gamma, c)
        lines += [
            f"alpha {alpha}, gamma {gamma}, c {c:.4f}:",
            f"  expected tokens per round   {theory.expected_tokens(alpha, gamma):.2f}",
            f"  expected speedup            {_x(s)}" + ("" if s >= 1 else "  (slower than the target alone)"),
        ]
    if gamma is not None:
        lines.append(f"  breakeven alpha at gamma {gamma:<3}{_a(theory.breakeven_alpha(gamma, c))}")
    if alpha is not None:
        g = theory.optimal_gamma(alpha, c)
        s = theory.expected_speedup(alpha, g, c)
        note = "" if s > 1 else "  (no gamma beats the target alone: do not speculate)"
        lines.append(f"  best gamma for alpha {alpha:<6} {g} -> {_x(s)}{note}")
    gammas = range(1, max(max_gamma, gamma or 0) + 1)
    return lines + [""] + table_lines(theory.gamma_table(alpha, c, gammas), gamma)


def table_lines(rows: list[dict], mark_gamma: Optional[int]) -> list[str]:
    """gamma | E[tokens] | E[speedup] (when alpha is known) | breakeven alpha; '<' marks --gamma."""
    with_alpha = "expected_speedup" in rows[0]
    head = f"{'gamma':>5}" + (f"  {'E[tokens]':>9}  {'E[speedup]':>10}" if with_alpha else "") + f"  {'breakeven alpha':>15}"
    out = [head]
    for r in rows:
        cells = f"  {_n(r['expected_tokens']):>9}  {_x(r['expected_speedup']):>10}" if with_alpha else ""
        out.append(f"{r['gamma']:>5}{cells}  {_a(r['breakeven_alpha']):>15}" + (" <" if r["gamma"] == mark_gamma else ""))
    return out
