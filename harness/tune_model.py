"""What a candidate of `harness tune` would gain, from the probe's measured cells (harness/tune.py).

The model of a candidate (Fit.predict): a round drafting g tokens yields
    tau(g) = s (1 + sum_{i<=g} prod_{j<=i} p_j) + (1 - s)
tokens, with p_j the conditional acceptance at position j measured at G
(core.metrics.per_position_acceptance) and s the share of rounds that drafted (prompt lookup finds
no match in the others), and costs R(g) baseline token-times, so that speedup(g) = tau(g) / R(g). R
is measured at the probe's gammas, 1 (vLLM: 2) and G, the draft model's also at 2 (R = measured tau
/ measured speedup: every cost of the round, the draft's, the verify pass's, sampling, orchestration
and prefill's share, in the baseline's time per token) and taken linear in g in between and from the
round that drafts nothing (explain's, at 0), as a verify pass over g + 1 tokens and g draft steps
grow; measured tau / model tau at those gammas (the last round cut at max_new_tokens) is
interpolated between them, so the prediction equals the measurement at each probe gamma. Confidence
stopping at P is the probe's rounds at G replayed (Fit._confident) on the draft model's top-1
probabilities that the acceptance check recorded, read as the runtime reads them
(Runtime.confidence_top_k) and stopped as it stops (Runtime.confidence_keeps_stop). A round stopped
where the runtime drops the stopping token costs what stopping cost the probe's rounds under
STOPPING_P beyond a fixed round (Fit.stop_extra); where the runtime proposes it, a fixed round of
what it proposed.

What it does not own: reading rows into cells, choosing, confirming and recommending (harness/tune.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from spec_harness.core import theory
from spec_harness.core.config import DraftPolicy, DrafterSpec

# the probe measures the draft model stopping under this confidence at gamma G: what stopping
# costs a round beyond a fixed round of the same drafts (Fit.stop_extra)
STOPPING_P = 0.5


@dataclass
class Cell:
    """One measured setting of one runtime's drafting at N: speed against its baseline."""

    runtime: str  # the runtime as the reports name it (torch, torch [kernels]), without the drafting
    name: str  # the registry name (harness run --runtime)
    forward: Optional[str]
    pair: str
    drafter: Optional[DrafterSpec]  # None: the baseline
    gamma: Optional[int]
    n: int
    tokens_per_s: Optional[float]
    speedup: Optional[float]
    tau: Optional[float] = None
    positions: list = field(default_factory=list)  # conditional acceptance per position
    share: Optional[float] = None  # rounds that drafted
    alpha: Optional[float] = None
    reason: Optional[str] = None  # explain's sentence (N = 1)
    policy: str = "fixed"
    view: Optional[str] = None  # the reports' name of the cell's runtime and drafting (torch [eagle3])
    empty_round: Optional[float] = None  # a round that verifies no draft: one target step and the loop's (1 + o) / (1 + o_base)
    # (drafted, accepted, the draft's top-1 probability at each tested position) of each round, where
    # the acceptance check recorded them (runtimes/expected.py): confidence stopping, replayed
    confidence_rounds: list = field(default_factory=list)
    keeps_stop: bool = False  # the runtime proposes the token its confidence stopping stopped at
    drafted: list = field(default_factory=list)  # rounds that drafted 0..gamma tokens (metrics.drafted_histogram)

    @property
    def key(self) -> tuple:
        return (self.runtime, self.pair, self.drafter, self.policy, self.n)


def tau_model(positions: list, share: float, g: int, alpha: Optional[float]) -> float:
    """Tokens per round drafting g: s (1 + sum_i prod_{j<=i} p_j) + 1 - s; a position never
    reached takes the last known p (alpha_hat when none is known)."""
    total, run, last = 1.0, 1.0, alpha if alpha is not None else 0.0
    for i in range(g):
        p = positions[i] if i < len(positions) and positions[i] is not None else last
        last = p
        run *= p
        total += run
    return share * total + 1 - share


