"""The `llamacpp` runtime: our own speculative sampling over two llama.cpp contexts (GGUF files),
through llama-cpp-python's low-level API. The same loop as runtimes/pytorch.py, read side by side:

    runtimes/pytorch.py                     here
    KVModel.forward(ids, n_logits)          LlamaKV.forward(ids, n_logits): one llama_decode of
                                            the reused llama_batch, logits only for the last
                                            n_logits positions, read as a numpy view [n_logits, V]
    KVModel.crop(length)                    LlamaKV.crop(length): llama_memory_seq_rm(pos >= length)
    SpeculativeEngine.baseline/speculative  LlamaEngine.baseline/speculative (same structure)
    sampling.verify / next_token            the same functions, on torch.from_numpy(view): no copy

Cache invariant between rounds (as in pytorch.py): each context holds a prefix of `seq` of length
at most len(seq) - 1. After a rejection both hold exactly seq[:-1] (the correction is fed next);
after all gamma drafts are accepted the draft context lacks d_gamma and ingests it with the bonus
token in its next decode (two tokens, one logit row). A round never drafts past max_new_tokens.

Phases: prefill (both contexts on prompt[:-1]), draft (every llama_decode of the draft context),
verify (every llama_decode of the target context: gamma + 1 tokens, logits for every position),
sampling (logits -> tokens, ratio test, residual; in Python with harness/sampling.py, on one torch
thread so torch's pool does not fight llama.cpp's threads for the cores), the rest is
unaccounted (the Python loop, filling the batch, cache bookkeeping). llama.cpp's own counters
(llama_perf_context of both contexts, reset per generation) go to Generation.extra["llama_perf"],
and extra["decode_ms"] puts each context's decode time by our clock (its prefill plus its
draft or verify phase) beside llama.cpp's (prompt eval + eval ms): a cross-check of our booking.
llama.cpp books every multi-token decode (each verify batch) as "prompt eval".

`--draft self` (or the same GGUF twice) loads the model once and gives it two contexts: every
draft decode is real work, which is what the calibration run measures.
What it does not do: batching (one sequence), tree drafting, llama.cpp's own samplers.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

import llama_cpp
import numpy as np
import torch

from harness import sampling
from harness.config import GenerationSettings, SamplingParams
from harness.errors import HarnessError
from harness.timing import PhaseTimer
from runtimes import llama_common as lc
from runtimes.base import Generation, PairSpec, Phases, RoundRecord, Runtime


class LlamaKV:
    """One llama.cpp context with its KV cache and one reusable llama_batch: feed tokens, get
    logits, crop back. [one sequence, id 0]."""

    def __init__(self, model, cparams, vocab: int):
        self.ctx = llama_cpp.llama_init_from_model(model, cparams)
        if not self.ctx:
            raise HarnessError(f"llama.cpp could not create a context of {cparams.n_ctx} tokens (out of memory? lower --n-ctx)")
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.vocab = vocab  # compare over the tokenizer's ids only (padded rows are dropped)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
        self.cap = cparams.n_batch
        self.batch = llama_cpp.llama_batch_init(self.cap, 0, 1)
        # numpy views on the batch's arrays: filling them is a slice assignment, not a ctypes loop
        self.tok = np.ctypeslib.as_array(self.batch.token, shape=(self.cap,))  # [cap] int32
        self.pos = np.ctypeslib.as_array(self.batch.pos, shape=(self.cap,))  # [cap] int32
        self.out = np.ctypeslib.as_array(self.batch.logits, shape=(self.cap,))  # [cap] int8
        np.ctypeslib.as_array(self.batch.n_seq_id, shape=(self.cap,))[:] = 1
        for i in range(self.cap):
            self.batch.seq_id[i][0] = 0
        self.ids: list[int] = []  # the tokens in the KV cache, in order (what we believe it holds)

    def __len__(self) -> int:
        return len(self.ids)

    def reset(self) -> None:
        llama_cpp.llama_memory_clear(self.mem, True)
        self.ids = []

    def forward(self, ids: list[int], n_logits: int) -> np.ndarray:
        """Feed ids [S] after the cache; -> logits of the last n_logits positions [n_logits, V].

        The result is a view of llama.cpp's logits buffer, valid until this context's next decode.
        """
        s, n0 = len(ids), len(self.ids)
        assert 0 < s <= self.cap and 0 < n_logits <= s
        self.tok[:s] = ids
        self.pos[:s] = np.arange(n0, n0 + s, dtype=np.int32)
        self.out[:s] = 0
        self.out[s - n_logits : s] = 1
        self.batch.n_tokens = s
        rc = llama_cpp.llama_decode(self.ctx, self.batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} at position {n0} ({s} tokens)"
                               + (": the context is full, raise --n-ctx" if rc == 1 else ""))
        self.ids += ids
        ptr = llama_cpp.llama_get_logits(self.ctx)  # the output rows, contiguous, in batch order; synchronizes
        return np.ctypeslib.as_array(ptr, shape=(n_logits, self.n_vocab))[:, : self.vocab]  # [n_logits, V]

    def feed(self, ids: list[int]) -> None:
        """Feed ids of any length (a prompt) in batch-sized chunks; logits of the last one only."""
        for i in range(0, len(ids), self.cap):
            self.forward(ids[i : i + self.cap], 1)

    def crop(self, length: int) -> None:
        """Keep the first `length` cached positions."""
        if length < len(self.ids):
            if not llama_cpp.llama_memory_seq_rm(self.mem, 0, length, -1):
                raise RuntimeError(f"llama_memory_seq_rm could not crop the KV cache to {length} tokens")
            del self.ids[length:]

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_batch_free(self.batch)
            llama_cpp.llama_free(self.ctx)
            self.ctx = None


def _t(x: np.ndarray) -> torch.Tensor:
    """A numpy logits view as a torch tensor sharing its memory (no copy of the vocabulary)."""
    return torch.from_numpy(x)


class LlamaEngine:
    """Target-only and speculative generation over two LlamaKV contexts, timed by one PhaseTimer.

    `forward_hook(role, kv, ids, logits)` is called after every decode when set: tests use it to
    compare cached logits with a fresh context's logits on the same sequence.
    """

    def __init__(self, target: LlamaKV, draft: LlamaKV, is_eog: Callable[[int], bool]):
        self.target, self.draft = target, draft
        self.is_eog = is_eog
        self.forward_hook: Optional[Callable] = None

    def _pass(self, role: str, kv: LlamaKV, ids: list[int], n_logits: int) -> np.ndarray:
        logits = kv.forward(ids, n_logits)
        if self.forward_hook is not None:
            self.forward_hook(role, kv, ids, logits)
        return logits

    def _prefill(self, timer: PhaseTimer, prompt: list[int], kvs: list[LlamaKV]) -> list[int]:
        """Both contexts on prompt[:-1] -> nanoseconds per context (for the counters cross-check)."""
        ns = []
        for kv in kvs:
            t0 = time.perf_counter_ns()
            with timer.phase("prefill"):
                kv.reset()
                if len(prompt) > 1:
                    kv.feed(prompt[:-1])
            ns.append(time.perf_counter_ns() - t0)
        return ns

    def _stop(self, gen: GenerationSettings, out: list[int], token: int) -> bool:
        return len(out) >= gen.max_new_tokens or (not gen.ignore_eos and self.is_eog(token))

    def _emit(self, gen: GenerationSettings, out: list[int], tokens: list[int]) -> tuple[int, bool]:
        """Append tokens until max_new_tokens or an end-of-generation token -> (emitted, done)."""
        for i, t in enumerate(tokens):
            out.append(t)
            if self._stop(gen, out, t):
                return i + 1, True
        return len(tokens), False

    def _counters(self, kvs: list[LlamaKV]) -> None:
        lc.reset_perf(*[kv.ctx for kv in kvs])

    def baseline(self, prompt: list[int], gen: GenerationSettings) -> Generation:
        s, rng = gen.sampling, torch.Generator().manual_seed(gen.seed)
        self._counters([self.target])
        timer = PhaseTimer()
        timer.start()
        pre = self._prefill(timer, prompt, [self.target])
        seq, out, rounds, done = list(prompt), [], [], False
        while not done:
            timer.begin_round()
            with timer.phase("verify"):
                logits = self._pass("target", self.target, seq[len(self.target):], 1)[-1]  # [V]
            with timer.phase("sampling"):
                t = sampling.next_token(_t(logits), s, rng)
            n, done = self._emit(gen, out, [t])
            seq.append(t)
            rounds.append(RoundRecord.timed(timer.end_round(), 0, 0, n))
        return _generation(out, timer.stop(), rounds, {"target": (self.target, pre[0], "verify")})

    def speculative(self, prompt: list[int], gen: GenerationSettings) -> Generation:
        s, rng = gen.sampling, torch.Generator().manual_seed(gen.seed)
        self._counters([self.target, self.draft])
        timer = PhaseTimer()
        timer.start()
        pre = self._prefill(timer, prompt, [self.target, self.draft])
        seq, out, rounds, done = list(prompt), [], [], False
        while not done:
            timer.begin_round()
            g = min(gen.gamma, gen.max_new_tokens - len(out) - 1)  # never draft past the end (as HF)
            drafts, q = self._draft(timer, seq, g, s, rng)
            with timer.phase("verify"):
                logits = self._pass("target", self.target, seq[len(self.target):] + drafts, g + 1)  # [g+1, V]
            with timer.phase("sampling"):
                k, t = sampling.verify(torch.tensor(drafts, dtype=torch.long), q, _t(logits), s, rng)
            n_before = len(seq)
            n, done = self._emit(gen, out, drafts[:k] + [t])
            seq += drafts[:k] + [t]
            self._rollback(n_before + k)
            rounds.append(RoundRecord.timed(timer.end_round(), g, k, n))
        return _generation(out, timer.stop(), rounds, {"target": (self.target, pre[0], "verify"),
                                                       "draft": (self.draft, pre[1], "draft")})

    def _draft(self, timer, seq, g, s: SamplingParams, rng) -> tuple[list[int], Optional[torch.Tensor]]:
        """g draft tokens and their probabilities q [g, V] (None when greedy)."""
        drafts, qs = [], []
        ids = seq[len(self.draft):]  # 1 token, or 2 after a fully accepted round
        for _ in range(g):
            with timer.phase("draft"):
                logits = self._pass("draft", self.draft, ids, 1)  # [1, V] view
            with timer.phase("sampling"):
                d, q = self._pick(logits, s, rng, len(drafts))
            if q is not None:
                qs.append(q)
            drafts.append(d)
            ids = [d]
        if s.greedy:
            return drafts, None
        return drafts, (torch.cat(qs) if qs else torch.zeros(0, self.draft.vocab))  # [g, V]; [0, V] at g = 0

    def _pick(self, logits: np.ndarray, s: SamplingParams, rng, i: int) -> tuple[int, Optional[torch.Tensor]]:
        """Draft position i: logits [1, V] -> (token, q [1, V] or None when greedy)."""
        if s.greedy:
            return int(logits[0].argmax()), None
        q = sampling.probs_from_logits(_t(logits), s)  # [1, V], a new tensor
        return int(sampling.sample(q, s, rng)[0]), q

    def _rollback(self, keep: int) -> None:
        """Both caches keep seq[:keep] = everything before the newest (correction or bonus) token.

        The target's cache holds prefix + all g drafts: crop to keep (the rejected draft's KV
        goes, its slot belongs to the correction). The draft's holds prefix + d_1..d_{g-1}:
        crop to keep after a rejection; after a full accept it is one short and catches up
        at its next decode.
        """
        self.target.crop(keep)
        self.draft.crop(keep)


def _generation(out: list[int], total, rounds: list[RoundRecord], kvs: dict[str, tuple]) -> Generation:
    """kvs: role -> (context, its prefill ns, the phase its later decodes are booked to)."""
    phases = Phases.timed(total)
    perf, check = {}, {}
    for role, (kv, prefill_ns, phase) in kvs.items():
        c = lc.PerfCounters.read(kv.ctx)
        perf[role] = c.to_dict()
        # our decode time of this context beside llama.cpp's (its decodes are timed inside llama_decode)
        check[role] = {"ours_ms": (prefill_ns + total.ns[phase]) * 1e-6, "llama_ms": c.p_eval_ms + c.eval_ms}
    return Generation(token_ids=out, phases=phases, rounds=rounds, extra={"llama_perf": perf, "decode_ms": check})


class LlamaCppRuntime(Runtime):
    name = "llamacpp"

    def load(self, pair: PairSpec) -> None:
        lc.quiet_logs()
        self.pair, self.models, self.engine = pair, [], None
        try:
            self._load(pair)
        except BaseException:
            self.close()  # the runner closes only runtimes that loaded
            raise

    def _load(self, pair: PairSpec) -> None:
        t_path = lc.check_gguf(pair.target_gguf, "target")
        d_path = lc.check_gguf(pair.draft_gguf, "draft")
        self.models = [lc.load_model(t_path, self.settings, "target")]
        if d_path != t_path:
            self.models.append(lc.load_model(d_path, self.settings, "draft"))
        t_model, d_model = self.models[0], self.models[-1]
        self.vocab = llama_cpp.llama_model_get_vocab(t_model)
        d_vocab = llama_cpp.llama_model_get_vocab(d_model)
        v = lc.check_vocabularies(self.vocab, d_vocab)
        self.n_ctx = lc.resolve_n_ctx(self.settings, llama_cpp.llama_model_n_ctx_train(t_model))
        cparams = lc.context_params(self.settings, self.n_ctx)
        # with --draft self the two contexts share weights but not caches: every draft decode is real
        self._kvs = []
        for m in (t_model, d_model):
            self._kvs.append(LlamaKV(m, cparams, v))
        target, draft = self._kvs
        self.engine = LlamaEngine(target, draft, lambda t: bool(llama_cpp.llama_vocab_is_eog(self.vocab, t)))
        self.paths = (t_path, d_path)

    def encode(self, prompt: str) -> list[int]:
        return lc.encode_prompt(self.models[0], self.vocab, prompt)

    def decode(self, ids: list[int]) -> str:
        return lc.detokenize(self.vocab, ids)

    @property
    def context_length(self) -> int:
        return self.n_ctx

    def generate_baseline(self, prompt_ids, gen):
        with lc.single_threaded_torch():
            return self.engine.baseline(prompt_ids, gen)

    def generate_speculative(self, prompt_ids, gen):
        with lc.single_threaded_torch():
            return self.engine.speculative(prompt_ids, gen)

    def describe(self) -> dict:
        return lc.describe(self.models, self.settings, self.paths, self.n_ctx)

    def close(self) -> None:
        for kv in getattr(self, "_kvs", []):
            kv.close()
        self._kvs, self.engine = [], None
        for m in getattr(self, "models", []):
            llama_cpp.llama_model_free(m)
        self.models = []
