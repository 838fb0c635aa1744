"""The speculative loop, written once, over a target and a drafter (docs/DESIGN.md, "The loop").

One round, beside Leviathan et al. 2023, Algorithm 1:

    paper                                        here (Loop.generate)
    for i = 1..gamma:                            draft = drafter.propose(seq, g, ...):
        q_i = M_q(prefix + x_1..x_{i-1})           up to g tokens x_1..x_k and, when sampling,
        x_i ~ q_i                                  the q_i they were drawn from [k, V]
    p_1..p_{k+1} = M_p(prefix + x_1..x_k)        logits = target.forward(pending + x_1..x_k, k + 1)
    r_i ~ U(0, 1)                                n, t = accept(x, q, logits, ...) (core.sampling.verify):
    n = first i with r_i > p_i(x_i) / q_i(x_i)     the ratio test, argmax equality when greedy
    t ~ norm(max(0, p_{n+1} - q_{n+1}))            the residual after a rejection,
        or t ~ p_{k+1} if all accepted             or the bonus token
    return prefix + x_1..x_n + t                 seq += x_1..x_n + [t]; _rollback(keep = prefix + n)

Target-only decoding (the baseline) is the same loop with no drafter: every round is one target
step (k = 0). A round never drafts past max_new_tokens (g = tokens left - 1, as transformers).

How many tokens a round may draft is the draft policy's (DraftPolicy in core/config.py): g is gamma,
or DraftLength's heuristic schedule; a DraftModel with a confidence threshold stops before the
first position whose distribution has top-1 probability under it. Both depend only on the
sequence so far (accepted tokens), so Algorithm 1's guarantee holds for every position drafted.

Two interfaces, each a few methods:
- Model: a causal LM with its own KV cache, batch 1 (the torch and llama.cpp adapters, the test
  runtime's toy model): forward(ids, n_logits) feeds ids after its cache and returns the logits of
  the last n_logits positions [n_logits, V]; crop(length), reset(), len(); `sync` for devices whose
  clock needs it; reset_counters()/counters() as the hook for a library's own counters.
  A Model may also keep the hidden states entering some of its layers at every cached position
  (keep_features, features): what an EAGLE-3 head drafts from (runtimes/eagle3.py).
- Drafter: reset(prompt) when a generation starts, propose(seq, g, ...) -> Draft (at most g tokens,
  fewer when it stops early; their q when sampling), accepted(seq, keep) after verification so it
  can roll back or catch up. DraftModel, a second Model, is the drafter of the paper.

Cache invariant, checked every round: the target's cache holds exactly seq[:-1]; the newest token
(correction or bonus) is fed at its next pass, in front of the next drafts. A drafter's model holds
a prefix of seq[:-1]: after a rejection exactly seq[:-1]; after all k drafts are accepted the draft
model lacks x_k and ingests it with the bonus token at its next pass (two tokens, one logit row).

Phases: prefill (the target on prompt[:-1], then the drafter's reset), draft (the drafter's model
passes), verify (the target's passes), sampling (logits to tokens: each draft token's choice, the
acceptance test, residual resampling); the rest of a round is unaccounted (this loop's own work,
cache bookkeeping). The baseline copies each step's logits row into a RowStore outside the clock
(PhaseTimer.outside: in no phase, in no wall) and computes target_entropy and each step's top-2
margin after the clock stops. What it does not do: batching (one sequence), tree drafting, load models.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from spec_harness.core import sampling
from spec_harness.core.config import GenerationSettings, SamplingParams
from spec_harness.core.records import Generation, Phases, RoundRecord
from spec_harness.core.timing import PhaseTimer, RoundTimes


class Model(ABC):
    """A causal LM with its own KV cache, batch 1."""

    vocab: int = 0  # logits are compared over the tokenizer's ids: forward returns [n, vocab]
    prefilled: tuple = ()  # what the last feed_prompt prefilled in one pass: the cache's first positions while
    # only feed_prompt resets it (code that resets and refills a model otherwise sets it back to ())
    sync: Optional[Callable[[], None]] = None  # called before each clock read (CUDA, MPS)

    @abstractmethod
    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        """Feed ids [S] after the cache -> logits of the last n_logits positions [n_logits, V].
        The tensor may be a view that the next forward overwrites."""

    @abstractmethod
    def crop(self, length: int) -> None:
        """Keep the first `length` cached positions."""

    @abstractmethod
    def reset(self) -> None:
        """Empty the cache."""

    @abstractmethod
    def __len__(self) -> int:
        """Positions in the cache."""

    def reset_counters(self) -> None:
        """Hook: a library's own counters start from zero for each generation."""

    def counters(self, ours_ns: int) -> dict:
        """Hook: the library's own counters after a generation, beside `ours_ns` (our clock's time
        in this model's passes). -> {key: value}, merged into Generation.extra[key][role]."""
        return {}

    def keep_features(self, layer_ids) -> None:
        """From now on keep, at every cached position, the residual stream entering each of these
        layers (an EAGLE-3 head reads them); none: keep nothing. ValueError when this model cannot."""
        if layer_ids:
            raise ValueError(f"{type(self).__name__} hands out no hidden states")

    def features(self, start: int, end: int) -> torch.Tensor:
        """The kept layer inputs at cached positions start .. end - 1 -> [end - start, n_layers H]."""
        raise ValueError(f"{type(self).__name__} hands out no hidden states")