@dataclass
class Fit:
    """One runtime's drafting at N, from its probe cells: speedup(g) for g in 1..G."""

    cells: dict[int, Cell]  # gamma -> probe cell
    stopping: Optional[Cell] = None  # the probe's draft model at G stopping under STOPPING_P

    @property
    def top(self) -> Cell:
        return self.cells[max(self.cells)]

    def _model_tau(self, g: int) -> float:
        t = self.top
        return tau_model(t.positions, t.share if t.share is not None else 1.0, g, t.alpha)

    def _cost(self) -> Optional[Callable[[float], float]]:
        """R(g): a round of g drafts in baseline token-times, through the probe gammas (the
        round that drafts nothing, explain's, at 0)."""
        return self._line(lambda c, _: c.tau / c.speedup if c.tau and c.speedup else None, anchor=self.top.empty_round or 1.0)

    def stop_extra(self) -> Optional[float]:
        """What stopping costs a round beyond a fixed round of the drafts it proposes: the
        stopping cell's cost (its rounds times its cost per round) less R of what each of its
        rounds drafted, over its rounds that stopped (drafted fewer than its gamma). It holds the
        pass whose token is dropped and whatever else a runtime does when its drafts vary in
        length (llama-server's is about three draft passes on the default pair: docs/findings.md)."""
        c, cost = self.stopping, self._cost()
        if c is None or not c.tau or not c.speedup or cost is None:
            return None
        stopped = sum(c.drafted[:c.gamma])
        if not stopped:
            return None
        spent = sum(c.drafted) * c.tau / c.speedup
        return (spent - sum(k * cost(d) for d, k in enumerate(c.drafted))) / stopped

    def _line(self, y: Callable[[Cell, int], Optional[float]], anchor: Optional[float] = None) -> Optional[Callable[[float], float]]:
        pts = {g: y(c, g) for g, c in self.cells.items()}
        pts = {g: v for g, v in pts.items() if v is not None}
        return theory.piecewise_linear(pts, anchor) if pts else None

    def predict(self, g: int, p_min: Optional[float] = None) -> Optional[float]:
        """Predicted speedup at gamma g (the measured one at a probe gamma), under confidence
        stopping at p_min when given (None where the probe has no confidences to replay)."""
        cost = self._cost()
        bias = self._line(lambda c, gg: c.tau / self._model_tau(gg) if c.tau else None)
        if p_min is not None:
            return self._confident(g, p_min, cost, bias)
        if cost is None or bias is None:
            speed = self._line(lambda c, _: c.speedup)
            return speed(g) if speed else None
        return bias(g) * self._model_tau(g) / cost(g)

    def _confident(self, g: int, p_min: float, cost, bias) -> Optional[float]:
        """Confidence stopping replayed on the probe's rounds at G: a round stops at its first
        tested position i <= g whose top-1 probability is < p_min. Where the runtime drops that
        token (its pass paid, not proposed) the round drafts i - 1, where it keeps it (transformers)
        i; it accepts min(accepted, drafted) and costs R(drafted) + stop_extra. Where no tested
        position stops it, it drafts min(g, drafted) as a fixed round would."""
        t = self.top
        extra = 0.0 if t.keeps_stop else self.stop_extra()  # a kept stop is a fixed round of what it proposed
        if not t.confidence_rounds or cost is None or bias is None or extra is None:
            return None
        tokens = spent = 0.0
        for d, n, confs in t.confidence_rounds:
            stop = next((i for i, p in enumerate(confs[:g], 1) if p < p_min), None)
            drafted = min(g, d) if stop is None else stop - (not t.keeps_stop)
            tokens += min(n, drafted) + 1
            spent += cost(drafted) + (extra if stop is not None else 0.0)
        return bias(g) * tokens / spent


def fits(cells: list[Cell]) -> dict[tuple, Fit]:
    """Each runtime's drafting at N from its probe cells: the fixed ones by gamma, and the one
    stopping under STOPPING_P."""
    out: dict[tuple, Fit] = {}
    for c in cells:
        if c.drafter is not None and c.policy == "fixed" and c.speedup is not None:
            out.setdefault(c.key, Fit({})).cells[c.gamma] = c
    for c in cells:
        stop = c.drafter is not None and DraftPolicy.parse(c.policy).confidence == STOPPING_P
        if stop and (c.runtime, c.pair, c.drafter, "fixed", c.n) in out:
            out[(c.runtime, c.pair, c.drafter, "fixed", c.n)].stopping = c
    return out
