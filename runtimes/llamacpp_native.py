"""The `llamacpp-native` runtime: llama-cpp-python's own speculative loop, as the reference for
what the library does by itself.

`Llama(model_path=target, draft_model=HarnessDraft(...))` and `Llama.generate`: the library
evaluates [newest token + drafts] in one batch (logits for every position, which it copies into
`Llama.scores`), samples position by position with its sampler chain and stops at the first
sampled token that differs from the draft (rollback with llama_memory_seq_rm). That is
"accept while the target's own sample equals the draft": exact in distribution, but not the
Leviathan ratio test the `torch` and `llamacpp` runtimes use, so sampled acceptance differs.
The library has no draft model of its own; `HarnessDraft` drives a second `Llama` on the draft
GGUF (its `eval`, i.e. the library's convenience path), keeps its cache in step with what the
target accepted (common prefix, then `n_tokens` truncation) and proposes up to gamma tokens,
never past max_new_tokens (the library itself would not stop drafting there). `--drafter
ngram[:N,K]` is the library's own prompt lookup, `LlamaPromptLookupDecoding(max_ngram_size=N,
num_pred_tokens=K or gamma)` (the *first* earlier match, left to right), through `LookupDraft`,
which times it as draft and cuts it at max_new_tokens likewise. The library drafts a fixed
length: no other draft policy.

What is measured, and how (all from outside the library, nothing of its logic is replaced):
- wall_s: around `Llama.generate`, until max_new_tokens or an end-of-generation token.
- prefill_s: the target's `Llama.eval` of the prompt plus the draft's ingest of prompt[:-1]
  (done before `generate`, so the structure matches runtimes/llamacpp.py).
- draft_s: the draft's `Llama.eval` calls inside HarnessDraft.
- verify_s: every later `Llama.eval` of the target (timed through an instance attribute that
  wraps the bound method). It includes the library's copy of every output row into
  `Llama.scores`; llama.cpp's own decode milliseconds are in extra.llama_perf beside it.
- sampling_s: `Llama.sample` (the library's sampler chain) plus the draft's token choice in Python.
- unaccounted_s: the rest (the library's generator loop, our draft bookkeeping). In the baseline
  each step's last logits row is copied for target_entropy outside the clock (PhaseTimer.outside).
- rounds: one per draft call; drafted = tokens proposed, accepted = leading yielded tokens equal
  to the drafts, emitted = tokens yielded in the round. The first token, sampled from the prompt
  before any draft call, is a round with drafted 0. If the wrappers are not reached (a library
  version whose generate no longer calls eval/sample), those phases are None with a note.
Sampling settings map to the library's sampler: temperature, top_k, top_p, min_p 0, no penalties;
its chain applies top-k/top-p before temperature, so with top_p < 1 and temperature != 1 the
distribution differs from core/sampling.py (noted in Generation.notes).
What it does not do: llama.cpp's C++ speculative example, or create_completion's text handling.
"""

from __future__ import annotations

from typing import Optional

import llama_cpp
import numpy as np
import torch
from llama_cpp.llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding

from spec_harness.core import sampling
from spec_harness.core.config import GenerationSettings, PairSpec
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.core.drafters.ngram import NgramSpec
from spec_harness.core.errors import HarnessError
from spec_harness.core.records import Generation, Phases, RoundRecord
from spec_harness.core.timing import PhaseTimer
from spec_harness.models import llama_files
from spec_harness.runtimes import llama_common as lc
from spec_harness.runtimes.base import Runtime
from spec_harness.runtimes.loop import RowStore


