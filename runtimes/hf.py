"""The `hf` runtime: transformers' own assisted generation, measured with the harness's phases.

What it does: speculative = `target.generate(..., assistant_model=draft)`, with the draft policy
mapped to the assistant's generation_config for the duration of the call (ASSISTANT_CONFIG):
`fixed` = num_assistant_tokens gamma, schedule "constant", assistant_confidence_threshold 0;
`confidence:P` = the same with threshold P (transformers keeps the first token under P as the
round's last draft, where the shared loop drops it); `heuristic` = schedule "heuristic" from
gamma (transformers' schedule has no maximum: a round may draft more than gamma); and
`library-default` = nothing set, what a user who sets nothing gets (transformers >= 4.45: 20
tokens, stopped below 0.4; with scikit-learn installed the threshold also adapts). `--drafter
ngram[:N,K]` = transformers' prompt lookup (`prompt_lookup_num_tokens` K or gamma,
`max_matching_ngram_size` N; it takes the *first* earlier match, left to right, where
runtimes/ngram.py takes the latest), no assistant; its lookup is booked as draft, and at T > 0
it accepts while the target's own sample equals the draft (sample-match). Baseline = the same
`generate` without the assistant. Both use the same sampling settings (greedy, or temperature/top-p/top-k),
the same EOS rule as the `torch` runtime (the tokenizer's EOS, or none with ignore_eos) and
`torch.manual_seed(seed)` before the call. What `generate` computes is not changed: the phases come
from hooks and method wrappers that exist only during one call and are removed afterwards, also
when `generate` raises (runtimes/hf_hooks.py sets and undoes them).

Phases (one phase open at a time, switched at these seams, so nothing is booked twice):

    seam                                               opens        closes
    forward pre-hook, target / assistant               verify/draft the open phase
      (the first pass of each model is on the prompt:  prefill)
    forward hook, target in assisted decoding          sampling     verify
    forward hook, otherwise                            -            prefill/draft/verify
    LogitsProcessorList call (temperature/top-k/top-p) sampling     - (already open: no-op)
    StoppingCriteriaList call                          -            sampling
    target cache crop / update_candidate_strategy      -            sampling (accept/reject done)

So sampling_s holds, for the target, everything from its logits to the accepted tokens: the float32
copy, the logits processors over all gamma+1 positions, the accept/reject (argmax comparison or
`_speculative_sampling`) and the append; for the assistant (and the baseline) the logits processors,
the token choice and the append. Cache crops, mask/position bookkeeping, the assistant's own
`generate` set-up and stopping checks are unaccounted.

Rounds: a speculative round starts when the candidate generator is asked for drafts and ends when
the next round starts (the last one when `generate` returns); drafted = candidates returned,
accepted = the num_matches `update_candidate_strategy` receives, emitted = tokens appended. A baseline
round is one target pass (drafted 0). Differences from the `torch` runtime, all imposed by transformers:
- The target's first pass runs the prompt together with round 1's drafts, the assistant's first pass
  the prompt and its first draft; both are booked as prefill (so round 1 has no verify time, and
  round walls exclude prefill, as in `torch` where prefill precedes round 1).
- transformers cuts a round's accepted drafts at an accepted EOS, so in a final round ended by EOS
  `accepted` counts up to the EOS only (`torch` reports the ratio test's outcome there).
- Embedding matrices of different sizes make transformers switch to universal assisted decoding (a
  different algorithm); this runtime then declines the pair instead of measuring something else.

The baseline asks `generate` for its raw logits (`output_logits`), so its rows carry
target_entropy like every runtime's.

What it does not do: batching, static caches/compilation, candidate generators other than the
assistant and prompt lookup. A missing seam in the installed transformers makes it unavailable (one line naming the
version) rather than report wrong numbers. Checked with transformers 4.56.2 and 5.24.0 at fixed
gamma (the tests passed on both, with the same rounds and phase sequence); the other draft
policies and prompt lookup with 5.24.0.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Optional

import torch

from spec_harness.core.config import LIBRARY_DEFAULT, DrafterSpec, GenerationSettings, PairSpec
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.core.drafters.ngram import NgramSpec
from spec_harness.core.errors import RuntimeUnavailable
from spec_harness.core.records import Generation, Phases, RoundRecord
from spec_harness.core.timing import NS, PhaseTimer, RoundTimes, device_sync
from spec_harness.runtimes.base import Runtime
from spec_harness.runtimes.hf_hooks import Patches, PhaseCursor, TimedCriteria, TimedProcessors
from spec_harness.runtimes.torch_common import HFPair, HFText

# The transforms the other runtimes apply (core/sampling.py); anything else changes the distribution.
SAME_AS_HARNESS = {"TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper"}

NOTES = {  # per mode: what prefill_s holds here, where transformers differs from the torch runtime
    False: {"prefill_s": "the target's first pass, on the whole prompt; it also yields token 1, so round 1 has no verify time"},
    True: {"prefill_s": "the first pass of each model on the prompt; transformers runs the target's together with "
           "round 1's drafts, so prefill includes verifying them and round 1 has no verify time"},
}


def transformers_version() -> str:
    import transformers

    return transformers.__version__


# --- the seams this runtime relies on -------------------------------------------------------------


def missing_seams() -> list[str]:
    """Names of the transformers internals used here that the installed version lacks."""
    from transformers import GenerationConfig
    from transformers.generation import candidate_generator as cg
    from transformers.generation.utils import GenerationMixin

    missing = [f"GenerationMixin.{m}" for m in ("_get_candidate_generator", "_get_logits_processor",
                                                  "_get_stopping_criteria") if not hasattr(GenerationMixin, m)]
    gen_cls = getattr(cg, "AssistedCandidateGenerator", None)
    if gen_cls is None:
        missing.append("AssistedCandidateGenerator")
    else:
        missing += [f"AssistedCandidateGenerator.{m}" for m in ("get_candidates", "update_candidate_strategy")
                    if not hasattr(gen_cls, m)]
    config = GenerationConfig()
    missing += [f"GenerationConfig.{a}" for a in ASSISTANT_CONFIG["fixed"](1, None) if not hasattr(config, a)]
    if not hasattr(cg, "PromptLookupCandidateGenerator"):
        missing.append("PromptLookupCandidateGenerator")
    return missing


def require_seams() -> None:
    missing = missing_seams()
    if missing:
        raise RuntimeUnavailable(
            f"hf runtime: transformers {transformers_version()} lacks {', '.join(missing)}; "
            "install a transformers version in the project's range (>=4.56,<6)"
        )


def _assistant(gamma: int, schedule: str, threshold: float) -> dict:
    return {"num_assistant_tokens": gamma, "num_assistant_tokens_schedule": schedule,
            "assistant_confidence_threshold": threshold}


# draft policy kind -> (gamma, P) -> the assistant's generation_config for one call
ASSISTANT_CONFIG = {
    "fixed": lambda g, p: _assistant(g, "constant", 0.0),
    "confidence": lambda g, p: _assistant(g, "constant", p),
    "heuristic": lambda g, p: _assistant(g, "heuristic", 0.0),
    LIBRARY_DEFAULT: lambda g, p: {},
}


def _unavailable(what: str) -> RuntimeUnavailable:
    return RuntimeUnavailable(f"hf runtime: {what} (transformers {transformers_version()})")


# --- booking one generate call ----------------------------------------------------------------------


class _Probe:
    """The events of one generate call -> phases (through a PhaseCursor) and round records."""

    def __init__(self, sync, speculative: bool, config: Optional[dict] = None, lookup: bool = False):
        self.timer = PhaseTimer(sync)
        self.cursor = PhaseCursor(self.timer)
        self.patches = Patches()
        self.speculative = speculative
        self.config = config or {}  # what the assistant's generation_config is set to ({}: the library's)
        self.lookup = lookup  # prompt lookup: no assistant, the lookup itself is the draft phase
        self.took: dict = {}  # the draft length settings the candidate generator actually took
        self.drafting = False  # inside get_candidates: forward passes are the assistant's
        self.prompted: set[str] = set()  # roles whose first (prompt) pass is done
        self.rounds: list[RoundRecord] = []
        self.counts: Optional[dict] = None  # drafted/accepted/emitted of the open round
        self.generator_seen = False
        self.cache_seen = False
        self.start_len = 0

    # generation and rounds
    def start(self) -> None:
        self.timer.start()

    def finish(self) -> RoundTimes:
        self.cursor.switch(None)
        self._close_round()
        return self.timer.stop()

    def _open_round(self, counts: dict) -> None:
        self.cursor.switch(None)
        self._close_round()
        self.timer.begin_round()
        self.counts = counts

    def _close_round(self) -> None:
        if self.counts is None:
            return
        rt, c, self.counts = self.timer.end_round(), self.counts, None
        self.rounds.append(_record(rt, c["drafted"], c["accepted"], c["emitted"]))

    # model passes
    def _role(self) -> str:
        return "draft" if self.drafting else "target"

    def forward_start(self) -> None:
        role = self._role()
        if not self.speculative:
            self._open_round({"drafted": 0, "accepted": 0, "emitted": 1})  # one target pass, one token
        phase = "prefill" if role not in self.prompted else ("draft" if role == "draft" else "verify")
        self.prompted.add(role)
        self.cursor.switch(phase)

    def forward_end(self, output) -> None:
        if self.speculative and self._role() == "target":
            self.cursor.switch("sampling")  # logits -> accepted tokens starts now
            self._watch_crop(output)
        else:
            self.cursor.switch(None)

    def _watch_crop(self, output) -> None:
        """The target cache's crop (after the accept/reject) ends sampling."""
        if self.cache_seen:
            return
        cache = getattr(output, "cache", None) or getattr(output, "past_key_values", None)
        if cache is not None and hasattr(cache, "crop"):
            self.patches.wrap(cache, "crop", before=lambda *a, **k: self.cursor.switch(None))
        self.cache_seen = True

    # logits processors and stopping criteria
    def timed_processors(self, processors) -> TimedProcessors:
        """Checked for the target only: the assistant gets the target's, plus an inert minimum length."""
        return TimedProcessors(processors if self.drafting else _check_processors(processors), self.processors_called)

    def processors_called(self) -> None:
        self.cursor.switch("sampling")

    def criteria_called(self) -> None:
        self.cursor.switch(None)

    # the candidate generator
    def attach(self, generator):
        """Wrap the candidate generator transformers chose for this call (after _get_candidate_generator)."""
        from transformers.generation import candidate_generator as cg

        expected = cg.PromptLookupCandidateGenerator if self.lookup else cg.AssistedCandidateGenerator
        if type(generator) is not expected:
            raise _unavailable(f"transformers chose {type(generator).__name__}, not {expected.__name__}")
        if self.lookup:
            self.took = {"num_output_tokens": generator.num_output_tokens,
                         "max_matching_ngram_size": generator.max_matching_ngram_size}
        else:
            config = getattr(generator, "assistant_generation_config", None) or generator.assistant_model.generation_config
            self.took = {"num_assistant_tokens": generator.num_assistant_tokens,
                         "num_assistant_tokens_schedule": config.num_assistant_tokens_schedule,
                         "assistant_confidence_threshold": generator.assistant_confidence_threshold}
            wrong = {k: self.took[k] for k, v in self.config.items() if self.took[k] != v}
            if wrong:
                raise _unavailable(f"the assistant did not take the draft settings {self.config} (got {wrong})")
        self.generator_seen = True
        self.patches.wrap(generator, "get_candidates", before=self.candidates_start, after=self.candidates_end)
        self.patches.wrap(generator, "update_candidate_strategy", before=self.round_outcome)
        return generator

    def candidates_start(self, input_ids, *args, **kwargs) -> None:
        self._open_round({"drafted": 0, "accepted": 0, "emitted": 0})
        self.start_len = input_ids.shape[-1]  # input_ids [1, S]
        self.drafting = True
        if self.lookup:
            self.cursor.switch("draft")  # no model runs: the lookup is the draft

    def candidates_end(self, result):
        self.drafting = False
        self.cursor.switch(None)
        candidate_ids = result[0]  # [1, S + drafted]
        self.counts["drafted"] = candidate_ids.shape[-1] - self.start_len
        return result

    def round_outcome(self, input_ids, scores, num_matches) -> None:
        self.cursor.switch(None)
        self.counts["accepted"] = int(num_matches)
        self.counts["emitted"] = input_ids.shape[-1] - self.start_len  # input_ids [1, S + emitted]


