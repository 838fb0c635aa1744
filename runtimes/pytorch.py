"""The `torch` runtime: our own speculative sampling over two Hugging Face causal LMs.

Side by side with Leviathan et al. 2023, Algorithm 1 (one round):

    paper                                   here (SpeculativeEngine.speculative)
    for i = 1..gamma: q_i = M_q(prefix+x<i)  _draft(): gamma one-token draft passes, KV cached
                      x_i ~ q_i              sample(probs_from_logits(...))
    p_1..p_{gamma+1} = M_p(prefix+x_1..x_g)  _verify(): one target pass over gamma+1 tokens
    n = first i with r_i > p_i(x_i)/q_i(x_i) sampling.verify(): ratio test
    t ~ norm(max(0, p_{n+1} - q_{n+1}))      ... residual resampling
        or p_{gamma+1} if all accepted       ... bonus token from the last row
    return prefix + x_1..x_n + t             _rollback(): both caches cropped to what was accepted

Cache invariant between rounds: each model's KV cache holds a prefix of `seq` of length at most
len(seq) - 1; the tokens not yet in a cache are fed at that model's next pass. After a rejection
both caches hold exactly seq[:-1] (the correction token is fed next). After all gamma drafts are
accepted the draft cache lacks d_gamma, which the draft's next pass ingests together with the
bonus token (two tokens in one pass), so the draft always sees every accepted token.

Phases: prefill (both models on the prompt), draft (draft passes), verify (target passes),
sampling (logits -> probabilities -> tokens, ratio test, residual), the rest is unaccounted.
What it does not do: batching (batch size 1 only), static caches, tree drafting.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from harness import metrics, sampling
from harness.config import GenerationSettings, SamplingParams
from harness.errors import HarnessError
from harness.timing import PhaseTimer, device_sync
from runtimes.base import Generation, HFText, PairSpec, Phases, RoundRecord, Runtime


def resolve_device(device: str) -> str:
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise HarnessError("--device cuda: this PyTorch build sees no CUDA device; use --device cpu or a CUDA build of torch")
    if device == "mps" and not torch.backends.mps.is_available():
        raise HarnessError("--device mps: MPS is not available here; use --device cpu")
    return device


def apply_threads(n_threads) -> None:
    """--n-threads for torch's CPU kernels (default: torch's own, one per core)."""
    if n_threads:
        torch.set_num_threads(n_threads)


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    if dtype == "auto":
        return torch.float32 if device == "cpu" else torch.float16
    return getattr(torch, dtype)


class HFForward:
    """transformers' own forward with a DynamicCache: the path for models runtimes/torch_llama.py
    cannot run (and for comparison with it). Same four members as torch_llama.LlamaFast."""

    def __init__(self, model):
        import inspect

        from transformers import DynamicCache

        self.model = model
        takes_config = "config" in inspect.signature(DynamicCache.__init__).parameters
        self._new_cache = (lambda: DynamicCache(config=model.config)) if takes_config else DynamicCache
        # transformers renamed past_key_values to cache in 5.x
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.cache = self._new_cache()

    @property
    def length(self) -> int:
        return self.cache.get_seq_length()

    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        x = torch.tensor([ids], dtype=torch.long, device=self.model.device)  # [1, S]
        out = self.model(input_ids=x, use_cache=True, logits_to_keep=n_logits, **{self._cache_kw: self.cache})
        return out.logits[0, -n_logits:]  # [n_logits, V]

    def crop(self, length: int) -> None:
        extra = self.length - length
        if extra > 0:
            self.cache.crop(-extra)  # a negative count removes tokens in transformers 4.x and 5.x alike

    def reset(self) -> None:
        self.cache = self._new_cache()


class KVModel:
    """A causal LM with its own KV cache: feed tokens, get logits, crop back. [B=1].

    Llama-architecture models run through runtimes/torch_llama.py (static cache, fused matmuls,
    the same weights); others, or `lean=False`, through HFForward (transformers' forward).
    """

    def __init__(self, model, vocab: int, lean: bool = True):
        from runtimes import torch_llama

        self.model = model
        self.vocab = vocab  # compare over the tokenizer's ids only (embedding rows may be padded)
        self.why_not_lean = "turned off" if not lean else torch_llama.unsupported_reason(model)
        self.lean = None if self.why_not_lean else torch_llama.LlamaFast(model)
        self.impl = self.lean or HFForward(model)

    def reset(self) -> None:
        self.impl.reset()

    def __len__(self) -> int:
        return self.impl.length

    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        """Feed ids [S] after the cache; -> logits of the last n_logits positions [n_logits, V]."""
        return self.impl.forward(ids, n_logits)[:, : self.vocab]

    def crop(self, length: int) -> None:
        """Keep the first `length` cached positions."""
        self.impl.crop(length)


class SpeculativeEngine:
    """Target-only and speculative generation over two KVModels, timed by one PhaseTimer.

    `forward_hook(role, kv_model, ids, logits)` is called after every model pass when set:
    tests use it to compare cached logits with a cache-free recomputation.
    """

    def __init__(self, target: KVModel, draft: KVModel, eos_id: Optional[int], sync=None):
        self.target, self.draft = target, draft
        self.eos_id = eos_id
        self.sync = sync
        self.forward_hook: Optional[Callable] = None

    def _pass(self, role: str, m: KVModel, ids: list[int], n_logits: int) -> torch.Tensor:
        logits = m.forward(ids, n_logits)
        if self.forward_hook is not None:
            self.forward_hook(role, m, ids, logits)
        return logits

    def _prefill(self, timer: PhaseTimer, prompt: list[int], models: list[KVModel]) -> None:
        with timer.phase("prefill"):
            for m in models:
                m.reset()
                if len(prompt) > 1:
                    self._pass("prefill", m, prompt[:-1], 1)

    def _stop(self, gen: GenerationSettings, out: list[int], token: int) -> bool:
        return len(out) >= gen.max_new_tokens or (not gen.ignore_eos and token == self.eos_id)

    def _emit(self, gen: GenerationSettings, out: list[int], tokens: list[int]) -> tuple[int, bool]:
        """Append tokens until max_new_tokens or EOS -> (emitted, done)."""
        for i, t in enumerate(tokens):
            out.append(t)
            if self._stop(gen, out, t):
                return i + 1, True
        return len(tokens), False

    @torch.inference_mode()
    def baseline(self, prompt: list[int], gen: GenerationSettings) -> Generation:
        s, rng = gen.sampling, torch.Generator().manual_seed(gen.seed)
        timer = PhaseTimer(self.sync)
        timer.start()
        self._prefill(timer, prompt, [self.target])
        seq, out, rounds, done, steps = list(prompt), [], [], False, []
        while not done:
            timer.begin_round()
            with timer.phase("verify"):
                logits = self._pass("target", self.target, self._pending(self.target, seq), 1)[-1]  # [V]
            steps.append(logits)  # kept for the entropy, computed after the clock stops
            with timer.phase("sampling"):
                t = sampling.next_token(logits.cpu(), s, rng)
            n, done = self._emit(gen, out, [t])
            seq.append(t)
            rounds.append(RoundRecord.timed(timer.end_round(), 0, 0, n))
        g = _generation(out, timer.stop(), rounds)
        g.target_entropy = metrics.mean_entropy(torch.stack(steps))
        return g

    @torch.inference_mode()
    def speculative(self, prompt: list[int], gen: GenerationSettings) -> Generation:
        s, rng = gen.sampling, torch.Generator().manual_seed(gen.seed)
        timer = PhaseTimer(self.sync)
        timer.start()
        self._prefill(timer, prompt, [self.target, self.draft])
        seq, out, rounds, done = list(prompt), [], [], False
        while not done:
            timer.begin_round()
            g = min(gen.gamma, gen.max_new_tokens - len(out) - 1)  # never draft past the end (as HF)
            drafts, q = self._draft(timer, seq, g, s, rng)
            with timer.phase("verify"):
                logits = self._pass("target", self.target, self._pending(self.target, seq) + drafts, g + 1)  # [g+1, V]
            with timer.phase("sampling"):
                k, t = sampling.verify(torch.tensor(drafts, dtype=torch.long), q, logits.cpu(), s, rng)
            n_before = len(seq)
            n, done = self._emit(gen, out, drafts[:k] + [t])
            seq += drafts[:k] + [t]
            self._rollback(n_before + k)
            self._check_caches(seq)
            rounds.append(RoundRecord.timed(timer.end_round(), g, k, n))
        return _generation(out, timer.stop(), rounds)

    @staticmethod
    def _pending(m: KVModel, seq: list[int]) -> list[int]:
        """The tokens of seq that m's cache has not seen yet (fed at m's next pass)."""
        return seq[len(m):]

    def _draft(self, timer, seq, g, s: SamplingParams, rng) -> tuple[list[int], Optional[torch.Tensor]]:
        """g draft tokens and their probabilities q [g, V] (None when greedy)."""
        drafts, qs = [], []
        ids = self._pending(self.draft, seq)  # 1 token, or 2 after a fully accepted round
        for _ in range(g):
            with timer.phase("draft"):
                logits = self._pass("draft", self.draft, ids, 1)  # [1, V]
            with timer.phase("sampling"):
                if s.greedy:
                    d = int(logits[0].argmax())
                else:
                    q = sampling.probs_from_logits(logits.cpu(), s)  # [1, V]
                    d = int(sampling.sample(q, s, rng)[0])
                    qs.append(q)
            drafts.append(d)
            ids = [d]
        return drafts, (torch.cat(qs) if qs else None)

    def _rollback(self, keep: int) -> None:
        """Both caches keep seq[:keep] = everything before the newest (correction or bonus) token.

        The target's cache holds prefix + all g drafts: crop to keep (the rejected draft's KV
        goes, its slot belongs to the correction). The draft's holds prefix + d_1..d_{g-1}:
        crop to keep after a rejection; after a full accept it is one short and catches up
        at its next pass.
        """
        self.target.crop(keep)
        self.draft.crop(keep)


    def _check_caches(self, seq: list[int]) -> None:
        """The cache invariant, checked every round: the target holds seq[:-1]; the draft at most that
        (it lags by one after a full accept, more only after a final no-draft round)."""
        if len(self.target) != len(seq) - 1 or len(self.draft) > len(seq) - 1:
            raise AssertionError(f"KV caches out of step: target {len(self.target)}, draft {len(self.draft)}, sequence {len(seq)}")


def _generation(out: list[int], total, rounds: list[RoundRecord]) -> Generation:
    return Generation(token_ids=out, phases=Phases.timed(total), rounds=rounds)


class TorchRuntime(HFText, Runtime):
    name = "torch"

    def load(self, pair: PairSpec) -> None:
        from models.compat import check_tokenizers
        from models.loading import load_hf_model, load_hf_tokenizer

        self.device = resolve_device(self.settings.device)
        apply_threads(self.settings.n_threads)
        self.dtype = resolve_dtype(self.settings.dtype, self.device)
        self.pair = pair
        self.tokenizer = load_hf_tokenizer(pair.target, "target")
        target = load_hf_model(pair.target, "target", self.dtype, self.device)
        vocab = len(self.tokenizer)
        if pair.self_draft:
            draft_model = target
        else:
            draft_tok = load_hf_tokenizer(pair.draft, "draft")
            check_tokenizers(self.tokenizer, draft_tok)
            draft_model = load_hf_model(pair.draft, "draft", self.dtype, self.device)
        for role, m in (("target", target), ("draft", draft_model)):
            if m.config.vocab_size < vocab:
                raise HarnessError(f"{role} model has {m.config.vocab_size} embedding rows but its tokenizer {vocab} ids; the files do not belong together")
        # with --draft self the two KVModels share weights but not caches: every draft pass is real
        t_kv, d_kv = KVModel(target, vocab), KVModel(draft_model, vocab)
        self.engine = SpeculativeEngine(t_kv, d_kv, self.tokenizer.eos_token_id, device_sync(self.device))
        self._ctx = int(getattr(target.config, "max_position_embeddings", 0) or 0) or 1 << 30

    def generate_baseline(self, prompt_ids, gen):
        return self.engine.baseline(prompt_ids, gen)

    def generate_speculative(self, prompt_ids, gen):
        return self.engine.speculative(prompt_ids, gen)

    def describe(self) -> dict:
        import transformers

        return {
            "device": self.device,
            "dtype": str(self.dtype).replace("torch.", ""),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "threads": torch.get_num_threads(),
            "forward": {role: "lean llama (static cache)" if kv.lean else f"transformers ({kv.why_not_lean})"
                        for role, kv in (("target", self.engine.target), ("draft", self.engine.draft))},
        }

    def close(self) -> None:
        self.engine = None
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