def feed_prompt(model: Model, prompt: list[int]) -> None:
    """A fresh cache holding prompt[:-1]: the last prompt token is fed with the first step. The
    model keeps what it prefilled (`prefilled`), so that runtimes/evidence.py can crop back to it."""
    model.reset()
    if len(prompt) > 1:
        model.forward(prompt[:-1], 1)
    model.prefilled = tuple(prompt[:-1])


@dataclass
class Draft:
    """What a drafter proposes in one round."""

    tokens: list[int]
    q: Optional[object] = None  # the distributions they were sampled from (core.sampling.stack: a Nucleus of
    # len(tokens) rows, or [len(tokens), V]); None when greedy


NO_DRAFT = Draft([])
NO_IDS = torch.zeros(0, dtype=torch.long)


class Drafter(ABC):
    """Proposes up to g tokens a round, and is told what the target accepted."""

    model: Optional[Model] = None  # the model whose passes are booked as draft (its counters are reported)

    def reset(self, prompt: list[int]) -> None:
        """A generation starts (booked as prefill)."""

    @abstractmethod
    def propose(self, seq: list[int], g: int, s: SamplingParams, rng: torch.Generator, timer: PhaseTimer) -> Draft:
        """At most g tokens to follow seq (g >= 1); it may stop early. Books its own time:
        model passes as draft, the choice of each token as sampling."""

    def accepted(self, seq: list[int], keep: int) -> None:
        """After verification: seq now ends with this round's accepted drafts and the new token;
        seq[:keep] (all but that token) is final."""


class DraftModel(Drafter):
    """A draft model with its own KV cache, the drafter of Leviathan et al. (also --draft self).
    With `confidence` P it stops before the first position whose top-1 probability is < P (the
    token there is not proposed: llama.cpp's p_min; that pass is still draft time)."""

    def __init__(self, model: Model, confidence: Optional[float] = None):
        self.model, self.confidence = model, confidence

    def reset(self, prompt: list[int]) -> None:
        feed_prompt(self.model, prompt)

    def pending(self, seq: list[int]) -> list[int]:
        """The tokens of seq the model has not seen: 1, or 2 after a fully accepted round."""
        return seq[len(self.model):]

    def propose(self, seq, g, s, rng, timer) -> Draft:
        tokens, qs = [], []
        ids = self.pending(seq)
        for i in range(g):
            with timer.phase("draft"):
                logits = self.model.forward(ids, 1)  # [1, V]
            with timer.phase("sampling"):
                d, q = self.pick(logits, s, rng, i)
                if self.confidence is not None and sampling.top1_prob(logits, q) < self.confidence:
                    break
            tokens.append(d)
            if q is not None:
                qs.append(q)
            ids = [d]
        return Draft(tokens, sampling.stack(qs))  # q of each drafted position

    def pick(self, logits: torch.Tensor, s: SamplingParams, rng, i: int) -> tuple[int, Optional[object]]:
        """Draft position i: logits [1, V] -> (token, its q: core.sampling.draft_token's; None when greedy)."""
        return sampling.draft_token(logits, s, rng)

    def accepted(self, seq: list[int], keep: int) -> None:
        """The model holds prefix + x_1..x_{k-1} (x_1..x_k when it stopped on confidence): cropped
        to keep after a rejection; after a full accept it is at most one short and catches up at
        its next pass."""
        self.model.crop(keep)
        if len(self.model) > len(seq) - 1:
            raise AssertionError(f"draft KV cache ahead of the sequence: {len(self.model)} of {len(seq)} tokens")


