"""What a generation returns: its phases, one record per round, the ids, and notes.

Rounds: in a speculative generation, one round = draft up to gamma tokens, verify them in one
target pass, accept/reject. In a baseline generation, one round = one target step (drafted 0).
`accepted` is the outcome of the acceptance test; `emitted` is what reached the output after
truncation at max_new_tokens or EOS, so the emitted counts add up to the generated ids.
What it does not do: compute rates (core/metrics.py) or lay out results rows (core/results.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from spec_harness.core import metrics
from spec_harness.core.timing import NS, RoundTimes


@dataclass
class RoundRecord:
    """One round. None = a phase the runtime cannot see."""

    drafted: int
    accepted: int
    emitted: int
    draft_s: Optional[float]
    verify_s: Optional[float]
    sampling_s: Optional[float]
    unaccounted_s: Optional[float]
    wall_s: Optional[float]  # None: a runtime that counts rounds but does not time them (llama-server)

    @classmethod
    def timed(cls, times: RoundTimes, drafted: int, accepted: int, emitted: int) -> "RoundRecord":
        return cls(drafted=drafted, accepted=accepted, emitted=emitted, **times.seconds())

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Phases:
    """Seconds per phase for one generation. None = the runtime cannot see it (say why in notes)."""

    wall_s: float
    prefill_s: Optional[float]
    draft_s: Optional[float]
    verify_s: Optional[float]
    sampling_s: Optional[float]
    unaccounted_s: Optional[float]

    @classmethod
    def timed(cls, total: RoundTimes) -> "Phases":
        """From the RoundTimes of a whole generation (prefill included)."""
        return cls(prefill_s=total.ns["prefill"] * NS, **total.seconds())

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Generation:
    """What one generate call returns."""

    token_ids: list[int]
    phases: Phases
    rounds: list[RoundRecord]
    target_entropy: Optional[float] = None  # baseline: mean target next-token entropy (nats), T = 1
    step_margins: Optional[list[float]] = None  # baseline: top-1 - top-2 logit of the target at each token
    draft_max: Optional[int] = None  # the most drafts per round, when the library chose it (draft policy not fixed)
    notes: dict[str, str] = field(default_factory=dict)  # e.g. {"sampling_s": "inside llama.cpp"}
    extra: dict = field(default_factory=dict)  # runtime-specific numbers (library counters, ...)
    n_tokens: Optional[int] = None  # tokens generated when not all their ids are known (a server's stream held some back)

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids) if self.n_tokens is None else self.n_tokens

    def keep_steps(self, logits) -> None:
        """What a baseline reports of the target's logits at its steps ([steps, V]): the mean
        entropy and each step's top-2 margin."""
        self.target_entropy, self.step_margins = metrics.mean_entropy(logits), metrics.top2_margins(logits)