class _Run:
    """One generation's shared state: the timer, the rounds, the current round's drafts."""

    def __init__(self, prompt_len: int, gen: GenerationSettings):
        self.timer = PhaseTimer()
        self.prompt_len, self.gen = prompt_len, gen
        self.rng = torch.Generator().manual_seed(gen.seed)
        self.rounds: list[RoundRecord] = []
        self.drafts: list[int] = []
        self.accepted = self.emitted = 0
        self.matching = True
        self.n_eval = self.n_sample = 0
        self.in_round = False
        self.rows: Optional[RowStore] = None  # baseline: each step's logits row, for target_entropy

    def open_round(self, drafts: list[int]) -> None:
        self.drafts, self.accepted, self.emitted, self.matching = drafts, 0, 0, True

    def close_round(self) -> None:
        if self.in_round:
            rt = self.timer.end_round()
            self.rounds.append(RoundRecord(drafted=len(self.drafts), accepted=self.accepted, emitted=self.emitted, **rt.seconds()))
            self.in_round = False

    def begin_round(self) -> None:
        self.timer.begin_round()
        self.in_round = True

    def draft_call(self, input_ids: np.ndarray) -> int:
        """The library asks its draft model for a round: the previous round ends, this one starts.
        -> how many drafts it may have: gamma, never past max_new_tokens (the library would draft on)."""
        self.close_round()
        self.begin_round()
        return max(0, min(self.gen.gamma, self.gen.max_new_tokens - (len(input_ids) - self.prompt_len) - 1))

    def token_out(self, t: int) -> None:
        """A token the library yielded: the next draft position accepted, or the round's last."""
        i = self.emitted
        self.emitted += 1
        if self.matching and i < len(self.drafts) and self.drafts[i] == t:
            self.accepted += 1
        else:
            self.matching = False


class HarnessDraft(LlamaDraftModel):
    """A LlamaDraftModel over a second Llama: ingest what the target accepted, propose g tokens."""

    def __init__(self, llm: llama_cpp.Llama, vocab: int):
        self.llm = llm
        self.vocab = vocab  # ids compared (the tokenizer's); set once the target is loaded
        self.n_vocab = llm.n_vocab()  # logits row length
        self.run: Optional[_Run] = None

    def prefill(self, run: _Run, prompt: list[int]) -> None:
        """Before generate: the draft holds prompt[:-1], as in runtimes/llamacpp.py."""
        self.run = run
        self.llm.reset()
        if len(prompt) > 1:
            self.llm.eval(prompt[:-1])

    def __call__(self, input_ids: np.ndarray, /, **kwargs) -> np.ndarray:
        """input_ids [n]: prompt + every token the target has emitted -> drafts [g] (intc)."""
        run = self.run
        g = run.draft_call(input_ids)
        drafts: list[int] = []
        if g:
            ids = self._catch_up(input_ids)  # 1 token, or 2 after a fully accepted round
            s = run.gen.sampling
            for _ in range(g):
                with run.timer.phase("draft"):
                    self.llm.eval(ids)
                    ptr = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
                with run.timer.phase("sampling"):
                    logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))[: self.vocab]  # [V] view
                    d = sampling.next_token(torch.from_numpy(logits), s, run.rng)
                drafts.append(d)
                ids = [d]
        run.open_round(drafts)
        return np.array(drafts, dtype=np.intc)

    def _catch_up(self, input_ids: np.ndarray) -> list[int]:
        """Roll the draft's cache back to its common prefix with input_ids; -> the ids to feed."""
        llm = self.llm
        cached = llm.input_ids[: llm.n_tokens]
        n = min(len(cached), len(input_ids) - 1)  # feed at least the newest token
        same = np.flatnonzero(cached[:n] != input_ids[:n])
        keep = int(same[0]) if same.size else n
        llm.n_tokens = keep  # Llama.eval removes cached positions >= n_tokens before decoding
        return [int(t) for t in input_ids[keep:]]


class LookupDraft(LlamaDraftModel):
    """The library's LlamaPromptLookupDecoding, its call booked as draft, one round per call."""

    def __init__(self, n: int, k: int):
        self.lookup = LlamaPromptLookupDecoding(max_ngram_size=n, num_pred_tokens=k)
        self.run: Optional[_Run] = None

    def prefill(self, run: _Run, prompt: list[int]) -> None:
        self.run = run  # nothing to ingest

    def __call__(self, input_ids: np.ndarray, /, **kwargs) -> np.ndarray:
        run = self.run
        g = run.draft_call(input_ids)
        with run.timer.phase("draft"):
            drafts = self.lookup(input_ids)[:g] if g else np.array([], dtype=np.intc)
        run.open_round([int(t) for t in drafts])
        return drafts


