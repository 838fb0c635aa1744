"""Whether a speculative row's acceptance is its models' and its rule's: the arithmetic.

Each tested draft position t of a row (the accepted drafts of each round and its first rejected
one, `tested_positions`) has an acceptance probability a_t fixed by its context and the row's
verification rule (`verify_rule`) at its temperature, top-p and top-k (core.sampling's transform):

    greedy-match   1 if the draft's argmax is the target's, else 0
    leviathan      sum_x min(p(x), q(x))            (Algorithm 1's ratio test)
    sample-match   p(argmax q)                      a greedy draft (llama.cpp, vLLM)
                   sum_x p(x) q(x)                  a sampled draft (mlx-lm)

Prompt lookup's q is a point mass at its proposal. The accepted count minus the sum of a_t over
the tested positions is a martingale (each a_t is fixed before its test), so it has mean 0 and
variance sum a_t (1 - a_t) however the rounds stop: the interval is the expected count +- Z
standard deviations, a greedy test within TIE logits of a tie counted as a fair coin (variance
1/4: another runtime's numerics, a quantized kernel, may break it either way). `Tally` sums a row and pools
a cell; its record is a row's `expected_acceptance`. A sampled output is also set against the
target's own samples (`Likelihood`, a row's `output_check`): acceptance measured along tokens a
broken sampler drew says little, since such tokens make every draft look bad. runtimes/expected.py
computes the a_t and log probabilities from the models; reports/ read the records. What it does
not do: run a model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from spec_harness.core import sampling
from spec_harness.core.config import SamplingParams

Z = 3.3  # standard deviations: two-sided, about 1e-3 of honest rows flagged
TIE = 0.25  # logits: a greedy test this close to a tie may go either way in another runtime's numerics
TIE_VARIANCE = 0.25  # such a test counts as a fair coin: its outcome is the numerics', not the models'
RULES = ("greedy-match", "leviathan", "sample-match")


@dataclass
class Tally:
    """Sums over tested draft positions (a row's, or a cell's pooled)."""

    tested: int = 0
    accepted: int = 0
    expected: float = 0.0
    variance: float = 0.0
    ties: int = 0

    def add(self, a: float, accepted: bool, tie: bool) -> None:
        self.tested += 1
        self.accepted += int(accepted)
        self.expected += a
        self.variance += a * (1 - a)
        self.ties += int(tie)

    def merge(self, other: "Tally") -> "Tally":
        return Tally(self.tested + other.tested, self.accepted + other.accepted, self.expected + other.expected,
                     self.variance + other.variance, self.ties + other.ties)

    @property
    def bounds(self) -> tuple[float, float]:
        """The interval of the accepted count."""
        half = Z * math.sqrt(self.variance + TIE_VARIANCE * self.ties) + 0.5  # + a half: the count is whole
        return max(0.0, self.expected - half), min(float(self.tested), self.expected + half)

    def record(self, rule: str, source: str) -> dict:
        lo, hi = self.bounds
        n = max(self.tested, 1)
        verdict = "below" if self.accepted < lo else "above" if self.accepted > hi else "within"
        return {"rule": rule, "source": source, "tested": self.tested, "accepted": self.accepted,
                "expected": round(self.expected, 4), "variance": round(self.variance, 4), "ties": self.ties,
                "lo": round(lo, 3), "hi": round(hi, 3), "alpha": round(self.accepted / n, 4),
                "alpha_expected": round(self.expected / n, 4), "alpha_lo": round(lo / n, 4), "alpha_hi": round(hi / n, 4),
                "verdict": verdict}

    @classmethod
    def of(cls, rec: dict) -> "Tally":
        return cls(rec["tested"], rec["accepted"], rec["expected"], rec["variance"], rec["ties"])


def _margin(logits: torch.Tensor) -> float:
    top = logits.float().topk(2).values
    return float(top[0] - top[1])


def tested_positions(rounds: list[dict], known: int):
    """(round start in generated tokens, drafted in that round, draft position i >= 1, accepted?)
    of every tested draft: the accepted ones of each round and its first rejected one; `known`
    generated ids (a server may hold back the last ones)."""
    c = 0
    for rd in rounds:
        d, n = rd["drafted"], rd["accepted"]
        for i in range(1, min(n + 1, d) + 1):
            if c + i - 1 < known:
                yield c, d, i, i <= n
        c += rd["emitted"]


def acceptance(rule: str, p_raw: torch.Tensor, q_raw: Optional[torch.Tensor], x: int, s: SamplingParams,
                samples_drafts: bool) -> tuple[float, bool]:
    """(the test's acceptance probability, whether it is a greedy near-tie) at one position: the
    target's logits [V], the draft's [V] (None: prompt lookup's point mass at x), its proposal x."""
    if rule == "greedy-match" or s.greedy:
        tie = _margin(p_raw) < TIE or (q_raw is not None and _margin(q_raw) < TIE)
        return float(int(p_raw.argmax()) == x), tie
    p = sampling.probs_from_logits(p_raw[None], s)[0]  # [V]
    if q_raw is None:  # a point mass: every rule accepts with p(x)
        return float(p[x]), False
    if rule == "leviathan":
        q = sampling.probs_from_logits(q_raw[None], s)[0]
        return float(torch.minimum(p, q).sum()), False
    if samples_drafts:
        q = sampling.probs_from_logits(q_raw[None], s)[0]
        return float((p * q).sum()), False
    return float(p[x]), False


def pooled(records: list[dict]) -> Optional[dict]:
    """The tally of several rows' `expected_acceptance` (a cell), None when none was checked."""
    checked = [r for r in records if r and r.get("verdict") in ("within", "below", "above")]
    if not checked:
        return None
    t = Tally()
    for r in checked:
        t = t.merge(Tally.of(r))
    return t.record(checked[0]["rule"], checked[0]["source"])


# ---------------------------------------------------------------- sampled outputs: the target's samples?


@dataclass
class Likelihood:
    """A sampled output against the target's own samples: at each generated token the log
    probability log p_T(x) under the target at the temperature alone (finite wherever top-p or
    top-k cut), against its mean and variance when x is drawn from the sampling distribution p
    (temperature, top-p, top-k). Observed minus expected is again a martingale: an output the
    sampler drew from p sits within Z standard deviations; one far below holds tokens the target
    would rarely sample (a sampler that samples from the wrong distribution)."""

    tokens: int = 0
    observed: float = 0.0
    expected: float = 0.0
    variance: float = 0.0

    def add(self, logp: torch.Tensor, p: torch.Tensor, x: int) -> None:
        """logp [V]: log p_T; p [V]: the sampling distribution; x: the token the output holds."""
        on = p > 0
        lp = logp[on].double()
        m = float((p[on].double() * lp).sum())
        self.tokens += 1
        self.observed += float(logp[x])
        self.expected += m
        self.variance += max(float((p[on].double() * lp * lp).sum()) - m * m, 0.0)

    def merge(self, other: "Likelihood") -> "Likelihood":
        return Likelihood(self.tokens + other.tokens, self.observed + other.observed, self.expected + other.expected,
                          self.variance + other.variance)

    def record(self) -> dict:
        z = (self.observed - self.expected) / math.sqrt(self.variance) if self.variance > 0 else 0.0
        return {"tokens": self.tokens, "log_likelihood": round(self.observed, 3), "expected": round(self.expected, 3),
                "variance": round(self.variance, 4), "z": round(z, 2), "verdict": "unlikely" if z < -Z else "within"}

    @classmethod
    def of(cls, rec: dict) -> "Likelihood":
        return cls(rec["tokens"], rec["log_likelihood"], rec["expected"], rec["variance"])


def pooled_outputs(records: list[dict]) -> Optional[dict]:
    """The likelihood of several rows' sampled outputs (`output_check`), None when none was checked."""
    checked = [r for r in records if r and r.get("verdict") in ("within", "unlikely")]
    if not checked:
        return None
    t = Likelihood()
    for r in checked:
        t = t.merge(Likelihood.of(r))
    return t.record()
