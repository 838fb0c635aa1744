"""Settings as plain dataclasses, validated in __post_init__, and their defaults, each defined once;
the settings a flag gives as text (the draft policy, the torch forward; the drafter through
core/drafters/) parsed once into typed values (DraftPolicy, TorchForward, a DrafterSpec) whose str()
is that text again.

Every impossible setting is rejected here with a HarnessError naming the flag and the fix, so a
bad run never starts. The command line shows these defaults in --help through `default_of`.
What it does not do: resolve model paths (models/) or load anything.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, Optional

from spec_harness.core import drafters
from spec_harness.core.drafters import DrafterSpec
from spec_harness.core.errors import HarnessError

DEVICES = ("auto", "cpu", "cuda", "mps")
# How many tokens a round drafts, with gamma as the most (DraftPolicy below):
# `fixed` = exactly gamma (while tokens remain); `confidence:P` = stop before the first position
# whose draft distribution has top-1 probability < P (llama.cpp's --spec-draft-p-min; Hugging
# Face's assistant_confidence_threshold also keeps that last token); `heuristic` = Hugging Face's
# schedule: start at gamma, +2 after a round that accepted every draft, -1 otherwise (here at most
# gamma, at least 1); `library-default` = whatever the runtime's library does when a user sets
# nothing (gamma is then not used).
DRAFT_POLICIES = ("fixed", "confidence:P", "heuristic", "library-default")
LIBRARY_DEFAULT = "library-default"


class FromText:
    """A setting parsed once from its flag's text: `parse(text)`, and `of(value)` for a value that
    may be typed already (a caller's) or text (a test's, harness tune's stored settings)."""

    @classmethod
    def of(cls, value):
        return cls.parse(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class DraftPolicy(FromText):
    """A --draft-policy parsed: `kind` (fixed, confidence, heuristic, library-default) and, for
    confidence, its P; str() is the flag's text, which rows and run.json carry."""

    kind: str = "fixed"
    p: Optional[float] = None  # confidence:P's P, 0 < P < 1; None for every other kind

    @classmethod
    def parse(cls, text: str) -> DraftPolicy:
        """'fixed' | 'confidence:P' (0 < P < 1) | 'heuristic' | 'library-default'; HarnessError otherwise."""
        kind, sep, arg = text.partition(":")
        if kind == "confidence" and sep:
            try:
                p = float(arg)
            except ValueError:
                p = -1.0
            if 0 < p < 1:
                return cls(kind, p)
            raise HarnessError(f"--draft-policy confidence:P needs a probability 0 < P < 1 (e.g. confidence:0.4), got {text!r}")
        if text in ("fixed", "heuristic", LIBRARY_DEFAULT):
            return cls(text)
        raise HarnessError(f"--draft-policy must be one of {', '.join(DRAFT_POLICIES)}, got {text!r}")

    @property
    def library_default(self) -> bool:
        return self.kind == LIBRARY_DEFAULT

    @property
    def confidence(self) -> Optional[float]:
        """P of a confidence:P policy, else None."""
        return self.p if self.kind == "confidence" else None

    def __str__(self) -> str:
        return f"confidence:{self.p!r}" if self.kind == "confidence" else self.kind


DTYPES = ("auto", "float32", "float16", "bfloat16")


class TorchForward(str, Enum):
    """The torch runtime's forward (--torch-forward): kernels (its C++ kernels,
    runtimes/llama_step.py), eager (PyTorch's own ops throughout) or auto (kernels on a CPU in
    float32 where they build, else eager). A str: rows carry it as it is."""

    AUTO = "auto"
    KERNELS = "kernels"
    EAGER = "eager"

    def __str__(self) -> str:  # the flag's text, also in f-strings (enum.StrEnum is Python 3.11+)
        return self.value

    @classmethod
    def parse(cls, text: str) -> TorchForward:
        """The flag's text (or a TorchForward) as a TorchForward; HarnessError otherwise."""
        try:
            return cls(text)
        except ValueError:
            raise HarnessError(f"--torch-forward must be one of {', '.join(f.value for f in cls)}, got {text!r}") from None


def at_least(flag: str, value, low, why: str = "") -> None:
    """HarnessError `--flag must be >= low (why), got value` unless value >= low."""
    if not value >= low:
        raise HarnessError(f"{flag} must be >= {low}{f' ({why})' if why else ''}, got {value}")


def default_of(cls, name: str):
    """The default of dataclass field `name` of `cls` (for click options: one definition)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()  # type: ignore[misc]


@dataclass(frozen=True)
class SamplingParams:
    """How logits become tokens; identical for the draft's q and the target's p.

    temperature 0 means greedy (argmax); top_k 0 means no top-k; top_p 1.0 means no top-p.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0

    def __post_init__(self):
        at_least("--temperature", self.temperature, 0, "0 = greedy")
        if not 0 < self.top_p <= 1:
            raise HarnessError(f"--top-p must be in (0, 1], got {self.top_p}")
        at_least("--top-k", self.top_k, 0, "0 = off")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


WARMUP_TOKENS = 8  # the length of a warm-up generation (the runner's before each setting, a server's first request)
# --max-new-tokens where --prompts is a prompt file or a public set (generation stops earlier at EOS):
# Spec-Bench generates up to 1024 tokens; on a 2-core CPU 128 keeps a few dozen questions x three
# drafters x every runtime within hours, and long enough to see acceptance late in an answer
PROMPT_FILE_MAX_NEW_TOKENS = 128


@dataclass(frozen=True)
class Arrivals:
    """An open-loop load (`--request-rate`): requests arrive at `rate` per second (inf: all at
    once), gamma-distributed gaps of shape `burstiness` (vLLM's --burstiness: 1 is a Poisson
    process), at most `max_in_flight` sent and unanswered at once (None: no cap, the server
    queues what its slots do not hold). runtimes/open_loop.py draws the times."""

    rate: float
    burstiness: float = 1.0
    max_in_flight: Optional[int] = None

    def __post_init__(self):
        if not self.rate > 0:
            raise HarnessError(f"--request-rate must be > 0 requests per second (or inf: all at once), got {self.rate}")
        if not (self.burstiness > 0 and self.burstiness != float("inf")):
            raise HarnessError(f"--burstiness must be a finite number > 0 (1 = Poisson arrivals), got {self.burstiness}")
        if self.max_in_flight is not None:
            at_least("--max-concurrency", self.max_in_flight, 1, "requests in flight at once")


@dataclass(frozen=True)
class GenerationSettings:
    """One generation's settings, the same for baseline and speculative.

    max_new_tokens 32 keeps the default pair's `harness run --runtime all` within minutes on a
    2-core CPU; sweeps and `harness run` share it.
    """

    sampling: SamplingParams = field(default_factory=SamplingParams)
    gamma: int = 4
    max_new_tokens: int = 32
    seed: int = 0
    ignore_eos: bool = False
    # the draft policy and the drafter, each parsed once: a string given here is parsed in __post_init__
    draft_policy: DraftPolicy = DraftPolicy()
    drafter: DrafterSpec = field(default_factory=drafters.default)
    # Forced acceptance (calibration): draft position i is accepted with probability
    # forced[min(i, len - 1)] whatever the tokens, so rounds follow Leviathan's i.i.d. model while
    # every pass costs what it costs; the output is then not the target's (rows say `synthetic`).
    forced: Optional[tuple[float, ...]] = None
    # Client streams a server is loaded with at once (`--concurrency`): 1 is one request at a time,
    # the generation's own; above 1 the generation is one request of a closed-loop cell (runtimes/closed_loop.py).
    concurrency: int = 1
    # An open-loop load (--request-rate): the generation is one request of a cell whose requests
    # arrive on a schedule (runtimes/open_loop.py); `concurrency` is then the server's slots. None: closed loop.
    arrivals: Optional[Arrivals] = None

    def __post_init__(self):
        object.__setattr__(self, "draft_policy", DraftPolicy.of(self.draft_policy))
        object.__setattr__(self, "drafter", drafters.of(self.drafter))
        at_least("--gamma", self.gamma, 1, "draft tokens per round")
        at_least("--max-new-tokens", self.max_new_tokens, 1)
        at_least("--concurrency", self.concurrency, 1, "client streams at once")
        if self.forced is not None and not (self.forced and all(0 <= a <= 1 for a in self.forced)):
            raise HarnessError(f"--alpha (forced acceptance) must be one or more rates in [0, 1], got {self.forced}")

    @property
    def gamma_max(self) -> Optional[int]:
        """The most drafts per round the harness asks for: gamma under every policy but
        library-default (None: the library decides)."""
        return None if self.draft_policy.library_default else self.gamma

    @property
    def confidence(self) -> Optional[float]:
        """P of a confidence:P policy, else None."""
        return self.draft_policy.confidence


@dataclass(frozen=True)
class RuntimeSettings:
    """Where and how a runtime runs its models. n_threads None: torch's own count, one llama.cpp
    thread per physical core; n_gpu_layers None: every layer where the llama.cpp build offloads
    (CUDA, Metal), else 0 (runtimes/llama_common.gpu_layers); n_ctx None: the model's training
    context, at most N_CTX_CAP."""

    N_CTX_CAP: ClassVar[int] = 4096

    device: str = "auto"
    dtype: str = "auto"
    n_threads: Optional[int] = None
    n_gpu_layers: Optional[int] = None  # llama.cpp layers to offload; -1 every one
    n_ctx: Optional[int] = None
    torch_forward: TorchForward = TorchForward.AUTO  # what the torch runtime's forward runs (a string is parsed)

    def __post_init__(self):
        object.__setattr__(self, "torch_forward", TorchForward.parse(self.torch_forward))
        if self.device not in DEVICES and not self.device.startswith("cuda:"):
            raise HarnessError(f"--device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.dtype not in DTYPES:
            raise HarnessError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.n_threads is not None:
            at_least("--threads", self.n_threads, 1)

    def resolve_n_ctx(self, n_ctx_train: int) -> int:
        """--n-ctx, else the model's training context capped at N_CTX_CAP."""
        return self.n_ctx or min(n_ctx_train or self.N_CTX_CAP, self.N_CTX_CAP)


@dataclass
class PairSpec:
    """A draft/target pair as paths or Hugging Face ids; GGUF files for llama.cpp runtimes."""

    name: str
    target: Optional[str] = None
    draft: Optional[str] = None
    target_gguf: Optional[str] = None
    draft_gguf: Optional[str] = None
    synthetic: bool = False  # random weights in real shapes (models/synthetic.py): cost only, forced acceptance
    eagle3: Optional[str] = None  # the pair's EAGLE-3 head folder (`--drafter eagle3`), if it has one
    # the llama.cpp quantization type of a target variant (`--target-quant`: target_gguf is the file
    # models/quantize.py made, the name "PAIR@TYPE"); None: the target as given
    target_quant: Optional[str] = None

    @property
    def self_draft(self) -> bool:
        return self.draft == self.target and self.draft_gguf == self.target_gguf