class _Timed:
    """Wrap a Llama's bound eval/sample so the library's own loop books them to phases. In the
    baseline each eval's last logits row is copied, outside the clock, into a RowStore for
    target_entropy."""

    def __init__(self, llm: llama_cpp.Llama, vocab: int):
        self.llm, self.vocab, self.n_vocab = llm, vocab, llm.n_vocab()
        self.eval, self.sample = llm.eval, llm.sample
        self.run: Optional[_Run] = None
        llm.eval = self._eval  # instance attributes shadow the methods generate() calls
        llm.sample = self._sample

    def _eval(self, tokens):
        run = self.run
        run.n_eval += 1
        if run.n_eval == 1:  # the prompt: prefill, then round 0 (the first token) starts
            with run.timer.phase("prefill"):
                self.eval(tokens)
            run.open_round([])
            run.begin_round()
        else:
            with run.timer.phase("verify"):
                self.eval(tokens)
        if run.rows is not None:
            with run.timer.outside():
                ptr = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
                run.rows.add(torch.from_numpy(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))[: self.vocab]))

    def _sample(self, *args, **kwargs):
        run = self.run
        run.n_sample += 1
        with run.timer.phase("sampling"):
            return self.sample(*args, **kwargs)


class LlamaCppNativeRuntime(lc.LlamaText, Runtime):
    name = "llamacpp-native"
    reads_target_gguf = True  # --target-quant: one measurement per variant

    def load(self, pair: PairSpec) -> None:
        llama_files.quiet_logs()
        self.pair, self.target, self.draft_llm = pair, None, None
        t_path = llama_files.check_gguf(pair.target_gguf, "target")
        d_path = llama_files.check_gguf(pair.draft_gguf, "draft")
        self.n_ctx = self.settings.resolve_n_ctx(llama_files.n_ctx_train(t_path, "target"))
        try:
            # with --draft self the same file is loaded twice (Llama takes a path, not a model)
            self.draft_llm = self._llama(d_path, None)
            self.drafter = HarnessDraft(self.draft_llm, 0)
            self.target = self._llama(t_path, self.drafter)
            self.drafter.vocab = llama_files.check_vocabularies(self.target._model.vocab, self.draft_llm._model.vocab)
        except BaseException:
            self.close()
            raise
        self.timed = _Timed(self.target, self.drafter.vocab)
        self.vocab = self.target._model.vocab
        self.paths = (t_path, d_path)

    def _llama(self, path: str, draft: Optional[LlamaDraftModel]) -> llama_cpp.Llama:
        """A Llama with the same context settings as the llamacpp runtime's contexts."""
        s = self.settings
        t, tb = lc.n_threads(s)
        n_batch = min(lc.N_BATCH, self.n_ctx)
        try:
            # logits_all with a draft model: the library forces it on then, but sizes Llama.scores by
            # this argument (n_batch rows without it), so its loop would fail past n_batch tokens
            return llama_cpp.Llama(
                model_path=path, n_gpu_layers=lc.gpu_layers(s), n_ctx=self.n_ctx, n_batch=n_batch, n_ubatch=n_batch,
                n_threads=t, n_threads_batch=tb, flash_attn=False, draft_model=draft, logits_all=draft is not None,
                verbose=llama_files.verbose(),
            )
        except ValueError as e:
            raise HarnessError(f"llama-cpp-python could not load {path}: {e}") from None

    @property
    def text_model(self):
        return self.target.model

    def generate_baseline(self, prompt_ids, gen):
        """The library's plain loop: Llama.generate without a draft model."""
        with self.generating():  # as in runtimes/llamacpp.py (the draft's choice uses torch)
            return self._generate(prompt_ids, gen, speculative=False)

    def generate_speculative(self, prompt_ids, gen):
        with self.generating():
            return self._generate(prompt_ids, gen, speculative=True)

    def _generate(self, prompt: list[int], gen: GenerationSettings, speculative: bool) -> Generation:
        llm, s = self.target, gen.sampling
        run = _Run(len(prompt), gen)
        if not speculative:
            run.rows = RowStore(llm, gen.max_new_tokens)
        self.timed.run = run
        d = gen.drafter
        lookup = speculative and isinstance(d, NgramSpec)
        drafter = LookupDraft(d.max_ngram, d.k or gen.gamma) if lookup else self.drafter
        llm.draft_model = drafter if speculative else None
        # Llama() forces logits_all when built with a draft model; without one (the plain loop a
        # user without a draft runs) it copies only the last row, as Llama(draft_model=None) would
        llm._logits_all = speculative
        ctxs = [llm.ctx, self.draft_llm.ctx] if speculative and not lookup else [llm.ctx]
        lc.reset_perf(*ctxs)
        llm.reset()  # no prefix reuse from the previous generation: every run prefills
        llm.set_seed(gen.seed)
        run.timer.start()
        if speculative:
            with run.timer.phase("prefill"):
                drafter.prefill(run, prompt)
        out: list[int] = []
        stream = llm.generate(prompt, top_k=s.top_k, top_p=s.top_p, min_p=0.0, typical_p=1.0,
                              temp=s.temperature, repeat_penalty=1.0, reset=False)
        try:
            for t in stream:
                run.token_out(int(t))
                out.append(int(t))
                if len(out) >= gen.max_new_tokens or (not gen.ignore_eos and llama_cpp.llama_vocab_is_eog(self.vocab, t)):
                    break
                if not speculative:  # baseline: one round per token, yield to yield
                    run.close_round()
                    run.open_round([])
                    run.begin_round()
        finally:
            stream.close()
        run.close_round()
        total = run.timer.stop()
        perf = {"target": lc.PerfCounters.read(llm.ctx).to_dict()}
        if speculative and not lookup:
            perf["draft"] = lc.PerfCounters.read(self.draft_llm.ctx).to_dict()
        return self._result(out, run, total, perf, speculative)

    def _result(self, out, run: _Run, total, perf: dict, speculative: bool) -> Generation:
        phases = Phases.timed(total)
        notes = {
            "verify_s": "wall of the library's Llama.eval: llama_decode plus its copy of every output row "
                        "into Llama.scores (logits_all is forced with a draft model); llama.cpp's decode ms in extra.llama_perf",
            "sampling_s": "the library's sampler chain (Llama.sample)" + (" plus the draft's token choice in Python" if speculative else ""),
        }
        if speculative and isinstance(run.gen.drafter, NgramSpec):
            notes["draft_s"] = "the library's LlamaPromptLookupDecoding call"
            notes["sampling_s"] = "the library's sampler chain (Llama.sample)"
        if speculative:
            notes["accepted"] = "the library accepts while its own sample equals the draft (not the ratio test)"
        if not run.gen.sampling.greedy and run.gen.sampling.top_p < 1 and run.gen.sampling.temperature != 1:
            notes["distribution"] = "the library applies top-p before temperature; core/sampling.py after"
        if run.n_eval == 0 or run.n_sample == 0:  # this library version bypassed our wrappers
            for k in ("prefill_s", "verify_s", "sampling_s", "unaccounted_s"):
                setattr(phases, k, None)
                notes[k] = "Llama.generate no longer calls Llama.eval/sample: not observable in this version"
        g = Generation(token_ids=out, phases=phases, rounds=run.rounds, notes=notes,
                       extra={"llama_perf": perf, "n_eval_calls": run.n_eval, "n_sample_calls": run.n_sample})
        if run.rows is not None:
            steps = run.rows.rows()[: len(out)]  # [new, V]
            g.keep_steps(steps)
        return g

    def describe(self) -> dict:
        return lc.describe(self.settings, self.paths, self.n_ctx)

    drafters = (DraftModelSpec, NgramSpec)  # its draft model and its LlamaPromptLookupDecoding, a fixed length
    policies = ("fixed",)

    def verify_rule(self, gen) -> str:
        return "greedy-match" if gen.sampling.greedy else "sample-match"

    def reference(self):
        """A context of our own (runtimes/llamacpp.py's LlamaKV) on the library's target model."""
        from spec_harness.runtimes.llamacpp import LlamaKV

        if getattr(self, "_reference", None) is None:
            self._reference = LlamaKV(self.target._model.model, lc.context_params(self.settings, self.n_ctx), self.drafter.vocab)
        return self._reference

    def generating(self):
        return lc.single_threaded_torch()

    def close(self) -> None:
        if getattr(self, "_reference", None) is not None:
            self._reference.close()
        self._reference = None
        for llm in (self.target, self.draft_llm):
            if llm is not None:
                llm.close()
        self.target = self.draft_llm = None
