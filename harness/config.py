"""Run configuration: plain dataclasses, validated in __post_init__.

Every impossible setting is rejected here with a HarnessError naming the flag and the fix, so a
bad run never starts. What it does not do: resolve model paths (models/) or load anything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from harness.errors import HarnessError

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class SamplingParams:
    """How logits become tokens; identical for the draft's q and the target's p.

    temperature 0 means greedy (argmax); top_k 0 means no top-k; top_p 1.0 means no top-p.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0

    def __post_init__(self):
        if not self.temperature >= 0:
            raise HarnessError(f"--temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise HarnessError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise HarnessError(f"--top-k must be >= 0 (0 = off), got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class GenerationSettings:
    """One generation's settings, the same for baseline and speculative."""

    sampling: SamplingParams = field(default_factory=SamplingParams)
    gamma: int = 4
    max_new_tokens: int = 64
    seed: int = 0
    ignore_eos: bool = False

    def __post_init__(self):
        if self.gamma < 1:
            raise HarnessError(f"--gamma must be >= 1 (draft tokens per round), got {self.gamma}")
        if self.max_new_tokens < 1:
            raise HarnessError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")


@dataclass(frozen=True)
class RuntimeSettings:
    """Where and how a runtime runs its models."""

    device: str = "auto"
    dtype: str = "auto"
    n_threads: Optional[int] = None
    n_gpu_layers: int = 0
    n_ctx: Optional[int] = None

    def __post_init__(self):
        if self.device not in DEVICES and not self.device.startswith("cuda:"):
            raise HarnessError(f"--device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.dtype not in DTYPES:
            raise HarnessError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.n_threads is not None and self.n_threads < 1:
            raise HarnessError(f"--n-threads must be >= 1, got {self.n_threads}")


def to_dict(obj) -> dict:
    return asdict(obj)