def draft_model(runtime, drafter, gen) -> DraftModel:
    """`--drafter model` in our loop (core/drafters/model.py): the runtime's draft model, stopping
    under gen's confidence P if it has one."""
    return DraftModel(runtime.draft, gen.confidence)


class DraftLength:
    """The most tokens the next round may draft: gamma, or with the `heuristic` policy Hugging
    Face's schedule (num_assistant_tokens_schedule "heuristic"): start at gamma, +2 after a round
    that accepted every draft, -1 after one that did not; here kept within 1..gamma."""

    def __init__(self, gen: GenerationSettings):
        self.gamma, self.n = gen.gamma, gen.gamma
        self.heuristic = gen.draft_policy.kind == "heuristic"

    def next(self, left: int) -> int:
        """left: tokens max_new_tokens still allows after this round's new token."""
        return min(self.n, left)

    def update(self, drafted: int, accepted: int) -> None:
        if self.heuristic and drafted:
            self.n = min(self.gamma, self.n + 2) if accepted == drafted else max(1, self.n - 1)


class RowStore:
    """A baseline's logits rows, for target_entropy, copied into one [capacity, V] buffer per model
    (`owner`) that outlives the generation, so a step costs one row copy and no new memory (a fresh
    row per step costs its page faults). The buffer is zero-filled, its pages touched,
    when it first grows, to at least MIN_ROWS rows: in the warm-up, not in measured generations.
    Callers copy outside the clock (PhaseTimer.outside): it is the harness's work, not the model's."""

    MIN_ROWS = 256
    _buffers: "weakref.WeakKeyDictionary[object, torch.Tensor]" = weakref.WeakKeyDictionary()

    def __init__(self, owner, n: int):
        self.model, self.n, self.count = owner, n, 0
        self.buf: Optional[torch.Tensor] = None

    def add(self, row: torch.Tensor) -> None:  # row [V]
        if self.buf is None:
            buf = self._buffers.get(self.model)
            if buf is None or buf.shape[0] < self.n or buf.shape[1] != row.shape[0] or buf.dtype != row.dtype \
                    or buf.device != row.device:
                buf = torch.zeros(max(self.n, self.MIN_ROWS), row.shape[0], dtype=row.dtype, device=row.device)
                self._buffers[self.model] = buf
            self.buf = buf
        self.buf[self.count].copy_(row)
        self.count += 1

    def rows(self) -> Optional[torch.Tensor]:
        return None if self.buf is None else self.buf[: self.count]  # [steps, V]


