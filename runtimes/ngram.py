"""Prompt-lookup drafting: the draft-free drafter of Saxena's prompt lookup decoding, as Hugging
Face (`prompt_lookup_num_tokens`), llama.cpp (`ngram-simple`) and vLLM (`method: ngram`) offer it.

`lookup(seq, n, k)`: for m = n, n-1, ..., 1, the latest earlier occurrence of seq's last m tokens
in seq (prompt + output so far), and the up to k tokens that followed it; [] when no m matches.
`NgramDrafter` proposes those tokens in the shared loop (runtimes/loop.py). It has no model: the
lookup is booked as draft time (so c is measured, not assumed 0), and its q is a point mass on
each proposed token, with which Leviathan's rule accepts x with probability p(x) and resamples a
rejection from p without x, so sampling stays exact.
What it does not do: the libraries' own lookup (their runtimes map it to their knobs).
"""

from __future__ import annotations

from typing import Optional

import torch

from spec_harness.core import sampling
from spec_harness.core.config import SamplingParams
from spec_harness.core.drafters.ngram import NGRAM_MAX
from spec_harness.core.timing import PhaseTimer
from spec_harness.runtimes.loop import Draft, Drafter


def lookup(seq: list[int], n: int, k: int) -> list[int]:
    """The up to k tokens after the latest earlier occurrence of seq's last m tokens, m = n..1."""
    for m in range(min(n, len(seq) - 1), 0, -1):
        tail = seq[-m:]
        for start in range(len(seq) - m - 1, -1, -1):  # occurrences that end before the tail does
            if seq[start:start + m] == tail:
                return seq[start + m:start + m + k]
    return []


class NgramDrafter(Drafter):
    """Up to min(g, k) tokens from lookup(seq, n, ·); k None: g (the run's gamma)."""

    def __init__(self, vocab: int, n: int = NGRAM_MAX, k: Optional[int] = None):
        self.vocab, self.n, self.k = vocab, n, k

    def propose(self, seq: list[int], g: int, s: SamplingParams, rng: torch.Generator, timer: PhaseTimer) -> Draft:
        with timer.phase("draft"):
            tokens = lookup(seq, self.n, min(g, self.k or g))
        if s.greedy or not tokens:
            return Draft(tokens)
        with timer.phase("sampling"):
            q = sampling.point_masses(tokens, self.vocab)
        return Draft(tokens, q)


def build(runtime, drafter, gen) -> NgramDrafter:
    """`--drafter ngram[:N,K]` in our loop (core/drafters/ngram.py), over the target's vocabulary."""
    return NgramDrafter(runtime.target.vocab, drafter.max_ngram, drafter.k)
