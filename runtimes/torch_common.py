"""What the two runtimes over transformers models share (`torch`: our loop, `hf`: transformers'
generate): device and dtype resolution, torch's thread count (apply_threads; for a block,
core/limits.py's torch_threads), loading the pair with its tokenizer check, encode/decode through
the target's tokenizer, and the description both give run.json (with each model's sizes,
models/shape.py).

What it does not do: generate (runtimes/pytorch.py, runtimes/hf.py) or read model files
(models/loading.py).
"""

from __future__ import annotations

import functools

import torch

from spec_harness.core.config import PairSpec, RuntimeSettings
from spec_harness.core.errors import HarnessError
from spec_harness.models.shape import context_length, pair_sizes, sizes_from_config
from spec_harness.runtimes.base import TokenizerText


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


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    if dtype == "auto":
        return torch.float32 if device == "cpu" else torch.float16
    return getattr(torch, dtype)


def apply_threads(n_threads) -> None:
    """--threads for torch's CPU kernels (default: torch's own, one per core)."""
    if n_threads:
        torch.set_num_threads(n_threads)


class HFPair:
    """The target, the draft (the same object with --draft self) and the target's tokenizer, on
    the device and in the dtype the settings ask for. Tokenizers that differ are refused."""

    def __init__(self, pair: PairSpec, settings: RuntimeSettings):
        from spec_harness.models.compat import check_tokenizers
        from spec_harness.models.loading import load_hf_model, load_hf_tokenizer

        self.device = resolve_device(settings.device)
        apply_threads(settings.n_threads)
        self.dtype = resolve_dtype(settings.dtype, self.device)
        self.tokenizer = load_hf_tokenizer(pair.target, "target")
        self.target = load_hf_model(pair.target, "target", self.dtype, self.device)
        if pair.self_draft:
            self.draft = self.target
        else:
            check_tokenizers(self.tokenizer, load_hf_tokenizer(pair.draft, "draft"))
            self.draft = load_hf_model(pair.draft, "draft", self.dtype, self.device)
        self.context = int(context_length(self.target.config) or 0) or 1 << 30

    def describe(self) -> dict:
        import transformers

        return {"device": self.device, "dtype": str(self.dtype).replace("torch.", ""), "torch": torch.__version__,
                "transformers": transformers.__version__, "threads": torch.get_num_threads(),
                "model_sizes": self.model_sizes}

    @functools.cached_property
    def model_sizes(self):
        """What one step of each model reads and computes, in the dtype it runs in (models/shape.py)."""
        dtype = str(self.dtype).replace("torch.", "")
        return pair_sizes(lambda m: sizes_from_config(m.config, dtype), self.target, self.draft)


class HFText(TokenizerText):
    """TokenizerText over the runtime's HFPair (self.hf, set in load()): its tokenizer and context."""

    @property
    def tokenizer(self):
        return self.hf.tokenizer

    @property
    def context(self) -> int:
        return self.hf.context