class Loop:
    """Target-only (drafter None) and speculative generation, timed by one PhaseTimer."""

    def __init__(self, target: Model, drafter: Optional[Drafter], is_eos: Callable[[int], bool],
                 accept: Callable = sampling.verify):
        self.target, self.drafter, self.is_eos = target, drafter, is_eos
        self.accept = accept  # (draft ids [k], q [k, V] or None, logits [k+1, V], s, rng) -> (n, t)

    @torch.inference_mode()
    def generate(self, prompt: list[int], gen: GenerationSettings) -> Generation:
        s, rng = gen.sampling, torch.Generator().manual_seed(gen.seed)
        roles = self._roles()
        for model, _ in roles.values():
            model.reset_counters()
        timer = PhaseTimer(self.target.sync)
        timer.start()
        prefill_ns = self._prefill(timer, prompt)
        seq, out, rounds, done = list(prompt), [], [], False
        rows = RowStore(self.target, gen.max_new_tokens) if self.drafter is None else None
        length = DraftLength(gen)
        while not done:
            timer.begin_round()
            g = length.next(gen.max_new_tokens - len(out) - 1) if self.drafter else 0
            draft = self.drafter.propose(seq, g, s, rng, timer) if g > 0 else NO_DRAFT
            k = len(draft.tokens)
            with timer.phase("verify"):
                logits = self.target.forward(seq[len(self.target):] + draft.tokens, k + 1)  # [k+1, V]
            if rows is not None:
                with timer.outside():
                    rows.add(logits[-1])  # [V] for target_entropy
            with timer.phase("sampling"):
                x = torch.tensor(draft.tokens, dtype=torch.long) if k else NO_IDS  # [k]
                n, t = self.accept(x, draft.q, logits.cpu(), s, rng)
            keep = len(seq) + n
            emitted, done = self._emit(gen, out, draft.tokens[:n] + [t])
            seq += draft.tokens[:n] + [t]
            self._rollback(seq, keep)
            self._check(seq)
            length.update(k, n)
            rounds.append(RoundRecord.timed(timer.end_round(), k, n, emitted))
        total = timer.stop()
        result = Generation(token_ids=out, phases=Phases.timed(total), rounds=rounds,
                            extra=self._counters(roles, prefill_ns, total))
        if rows is not None:
            result.keep_steps(rows.rows())
        return result

    def _roles(self) -> dict[str, tuple[Model, str]]:
        """role -> (model, the phase its passes after prefill are booked to)."""
        roles = {"target": (self.target, "verify")}
        if self.drafter is not None and self.drafter.model is not None:
            roles["draft"] = (self.drafter.model, "draft")
        return roles

    def _prefill(self, timer: PhaseTimer, prompt: list[int]) -> dict[str, int]:
        """The target takes prompt[:-1] (its last token is fed with round 1), then the drafter
        starts; both are prefill. -> nanoseconds per role."""
        with timer.phase("prefill"):
            feed_prompt(self.target, prompt)
        ns = {"target": timer.booked_ns("prefill")}
        if self.drafter is not None:
            with timer.phase("prefill"):
                self.drafter.reset(prompt)
            ns["draft"] = timer.booked_ns("prefill") - ns["target"]
        return ns

    def _emit(self, gen: GenerationSettings, out: list[int], tokens: list[int]) -> tuple[int, bool]:
        """Append tokens until max_new_tokens or an end-of-generation token -> (emitted, done)."""
        for i, t in enumerate(tokens):
            out.append(t)
            if len(out) >= gen.max_new_tokens or (not gen.ignore_eos and self.is_eos(t)):
                return i + 1, True
        return len(tokens), False

    def _rollback(self, seq: list[int], keep: int) -> None:
        """seq[:keep] stays cached. The target held prefix + all k drafts: cropping to keep drops a
        rejected draft's KV (its slot belongs to the correction). The drafter follows."""
        self.target.crop(keep)
        if self.drafter is not None:
            self.drafter.accepted(seq, keep)

    def _check(self, seq: list[int]) -> None:
        if len(self.target) != len(seq) - 1:
            raise AssertionError(f"target KV cache out of step: it holds {len(self.target)} positions, "
                                 f"the sequence minus its newest token is {len(seq) - 1}")

    @staticmethod
    def _counters(roles: dict, prefill_ns: dict[str, int], total: RoundTimes) -> dict:
        extra: dict = {}
        for role, (model, phase) in roles.items():
            for key, value in model.counters(prefill_ns[role] + total.ns[phase]).items():
                extra.setdefault(key, {})[role] = value
        return extra
