"""`--drafter ngram[:N,K]`: prompt lookup. The tokens after the latest earlier match of the last
N..1 tokens of the sequence, at most K (K default: gamma); no model runs, so it has no q.

What it does not own: the lookup itself (runtimes/ngram.py) or the libraries' own lookups (each
runtime's file maps this kind to them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spec_harness.core.drafters import NOTHING, DrafterSpec
from spec_harness.core.errors import HarnessError

NGRAM_MAX = 2  # Hugging Face's max_matching_ngram_size and llama-cpp-python's max_ngram_size default


@dataclass(frozen=True)
class NgramSpec(DrafterSpec):
    name = "ngram"
    syntax = "ngram[:N,K]"
    help = (f"prompt lookup: the tokens after an earlier match of the last N tokens, at most K; N default "
            f"{NGRAM_MAX}, K default gamma; ours in our loop, the library's own elsewhere")
    title = "prompt lookup"
    cost = NOTHING
    has_probabilities = False
    loop = "spec_harness.runtimes.ngram:build"

    n: Optional[int] = None  # the longest n-gram looked up (None: NGRAM_MAX)
    k: Optional[int] = None  # the most tokens proposed (None: gamma)

    @classmethod
    def from_args(cls, args: str) -> NgramSpec:
        try:
            nums = [int(a) for a in args.split(",")] if args else []
        except ValueError:
            nums = [0]
        if len(nums) > 2 or not all(x >= 1 for x in nums):
            raise HarnessError(f"--drafter ngram takes ngram, ngram:N or ngram:N,K (N, K >= 1), got ngram:{args}")
        return cls(*nums)

    def args(self) -> str:
        return (f"{self.n}" if self.n else "") + (f",{self.k}" if self.k else "")

    @property
    def max_ngram(self) -> int:
        """The longest n-gram looked up: N, else NGRAM_MAX."""
        return self.n or NGRAM_MAX
