"""Theory: what speculative decoding can gain at best, from cost ratios and acceptance alone.

Two halves:
- cost: FLOPs per generated token from a model's matmul weights (counted from its shape by
  models/shape.py) and the FLOPs cost ratio c_flops = draft / target.
- gain: Leviathan et al. 2023 under their i.i.d. acceptance assumption: expected tokens per round
  (Eq. 1), the expected walltime improvement E[speedup] (Theorem 3.8), the factor of extra
  arithmetic (Theorem 3.11), the breakeven alpha for a gamma, and the best gamma for (alpha, c).
  The same with measured costs the paper leaves out (RoundCosts: a verify pass dearer than one
  step, per-round and baseline overhead), for `harness explain`.

FLOPs convention (the first seed's): 2 x the matmul weights a token passes through, plus
optionally the attention term at a context length L: 4 * layers * L * (heads * head_dim), QK^T and
AV, one multiply-add (2 FLOPs) per element.

What it does not do: read model files (models/shape.py), measure anything (the measured c is
metrics.c_measured), or predict memory bandwidth, the cost of batching the verify pass or
per-round overhead: the ceiling of Theorem 3.8 is algorithmic, not a hardware bound; RoundCosts
only carries such costs in once they are measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

from spec_harness.core.errors import HarnessError

MAX_GAMMA = 32  # search range of optimal_gamma


# ---------------------------------------------------------------- cost: FLOPs per token


@dataclass(frozen=True)
class FlopsPerToken:
    """Matmul weights of one model and what it needs for the attention term (models/shape.py
    counts them from a config or a GGUF file)."""

    source: str  # where the numbers came from, for reports
    matmul_params: int
    layers: int
    attn_width: int  # heads * head_dim (query side)

    def flops(self, context: int = 0) -> int:
        """FLOPs per generated token; with context > 0 the attention term at that length is added."""
        return 2 * self.matmul_params + attention_flops(self.layers, self.attn_width, context)


def attention_flops(layers: int, attn_width: int, context: int) -> int:
    """QK^T and AV for one new token against `context` cached positions, all layers."""
    if context < 0:
        raise HarnessError(f"--context must be >= 0, got {context}")
    return 4 * layers * attn_width * context


def c_flops(target: FlopsPerToken, draft: FlopsPerToken, context: int = 0) -> float:
    """Leviathan's cost coefficient from arithmetic alone: draft FLOPs / target FLOPs per token."""
    return draft.flops(context) / target.flops(context)


# ---------------------------------------------------------------- gain: Leviathan et al. 2023


def check_inputs(alpha: Optional[float] = None, gamma: Optional[int] = None, c: Optional[float] = None) -> None:
    """HarnessError naming the flag for values outside the formulas' domain."""
    if alpha is not None and not 0 <= alpha <= 1:
        raise HarnessError(f"--alpha must be in [0, 1], got {alpha}")
    if gamma is not None and gamma < 1:
        raise HarnessError(f"--gamma must be >= 1, got {gamma}")
    if c is not None and not c >= 0:
        raise HarnessError(f"--c must be >= 0 (draft step time / target step time), got {c}")


def expected_tokens(alpha: float, gamma: int) -> float:
    """Eq. 1: expected tokens per round, (1 - a^(g+1)) / (1 - a); g + 1 at a = 1."""
    if alpha == 1:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def expected_tokens_rounds(alpha: float, drafted: Sequence[int]) -> float:
    """Eq. 1 round by round: the mean of (1 - a^(d+1)) / (1 - a) over rounds that drafted d
    tokens each (d 0: one token), for policies whose rounds draft different lengths."""
    return sum(expected_tokens(alpha, d) for d in drafted) / len(drafted)


def expected_speedup(alpha: float, gamma: int, c: float) -> float:
    """Theorem 3.8: E[speedup] = (1 - a^(g+1)) / ((1 - a)(g c + 1))."""
    return costed_speedup(alpha, gamma, RoundCosts(c))


@dataclass(frozen=True)
class RoundCosts:
    """What a round costs, in target one-token steps, including what Theorem 3.8 leaves out.

    c: one draft token; v: the verify pass over gamma + 1 tokens (1 in the paper); o: sampling
    and orchestration per round (0 in the paper); o_base: the baseline's own sampling and
    orchestration per target step (0 in the paper). v and o may be numbers or functions of gamma
    (see piecewise_linear) when a run measured how they grow with the batch.
    """

    c: float
    v: Union[float, Callable[[int], float]] = 1.0
    o: Union[float, Callable[[int], float]] = 0.0
    o_base: float = 0.0

    def verify(self, gamma: int) -> float:
        return self.v(gamma) if callable(self.v) else self.v

    def overhead(self, gamma: int) -> float:
        return self.o(gamma) if callable(self.o) else self.o

    def per_round(self, gamma: int) -> float:
        """g c + v + o: one round's cost in target steps."""
        return gamma * self.c + self.verify(gamma) + self.overhead(gamma)