def _record(rt: RoundTimes, drafted: int, accepted: int, emitted: int) -> RoundRecord:
    """A round's record; its wall leaves out the prefill transformers runs inside round 1."""
    sec = rt.seconds()
    sec["wall_s"] = (rt.wall_ns - rt.ns["prefill"]) * NS
    return RoundRecord(drafted=drafted, accepted=accepted, emitted=emitted, **sec)


def _check_processors(processors):
    """Refuse logits processors the other runtimes do not apply (e.g. from a model's generation_config)."""
    extra = sorted({type(p).__name__ for p in processors} - SAME_AS_HARNESS)
    if extra:
        raise _unavailable(f"the model's generation_config adds {', '.join(extra)}, which the other runtimes do not apply")
    return processors


@contextmanager
def _instrumented(probe: _Probe, target, draft=None):
    """Hooks and wrappers on target (and draft) for one generate call; all removed on exit."""
    p = probe.patches
    try:
        for m in {id(m): m for m in (target, draft) if m is not None}.values():  # once with --draft self
            p.handle(m.register_forward_pre_hook(lambda mod, args: probe.forward_start()))
            p.handle(m.register_forward_hook(lambda mod, args, out: probe.forward_end(out)))
            p.wrap(m, "_get_logits_processor", after=probe.timed_processors)
            p.wrap(m, "_get_stopping_criteria", after=lambda sc: TimedCriteria(sc, probe.criteria_called))
        if draft is not None:
            for k, v in probe.config.items():
                p.set(draft.generation_config, k, v)
        if probe.speculative:
            p.wrap(target, "_get_candidate_generator", after=probe.attach)
        yield
    finally:
        p.undo()


