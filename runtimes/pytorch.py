"""The `torch` runtime: the shared speculative loop (runtimes/loop.py) over two Hugging Face causal
LMs in PyTorch, each behind a TorchKV adapter (its own KV cache, batch 1) on CPU, CUDA or MPS.

Llama-architecture models run through runtimes/torch_llama.py (static KV cache, fused matrices,
on a CPU in float32 the forward as one C++ kernel for one token and one for several,
runtimes/llama_step.py, the latter over packed copies of the matrices, runtimes/packed_matmul.py:
the same weights; the kernels are built at load, outside every measurement); other models, or `lean=False`, through transformers' own forward
with a DynamicCache (HFForward). Sampling is core/sampling.py, on the device's logits. On CUDA/MPS
every phase ends with a device synchronize.

`--draft self` (or the same model twice) gives the one model two TorchKV adapters: two caches,
shared weights, so every draft pass is real work (the calibration run).
What it does not do: batching (batch size 1 only), tree drafting, torch.compile of transformers' forward.
"""

from __future__ import annotations

import inspect
from typing import Optional

import torch

from spec_harness.core.errors import HarnessError, RuntimeUnavailable
from spec_harness.core.timing import device_sync
from spec_harness.runtimes.base import LoopRuntime
from spec_harness.runtimes.loop import Model
from spec_harness.runtimes.torch_common import HFPair, HFText


class HFForward:
    """transformers' own forward with a DynamicCache: the path for models runtimes/torch_llama.py
    cannot run (and for comparison with it). Same four members as torch_llama.LlamaFast."""

    def __init__(self, model):
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
        l0 = self.length
        out = self.model(input_ids=x, use_cache=True, logits_to_keep=n_logits, output_hidden_states=self.aux is not None,
                         **{self._cache_kw: self.cache})
        if self.aux is not None:  # hidden_states[i]: the input of layer i
            new = torch.stack([out.hidden_states[i][0] for i in self.aux], 1)  # [S, n_aux, H]
            self.feats = torch.cat([self.feats[:l0], new]) if self.feats is not None else new
        return out.logits[0, -n_logits:]  # [n_logits, V]

    aux: Optional[list[int]] = None
    feats: Optional[torch.Tensor] = None

    def keep_features(self, layer_ids) -> None:
        self.aux, self.feats = (sorted(layer_ids) if layer_ids else None), None

    def features(self, start: int, end: int) -> torch.Tensor:
        if self.aux is None or end > self.length:
            raise ValueError(f"no features for positions {start}..{end - 1} (cache holds {self.length})")
        return self.feats[start:end].flatten(1)

    def crop(self, length: int) -> None:
        extra = self.length - length
        if extra > 0:
            self.cache.crop(-extra)  # a negative count removes tokens in transformers 4.x and 5.x alike

    def reset(self) -> None:
        self.cache = self._new_cache()


class TorchKV(Model):
    """A transformers causal LM with its own KV cache, as the shared loop's Model. [B=1]"""

    def __init__(self, model, vocab: int, lean: bool = True, sync=None, kernels: Optional[bool] = None, packed: bool = True):
        from spec_harness.runtimes import torch_llama

        self.model = model
        self.vocab = vocab  # compare over the tokenizer's ids only (embedding rows may be padded)
        self.sync = sync
        self.why_not_lean = "turned off" if not lean else torch_llama.unsupported_reason(model)
        self.lean = None if self.why_not_lean else torch_llama.LlamaFast(model, kernels, packed)
        self.impl = self.lean or HFForward(model)

    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        return self.impl.forward(ids, n_logits)[:, : self.vocab]  # [n_logits, V]

    def describe(self) -> str:
        if self.lean is None:
            return f"transformers ({self.why_not_lean})"
        step = "one-token step kernel" if self.lean.kernels else f"one-token step eager: {self.lean.why_no_kernels}"
        why = self.lean.weights.why_not_packed
        passes = ("several tokens through the pass kernel" if self.lean.kernel_passes
                  else "packed matrices for several tokens" if why is None else f"several tokens through F.linear: {why}")
        return f"lean llama (static cache; {step}; {passes})"

    def keep_features(self, layer_ids) -> None:
        self.impl.keep_features(layer_ids)

    def features(self, start: int, end: int) -> torch.Tensor:
        return self.impl.features(start, end)

    def crop(self, length: int) -> None:
        self.impl.crop(length)

    def reset(self) -> None:
        self.impl.reset()

    def __len__(self) -> int:
        return self.impl.length


def resolve_forward(settings) -> tuple[str, Optional[str]]:
    """(the forward --torch-forward names: kernels or eager, why the kernels cannot run here or
    None): auto is kernels where they build for the run's device and dtype, else eager."""
    from spec_harness.runtimes import torch_llama
    from spec_harness.runtimes.torch_common import resolve_device, resolve_dtype

    device = resolve_device(settings.device)
    why = torch_llama.kernel_reason(resolve_dtype(settings.dtype, device), torch.device(device))
    if settings.torch_forward == "auto":
        return ("kernels" if why is None else "eager"), why
    return settings.torch_forward, why


class TorchRuntime(HFText, LoopRuntime):
    name = "torch"
    forwards = ("kernels", "eager")

    def load(self, pair) -> None:
        self.pair = pair
        self.forward, why = resolve_forward(self.settings)
        if self.forward == "kernels" and why:
            raise RuntimeUnavailable(f"--torch-forward kernels: {why} (--torch-forward eager runs PyTorch's own ops)")
        self.hf = HFPair(pair, self.settings)
        vocab = len(self.hf.tokenizer)
        for role, m in (("target", self.hf.target), ("draft", self.hf.draft)):
            if m.config.vocab_size < vocab:
                raise HarnessError(f"{role} model has {m.config.vocab_size} embedding rows but its tokenizer {vocab} ids; "
                                   "the files do not belong together")
        sync = device_sync(self.hf.device)
        eager = self.forward == "eager"  # PyTorch's own ops throughout: no C++ kernel, F.linear over plain matrices
        self.target = TorchKV(self.hf.target, vocab, sync=sync, kernels=False if eager else None, packed=not eager)
        self.draft = TorchKV(self.hf.draft, vocab, sync=sync, kernels=False if eager else None, packed=not eager)
        self.eos_id = self.hf.tokenizer.eos_token_id

    def head_embedding(self):
        return self.hf.target.get_input_embeddings().weight.detach().float()

    def target_config(self):
        return self.hf.target.config

    def describe(self) -> dict:
        return {**self.hf.describe(), "torch_forward": self.forward,
                "forward": {role: kv.describe() for role, kv in (("target", self.target), ("draft", self.draft))}}

    def close(self) -> None:
        device = self.hf.device if getattr(self, "hf", None) else ""
        self.hf = self.target = self.draft = None
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