def costed_speedup(alpha: float, gamma: int, costs: RoundCosts, share: float = 1.0) -> float:
    """E[tokens] (1 + o_base) / (g c + v + o): Theorem 3.8 with the verify pass, the per-round
    overhead and the baseline's per-step overhead priced in (v = 1, o = o_base = 0 gives 3.8).

    share: the share of rounds that draft (prompt lookup finds no match in the others); a round
    without a draft is one baseline step, 1 + o_base, emitting one token, so
        (share E[tokens] + 1 - share) (1 + o_base) / (share (g c + v + o) + (1 - share) (1 + o_base)).
    """
    tokens = share * expected_tokens(alpha, gamma) + (1 - share)
    return tokens * (1 + costs.o_base) / (share * costs.per_round(gamma) + (1 - share) * (1 + costs.o_base))


def piecewise_linear(points: dict[float, float], anchor: Optional[float] = None,
                     floor: Optional[float] = None) -> Callable[[float], float]:
    """gamma -> value through measured (gamma, value) points, linear in between.

    anchor is the value at gamma = 0 (a verify pass of one token is one target step: anchor 1).
    Beyond the last point the last segment's slope continues, never below 0 (a batch does not get
    cheaper as it grows); before the first point without an anchor the first value holds.
    With one point and no anchor the value is constant. floor: the least value it returns (a
    cost a measured point may fall under by timing noise, but the work it prices cannot).
    """
    pts = sorted(points.items())
    if anchor is not None and pts[0][0] > 0:
        pts = [(0, anchor)] + pts

    def line(gamma: int) -> float:
        if len(pts) == 1 or gamma <= pts[0][0]:
            return pts[0][1]
        for (g0, y0), (g1, y1) in zip(pts, pts[1:]):
            if gamma <= g1:
                return y0 + (y1 - y0) * (gamma - g0) / (g1 - g0)
        (g0, y0), (g1, y1) = pts[-2], pts[-1]
        return y1 + max(0.0, (y1 - y0) / (g1 - g0)) * (gamma - g1)

    return line if floor is None else lambda gamma: max(floor, line(gamma))


def expected_operations(alpha: float, gamma: int, c_hat: float = 0.0) -> float:
    """Theorem 3.11: factor of increase in total arithmetic, (g c^ + g + 1) / E[tokens]."""
    return (gamma * c_hat + gamma + 1) / expected_tokens(alpha, gamma)


def _costs(c: Union[float, RoundCosts]) -> RoundCosts:
    return c if isinstance(c, RoundCosts) else RoundCosts(c)


def breakeven_alpha(gamma: int, c: Union[float, RoundCosts], tol: float = 1e-12) -> Optional[float]:
    """The alpha at which E[speedup] = 1 for this gamma; None when no alpha <= 1 reaches it.

    c is Leviathan's cost ratio, or RoundCosts for the costed model. E[speedup] rises
    monotonically in alpha from 1/(g c + 1) at 0 to (g + 1)/(g c + 1) at 1 (Theorem 3.8), so a
    solution exists iff c <= 1; it is found by bisection.
    """
    costs = _costs(c)
    if costed_speedup(1.0, gamma, costs) < 1:
        return None
    if costed_speedup(0.0, gamma, costs) >= 1:
        return 0.0
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if costed_speedup(mid, gamma, costs) < 1 else (lo, mid)
    return hi


def optimal_gamma(alpha: float, c: Union[float, RoundCosts], max_gamma: int = MAX_GAMMA) -> int:
    """The integer gamma in 1..max_gamma maximizing E[speedup] (the smallest on ties).

    c is Leviathan's cost ratio, or RoundCosts for the costed model.
    With c = 0 (and v = 1, o = 0) the speedup grows with gamma forever, so the answer is max_gamma.
    """
    costs = _costs(c)
    return max(range(1, max_gamma + 1), key=lambda g: (costed_speedup(alpha, g, costs), -g))


def gamma_table(alpha: Optional[float], c: float, gammas) -> list[dict]:
    """Rows of (gamma, E[tokens], E[speedup], breakeven alpha) for the CLI and reports."""
    rows = []
    for g in gammas:
        row = {"gamma": g, "breakeven_alpha": breakeven_alpha(g, c)}
        if alpha is not None:
            row.update(expected_tokens=expected_tokens(alpha, g), expected_speedup=expected_speedup(alpha, g, c))
        rows.append(row)
    return rows