# --- the runtime ------------------------------------------------------------------------------------


class HFRuntime(HFText, Runtime):
    name = "hf"

    def load(self, pair: PairSpec) -> None:
        require_seams()
        self.hf = HFPair(pair, self.settings)
        self.target, self.draft = self.hf.target, self.hf.draft
        rows = (self.target.config.vocab_size, self.draft.config.vocab_size)
        if rows[0] != rows[1]:
            raise RuntimeUnavailable(
                f"hf runtime: target has {rows[0]} embedding rows, draft {rows[1]}; transformers would switch to "
                "universal assisted decoding (a different algorithm), so this pair is not measured here"
            )
        self.eos_id = self.tokenizer.eos_token_id  # the stop rule of the torch runtime
        self.sync = device_sync(self.hf.device)

    def generate_baseline(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        return self._generate(prompt_ids, gen, speculative=False)

    def generate_speculative(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        return self._generate(prompt_ids, gen, speculative=True)

    def generate_kwargs(self, gen: GenerationSettings) -> dict:
        """generate() settings equal to the other runtimes': neutral values override a model's generation_config."""
        s = gen.sampling
        eos = self.eos_id
        kw = dict(
            max_new_tokens=gen.max_new_tokens,
            do_sample=not s.greedy,
            # [] = no stop token. Not min_new_tokens: that masks EOS out of the distribution, while the
            # other runtimes may emit EOS with ignore_eos and simply go on.
            eos_token_id=[] if gen.ignore_eos or eos is None else [eos],
            pad_token_id=self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (eos or 0),
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
        )
        if not s.greedy:
            kw.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k)  # top_k 0 = off, as here
        return kw

    def _generate(self, prompt_ids: list[int], gen: GenerationSettings, speculative: bool) -> Generation:
        d, policy = gen.drafter, gen.draft_policy
        lookup = speculative and isinstance(d, NgramSpec)
        probe = _Probe(self.sync, speculative, None if lookup else ASSISTANT_CONFIG[policy.kind](gen.gamma, policy.p), lookup)
        x = torch.tensor([prompt_ids], dtype=torch.long, device=self.target.device)  # [1, S]
        kw = dict(attention_mask=torch.ones_like(x), **self.generate_kwargs(gen))
        if lookup:
            kw.update(prompt_lookup_num_tokens=d.k or gen.gamma, max_matching_ngram_size=d.max_ngram)
        elif speculative:
            kw["assistant_model"] = self.draft
        else:  # the raw logits of every step, for target_entropy (generate copies each step's row anyway)
            kw.update(output_logits=True, return_dict_in_generate=True)
        torch.manual_seed(gen.seed)
        with _instrumented(probe, self.target, self.draft if speculative and not lookup else None):
            probe.start()
            try:
                out = self.target.generate(x, **kw)
            finally:
                total = probe.finish()
        if speculative and not probe.generator_seen:
            raise _unavailable("generate() never asked a candidate generator for drafts")
        seqs = out if speculative else out.sequences  # [1, S + new]
        token_ids = seqs[0, len(prompt_ids):].tolist()
        rounds = _reconcile(probe.rounds, len(token_ids))
        g = Generation(token_ids=token_ids, phases=Phases.timed(total), rounds=rounds, notes=dict(NOTES[speculative]))
        if speculative:
            g.extra["draft_settings"] = probe.took
            g.draft_max = probe.took.get("num_assistant_tokens", probe.took.get("num_output_tokens"))
            if lookup:
                g.notes["draft_s"] = "transformers' prompt lookup (PromptLookupCandidateGenerator.get_candidates)"
        else:
            steps = torch.cat(out.logits)[: len(token_ids), : len(self.tokenizer)]  # [new, V]
            g.keep_steps(steps)
        return g

    def reference(self):
        """transformers' own forward of the target (runtimes/pytorch.py's HFForward), as generate runs it."""
        from spec_harness.runtimes.pytorch import TorchKV

        if getattr(self, "_reference", None) is None:
            self._reference = TorchKV(self.target, len(self.tokenizer), lean=False, sync=self.sync)
        return self._reference

    drafters = (DraftModelSpec, NgramSpec)
    policies = ("fixed", "confidence", "heuristic", LIBRARY_DEFAULT)
    confidence_keeps_stop = True

    def supports(self, gen: GenerationSettings) -> Optional[str]:
        why = super().supports(gen)
        if why:
            return why
        if isinstance(gen.drafter, NgramSpec) and gen.draft_policy.kind != "fixed":
            return (f"transformers' prompt lookup drafts a fixed prompt_lookup_num_tokens (it has no default, no "
                    f"confidence and no schedule): --draft-policy {gen.draft_policy} does not apply")
        return None

    def verify_rule(self, gen) -> str:
        """Prompt lookup has no draft distribution: transformers then accepts while the target's
        own sample equals the draft. The draft model's rounds use the ratio test."""
        rule = super().verify_rule(gen)
        return "sample-match" if rule == "leviathan" and isinstance(gen.drafter, NgramSpec) else rule

    @classmethod
    def library_command(cls, pair: PairSpec, drafter: Optional[DrafterSpec], gamma: Optional[int],
                        p_min: Optional[float] = None) -> Optional[str]:
        if drafter is None:
            return "model.generate(**inputs, do_sample=False)"
        if isinstance(drafter, NgramSpec):
            return (f"model.generate(**inputs, prompt_lookup_num_tokens={gamma}, "
                    f"max_matching_ngram_size={drafter.max_ngram})")
        return (f"model.generate(**inputs, assistant_model=AutoModelForCausalLM.from_pretrained({pair.draft!r}), "
                f"num_assistant_tokens={gamma}, num_assistant_tokens_schedule='constant', "
                f"assistant_confidence_threshold={p_min or 0:g})")

    def describe(self) -> dict:
        return {**self.hf.describe(),
                "draft_length": "per --draft-policy (runtimes/hf.py ASSISTANT_CONFIG); the rows' extra.draft_settings "
                                "hold what the candidate generator took"}

    def close(self) -> None:
        device = self.hf.device if getattr(self, "hf", None) else ""
        self.hf = self.target = self.draft = self._reference = None
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def _reconcile(rounds: list[RoundRecord], new_tokens: int) -> list[RoundRecord]:
    """Rounds whose tokens transformers dropped afterwards (a deferred stop check on MPS runs one
    extra pass) emit nothing; if the rounds still do not add up to the output, refuse the numbers."""
    left = new_tokens
    for r in rounds:
        r.emitted = min(r.emitted, left)
        left -= r.emitted
    if left:
        raise _unavailable(f"rounds account for {new_tokens - left} of {new_tokens} generated tokens")
    return rounds
