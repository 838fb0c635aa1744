"""The runtime interface, and the template class of the runtimes that run the shared loop.

A runtime loads a draft/target pair, tokenizes, and generates either target-only ("baseline")
or speculatively, returning a core.records.Generation: the phases of docs/DESIGN.md and one
record per round. It does not compute rates (core/metrics.py), write results (harness/runner.py)
or choose prompts.

LoopRuntime absorbs what every runtime over the shared loop (runtimes/loop.py) would repeat:
its load() sets `target` and `draft` (two loop.Model adapters) and `eos_id`; generation is then
the loop with no drafter (baseline) or with the drafter its drafter kind builds (speculative;
core/drafters/: the draft model, stopping on confidence under `confidence:P`, prompt lookup
(runtimes/ngram.py) or an EAGLE-3 head (runtimes/eagle3.py finds, loads and checks it; a loop
runtime hands it the target's embedding and config), or any kind registered with a `loop`);
every policy but library-default (the loop is no library's).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from spec_harness.core.config import LIBRARY_DEFAULT, DrafterSpec, GenerationSettings, PairSpec, RuntimeSettings
from spec_harness.core import drafters as drafter_kinds, sampling
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.core.records import Generation
from spec_harness.models.chat import PromptInput
from spec_harness.runtimes import evidence
from spec_harness.runtimes.loop import Drafter, Loop, Model

if TYPE_CHECKING:
    from spec_harness.runtimes.server import ServerSetting


POLICY_NAMES = {"fixed": "fixed draft length", "confidence": "confidence stopping",
                "heuristic": "heuristic draft-length schedule", LIBRARY_DEFAULT: "library default"}


class Runtime(ABC):
    """A small interface: load, encode/decode, generate baseline or speculative, close."""

    name: str = "?"
    # True for a runtime whose settings each need a process of their own (a server started for a
    # draft setting): the runner then measures one setting's generations together (start_setting).
    one_setting_at_a_time: bool = False
    starts_together: int = 1  # such a runtime's processes that start side by side (start_setting)
    # True for a runtime whose servers take long to start: the runner may load it at the start of a
    # run and have it launch its first servers then (start_early), pausing them (hold) while any
    # other runtime measures and resuming them (release) while the others load.
    starts_early: bool = False
    # What the runtime can run: the drafter kinds (core/drafters/ classes) its file maps to its own
    # machinery (runs_drafter) and the policies by DraftPolicy.kind. supports() refuses the rest, and
    # runtimes.able() names the runtimes that can, for its texts, the command line's `harness
    # runtimes` and the bench's figures.
    drafters: tuple[type[DrafterSpec], ...] = (DraftModelSpec,)
    policies: tuple[str, ...] = ("fixed",)
    forces: bool = False  # forced acceptance (harness calibrate)
    serves_concurrently: bool = False  # --concurrency above 1 (a server runtime)
    # library_command takes up_to: speculation while at most up_to sequences run and not above, a
    # switch by load in the library's own terms (harness tune --request-rate prints it)
    switches_by_load: bool = False
    # True for a runtime that times its own engine's batched steps (`batch_pass_s`, `decode_step_s`):
    # under load the runner asks it for the batched cost model's prices (harness/under_load.py)
    prices_batches: bool = False
    # True where a sampled draft token is drawn from the draft's distribution rather than taken as its
    # argmax, for the `sample-match` rule's expected acceptance (runtimes/expected.py)
    samples_drafts: bool = False
    # The forwards a runtime can run its models through (--torch-forward; torch: kernels, eager):
    # the runner measures each one asked for as a runtime of its own, "NAME [FORWARD]".
    forwards: tuple[str, ...] = ()
    # True for a runtime that runs the target from its GGUF file (llama.cpp's): the runner measures it
    # once per target quantization (--target-quant, models/quantize.py); the others read the float
    # weights and run each pair once, as given
    reads_target_gguf: bool = False
    # the draft's candidates its confidence stopping normalizes over (llama.cpp's draft sampler: its
    # top 10); 0: the whole vocabulary (our loop, transformers)
    confidence_top_k: int = 0
    # True where confidence stopping proposes the token whose probability fell under P as the
    # round's last draft (transformers); False where that token is dropped (our loop, llama.cpp)
    confidence_keeps_stop: bool = False
    # The smaller fixed draft length harness tune's probe measures every drafter at (the larger is
    # --max-gamma): 1, except where a round at gamma 1 costs more than the line through the larger
    # ones puts it (vLLM), so that the line between them is measured where it holds
    tune_low_gamma: int = 1

    def __init__(self, settings: RuntimeSettings, workdir: Optional[Path] = None):
        self.settings = settings
        self.workdir = workdir  # the run folder, for what a runtime keeps beside the results (a server's log)

    @abstractmethod
    def load(self, pair: PairSpec) -> None:
        """Load target and draft; raise HarnessError for missing files or mismatched tokenizers,
        RuntimeUnavailable when this runtime cannot run the pair here."""

    @abstractmethod
    def encode(self, prompt: PromptInput) -> list[int]:
        """Prompt text, or a conversation's chat messages (models/chat.py) -> token ids the target
        sees (chat template applied where the model has one)."""

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

    def start_setting(self, setting: ServerSetting, upcoming: Sequence[ServerSetting] = ()) -> None:
        """Before the runner measures every generation of one setting (runtimes/server.py's
        ServerSetting: the baseline or a speculative one, at a concurrency), when
        `one_setting_at_a_time`: have what it needs running, nothing else taking CPU; `upcoming`
        are the settings it measures next, in order (a server may be started early)."""

    def keep_live(self, settings: Sequence[ServerSetting]) -> bool:
        """When `one_setting_at_a_time`: whether what every one of `settings` needs can run at once,
        kept so, so that the runner takes them in turn prompt by prompt (RunConfig.interleave)."""
        return False

    def start_early(self, setting: ServerSetting, upcoming: Sequence[ServerSetting] = ()) -> None:
        """When `starts_early`: launch what start_setting(setting, upcoming) will need, without waiting for it."""

    def hold(self) -> None:
        """When `starts_early`: take no CPU until release() (another runtime measures)."""

    def release(self) -> None: ...

    def describe(self) -> dict:
        """Device, dtype, model files and library versions, for run.json."""
        return {}

    def verify_rule(self, gen: GenerationSettings) -> str:
        """The acceptance test of this runtime's rounds, a results field, so that alpha_hat is only
        compared between rows of one rule: "greedy-match" at temperature 0 (the draft's token
        equals the target's argmax: every rule is this one there), "leviathan" (min(1, p/q) then
        the residual: Algorithm 1) or "sample-match" (the target samples with its own sampler and
        accepts while its sample equals the draft's token)."""
        return "greedy-match" if gen.sampling.greedy else "leviathan"

    def supports(self, gen: GenerationSettings) -> Optional[str]:
        """None when this runtime can run the draft policy and drafter of `gen`
        (core/config.DRAFT_POLICIES, DRAFTERS), else why not: a "skipped" row says it. Here
        what the class declares (drafters, policies, forces); a runtime adds its own rules."""
        from spec_harness.runtimes import able, listed

        kind, policy = type(gen.drafter), gen.draft_policy.kind
        if gen.forced and not self.forces:
            return (f"{self.name} cannot force acceptance (its library decides each draft; forced acceptance runs in "
                    f"{listed(able('forces'))})")
        if not self.runs_drafter(kind):
            return f"{self.name} has no {kind.title} (--drafter {kind.name} runs in {listed(able('drafters', kind))})"
        if gen.confidence is not None and not kind.has_probabilities:
            return f"--draft-policy {gen.draft_policy} needs a draft's probabilities; {kind.title} has none"
        if policy not in self.policies:
            return (f"{self.name} has no {POLICY_NAMES[policy]} (--draft-policy {gen.draft_policy} runs in "
                    f"{listed(able('policies', policy))})")
        return None

    @classmethod
    def runs_drafter(cls, kind: type[DrafterSpec]) -> bool:
        """Whether this runtime runs drafter kind `kind` (its file maps it to its own machinery)."""
        return kind in cls.drafters

    @classmethod
    def most_sequences(cls, settings: RuntimeSettings, tokens: int) -> Optional[int]:
        """When `serves_concurrently`: before any load, the most sequences of `tokens` tokens each it
        could hold at once with these settings (None: none known before loading)."""
        return None

    @classmethod
    def library_command(cls, pair: PairSpec, drafter: Optional[DrafterSpec], gamma: Optional[int],
                        p_min: Optional[float] = None, up_to: Optional[int] = None) -> Optional[str]:
        """The setting (drafter None: target-only; p_min: confidence stopping; up_to, where
        `switches_by_load`: speculation off above that many running sequences) as a user of this
        runtime's library writes it, ready to paste (harness tune prints it); None where the loop
        is the harness's own."""
        return None

    def reference(self) -> Optional[Model]:
        """The target as a loop.Model with its own cache (same library, weights and kernels), for
        recomputing evidence between generations; None when this runtime has none."""
        return None

    def mismatch_evidence(self, prompt_ids: list[int], base_ids: list[int], spec: Generation) -> Optional[dict]:
        """Why a greedy speculative generation left the baseline's ids (runtimes/evidence.py)."""
        model = self.reference()
        if model is None:
            return None
        with self.generating():
            return evidence.greedy_mismatch(model, prompt_ids, base_ids, spec.token_ids, spec.rounds, self.decode)

    def generating(self) -> AbstractContextManager:
        """Hook: a context every generation runs in (e.g. single-threaded torch sampling)."""
        return nullcontext()

    def close(self) -> None:
        """Free models and contexts."""


class TokenizerText:
    """encode/decode/context_length for runtimes over a Hugging Face tokenizer. Mix in before
    Runtime; the runtime sets self.tokenizer and self.context (most tokens) in load()."""

    def encode(self, prompt: PromptInput) -> list[int]:
        from spec_harness.models.loading import encode_prompt

        return encode_prompt(self.tokenizer, prompt)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    @property
    def context_length(self) -> int:
        return self.context


class LoopRuntime(Runtime):
    """A runtime whose generations run through runtimes/loop.py. load() sets target, draft, eos_id."""

    target: Model
    draft: Model
    eos_id: Optional[int] = None

    def is_eos(self, token: int) -> bool:
        """The stop rule (the tokenizer's EOS; llama.cpp runtimes: any end-of-generation token)."""
        return token == self.eos_id

    pair: Optional[PairSpec] = None  # set by load(): the pair's own EAGLE-3 head is `--drafter eagle3`'s
    head_threads: Optional[int] = None  # torch threads for an EAGLE-3 head's passes (None: the generation's own)

    def drafter(self, gen: GenerationSettings) -> Drafter:
        """Our loop's drafter for gen.drafter: built where its kind says (DrafterSpec.loop)."""
        return drafter_kinds.resolve(type(gen.drafter).loop)(self, gen.drafter, gen)

    policies = ("fixed", "confidence", "heuristic")
    forces = True

    @classmethod
    def runs_drafter(cls, kind: type[DrafterSpec]) -> bool:
        """Every kind that says how our loop builds its drafter."""
        return kind.loop is not None

    def supports(self, gen: GenerationSettings) -> Optional[str]:
        why = super().supports(gen)
        if why:
            return why
        check = type(gen.drafter).loop_check
        return drafter_kinds.resolve(check)(self, gen.drafter) if check else None

    # -- what an EAGLE-3 head reads from the runtime (runtimes/eagle3.py loads and checks it) ----------

    def head_embedding(self):
        """The target's token embedding [V, H] (float32), which an EAGLE-3 head reads its tokens through."""
        raise ValueError(f"{self.name} cannot hand an EAGLE-3 head the target's embedding")

    def target_config(self):
        """The target's Hugging Face config (for checking a head against it); None when unknown."""
        return None

    def reference(self) -> Model:
        return self.target  # between generations its cache is free: the next one resets it

    def generate_baseline(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        self.target.keep_features(())  # the target's own passes, no hidden states kept for a head
        with self.generating():
            return Loop(self.target, None, self.is_eos).generate(prompt_ids, gen)

    def generate_speculative(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        accept = sampling.forced(gen.forced) if gen.forced else sampling.verify
        self.target.keep_features(())
        with self.generating():  # an EAGLE-3 drafter has the target keep its hidden states
            return Loop(self.target, self.drafter(gen), self.is_eos, accept).generate(prompt_ids, gen)
