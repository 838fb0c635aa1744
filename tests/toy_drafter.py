"""A drafter kind in one file, for tests/test_toy_drafter.py: `repeat[:K]` proposes the sequence's
last token again, at most K times (K default gamma). No model runs; our loop runs it (`build`), and
no library runtime maps it, so they skip it with a reason. Registered by the test, one line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spec_harness.core import sampling
from spec_harness.core.drafters import NOTHING, DrafterSpec
from spec_harness.core.errors import HarnessError
from spec_harness.runtimes.loop import Draft, Drafter


@dataclass(frozen=True)
class RepeatSpec(DrafterSpec):
    name = "repeat"
    syntax = "repeat[:K]"
    help = "the last token again, at most K times"
    title = "repeat drafting"
    cost = NOTHING
    has_probabilities = False
    loop = "tests.toy_drafter:build"

    k: Optional[int] = None

    @classmethod
    def from_args(cls, args: str) -> RepeatSpec:
        if args and not (args.isdigit() and int(args) >= 1):
            raise HarnessError(f"--drafter repeat takes repeat or repeat:K (K >= 1), got repeat:{args}")
        return cls(int(args) if args else None)

    def args(self) -> str:
        return str(self.k) if self.k else ""


class RepeatDrafter(Drafter):
    def __init__(self, vocab: int, k: Optional[int]):
        self.vocab, self.k = vocab, k

    def propose(self, seq, g, s, rng, timer) -> Draft:
        with timer.phase("draft"):
            tokens = [seq[-1]] * min(g, self.k or g)
        if s.greedy:
            return Draft(tokens)
        with timer.phase("sampling"):
            return Draft(tokens, sampling.point_masses(tokens, self.vocab))


def build(runtime, drafter: RepeatSpec, gen) -> RepeatDrafter:
    return RepeatDrafter(runtime.target.vocab, drafter.k)
