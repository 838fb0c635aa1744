"""The runtime interface and its result types.

A runtime loads a draft/target pair, tokenizes, and generates either target-only ("baseline")
or speculatively, reporting the phases of DESIGN.md and one record per round. It does not
compute rates (harness/metrics.py), write results (harness/runner.py) or choose prompts.

Rounds: in a speculative generation, one round = draft up to gamma tokens, verify them in one
target pass, accept/reject. In a baseline generation, one round = one target step (drafted 0).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Optional

from harness.config import GenerationSettings, RuntimeSettings


@dataclass
class PairSpec:
    """A draft/target pair as paths or Hugging Face ids; GGUF files for llama.cpp runtimes."""

    name: str
    target: Optional[str] = None
    draft: Optional[str] = None
    target_gguf: Optional[str] = None
    draft_gguf: Optional[str] = None

    @property
    def self_draft(self) -> bool:
        return (self.draft == self.target and self.draft_gguf == self.target_gguf)


@dataclass
class RoundRecord:
    """One round. accepted = ratio-test outcome; emitted = tokens that reached the output."""

    drafted: int
    accepted: int
    emitted: int
    draft_s: Optional[float]
    verify_s: Optional[float]
    sampling_s: Optional[float]
    unaccounted_s: Optional[float]
    wall_s: float

    @classmethod
    def timed(cls, times, drafted: int, accepted: int, emitted: int) -> "RoundRecord":
        """From a harness.timing.RoundTimes of the round."""
        return cls(drafted=drafted, accepted=accepted, emitted=emitted, **times.seconds())

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Phases:
    """Seconds per phase for one generation. None = the runtime cannot see it (say why in notes)."""

    wall_s: float
    prefill_s: Optional[float]
    draft_s: Optional[float]
    verify_s: Optional[float]
    sampling_s: Optional[float]
    unaccounted_s: Optional[float]

    @classmethod
    def timed(cls, total) -> "Phases":
        """From the harness.timing.RoundTimes of a whole generation (prefill included)."""
        return cls(prefill_s=total.ns["prefill"] * 1e-9, **total.seconds())

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Generation:
    """What one generate call returns."""

    token_ids: list[int]
    phases: Phases
    rounds: list[RoundRecord]
    target_entropy: Optional[float] = None  # baseline: mean target next-token entropy (nats), T = 1
    notes: dict[str, str] = field(default_factory=dict)  # e.g. {"sampling_s": "inside llama.cpp"}
    extra: dict = field(default_factory=dict)  # runtime-specific numbers (library counters, ...)


class Runtime(ABC):
    """A small interface: load, encode/decode, generate baseline or speculative, close."""

    name: str = "?"

    def __init__(self, settings: RuntimeSettings):
        self.settings = settings

    @abstractmethod
    def load(self, pair: PairSpec) -> None:
        """Load target and draft; raise HarnessError for missing files or mismatched tokenizers."""

    @abstractmethod
    def encode(self, prompt: str) -> list[int]:
        """Prompt text -> token ids the target sees (chat template applied where the model has one)."""

    @abstractmethod
    def decode(self, ids: list[int]) -> str: ...

    @property
    @abstractmethod
    def context_length(self) -> int:
        """Most tokens (prompt + generated) the pair can hold."""

    @abstractmethod
    def generate_baseline(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation: ...

    @abstractmethod
    def generate_speculative(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation: ...

    def describe(self) -> dict:
        """Device, dtype, model files and library versions, for run.json."""
        return {}

    def close(self) -> None:
        """Free models and contexts."""


class HFText:
    """encode/decode/context_length for runtimes over a Hugging Face tokenizer.

    Mix in before Runtime; the runtime sets self.tokenizer and self._ctx in load()."""

    def encode(self, prompt: str) -> list[int]:
        from models.loading import encode_prompt

        return encode_prompt(self.tokenizer, prompt)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    @property
    def context_length(self) -> int:
        return self._ctx
