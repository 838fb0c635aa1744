"""The `mlx` runtime: mlx-lm's own speculative decoding (Apple's MLX), as Mac users run it, measured
with the harness's phases.

What it does: speculative = `mlx_lm.stream_generate(target, tokenizer, prompt, draft_model=draft,
num_draft_tokens=gamma, sampler=make_sampler(...))`, baseline = the same call without the draft,
both over the models `mlx_lm.load()` reads from the pair's Hugging Face folders (a GGUF file's
converted float32 folder, models/loading.py `model_folder`), with the RoPE base that transformers 5
writes where mlx-lm 0.32 does not look (`rope_config`). Nothing of mlx-lm's loop is replaced:
the two models are handed to it inside a `_Pass` proxy (a call is one pass; every other attribute
is the model's) and the sampler inside a timed wrapper, both of this call only.

mlx-lm's rule (mlx_lm/generate.py, speculative_generate_step, checked with mlx-lm 0.32.2 and mlx
0.32.4): a round drafts num_draft = min(tokens left, gamma) tokens one draft pass each, runs the
target once over [newest token + drafts], samples every one of the num_draft + 1 positions with
the same sampler and accepts while the target's token equals the draft's. At temperature 0 that is
greedy-match; above it the target's own sample must equal the draft (`sample-match`, as llama.cpp's
loops): exact in distribution (every emitted token is the target's sample), but not Leviathan's
ratio test, so its acceptance is lower (sum p q rather than sum min(p, q)). A round may draft up to
the last token (no bonus then), where the shared loop stops one earlier. `library-default` passes
no num_draft_tokens: the function's own default (read from its signature; 2 in 0.32.2, the
`mlx_lm.generate` command line's is 3). mlx-lm has no confidence stopping, no schedule and no
prompt lookup in this loop: those settings are "skipped" rows.

Sampling maps to make_sampler(temperature, top_p, top_k) (min_p 0, no logits processors); mlx-lm
filters top-p over the whole untempered distribution, then top-k, then divides by the
temperature, where core/sampling.py applies temperature, top-k, then top-p: the same distribution
unless top_p < 1 with a temperature other than 1 or a top-k (the row's notes say so). Stop rule: the
tokenizer's EOS, as the `torch` runtime (mlx-lm's own set adds the config's eos ids), none with
ignore_eos; the EOS is the last token. `mx.random.seed(seed)` before each call.

How it is measured. MLX is lazy: a model call only builds a graph, the work happens at mx.eval
(or async_eval, .item(), .tolist()). So each phase ends with an mx.eval of what it computed, the
synchronization point that closes it (as torch.cuda.synchronize does for the other runtimes):

    seam                            phase      closed by
    _Pass call, prompt[:-1] chunks  prefill    mx.eval of the cache state (what mlx-lm's _prefill
                                               evaluates; the prompt's logits are never computed)
    _Pass call, draft model         draft      mx.eval of its logits
    _Pass call, target              verify     mx.eval of its logits
    sampler call                    sampling   mx.eval of the tokens and the log-probabilities

mlx-lm's own eval/async_eval calls then find their arrays computed. Everything else is unaccounted:
graph building outside the model calls, cache trims, .tolist(), the accept comparisons (plain
Python on token lists), stream_generate's detokenizer and responses. Evaluating phase by phase
removes the overlap mlx-lm gets from async_eval (the next graph built while the last one
computes), so the instrumented wall is an upper bound of the library's own; `harness bench`'s
instrumentation figure runs with timing off, where no mx.eval of ours is called.

Rounds: drafted = the draft passes of a round (instrumented: mlx-lm does not report it); accepted =
the round's tokens with `from_draft` true (what mlx-lm reports per token), checked after the clock
against the drafts its sampler returned (the leading drafts equal to the tokens emitted: a
disagreement is an error, not a row); emitted = tokens yielded. A speculative round starts at its
first draft pass and ends where the next one starts (its tokens are yielded in between). At an
accepted EOS mlx-lm stops, so `accepted` counts up to the EOS. A baseline round is one target pass:
mlx-lm's plain loop (generate_step) computes each token's successor before it yields the token, so
N tokens take N + 1 target passes and the last round emits nothing (real work: on Metal
stream_generate waits for it before it returns). Baseline rows carry target_entropy from the
log-probabilities each response holds (converted after the clock stops).

Devices: --device auto is MLX's default device (the Metal GPU on Apple Silicon, the CPU on Linux's
`mlx[cpu]`), cpu or mps (Metal) choose one, cuda is a skipped row; --dtype auto is float32 on the
CPU and float16 on the GPU, as in the `torch` runtime. MLX's CPU threads are its own (--threads
does not apply). On Linux's CPU backend the rows are a correctness check, not a speed reference.
What it does not do: batching, prompt caches across requests, quantized KV caches, mlx-lm's server.
The proxies hide the model from mlx-lm's wired-memory warning on Metal (it sums the bytes of the
object it is given), nothing else.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

from spec_harness.core import timing
from spec_harness.core.config import LIBRARY_DEFAULT, DrafterSpec, GenerationSettings, PairSpec
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.core.errors import RuntimeUnavailable
from spec_harness.core.records import Generation, Phases, RoundRecord
from spec_harness.core.timing import PhaseTimer, RoundTimes
from spec_harness.runtimes.base import Runtime, TokenizerText
from spec_harness.runtimes.loop import Model

INSTALL = "install with pip install -e '.[mlx]'"

try:
    import mlx.core as mx
    import mlx_lm
    from mlx_lm.generate import generation_stream, speculative_generate_step
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache
    from mlx_lm.sample_utils import make_sampler
except (ImportError, OSError) as e:  # not installed, or an MLX build without a backend for this machine
    raise RuntimeUnavailable(f"{INSTALL} (mlx runtime: {e}; MLX runs on Apple Silicon and on Linux)") from None


def library_gamma() -> int:
    """What mlx-lm drafts per round when a user sets nothing: speculative_generate_step's default."""
    return inspect.signature(speculative_generate_step).parameters["num_draft_tokens"].default


# --- one generation's events -------------------------------------------------------------------------


@dataclass
class _Round:
    drafted: int = 0
    drafts: list = field(default_factory=list)  # the draft sampler's outputs, mx arrays [1]
    tokens: list[int] = field(default_factory=list)  # what mlx-lm yielded in this round
    flags: list[bool] = field(default_factory=list)  # their from_draft
    times: Optional[RoundTimes] = None


class _Probe:
    """The passes, sampler calls and tokens of one stream_generate call -> phases and rounds."""

    def __init__(self, prompt_len: int, speculative: bool):
        self.timer = PhaseTimer()  # no sync function: each phase closes with an mx.eval of its own
        self.timed = timing.ENABLED  # off (harness bench): no clock, and no mx.eval of ours
        self.prompt_len, self.speculative = prompt_len, speculative
        self.fed = {"target": 0, "draft": 0}  # tokens each model has been given
        self.passes = {"target": 0, "draft": 0}
        self.rounds: list[_Round] = []
        self.verified = True  # the last pass was the target's: the next pass opens a round
        self.role: Optional[str] = None  # the model whose pass the next sampler call follows
        self.tokens: list[int] = []
        self.steps: list = []  # baseline: each response's log-probabilities (mx arrays [V])

    def start(self) -> None:
        self.timer.start()

    def finish(self) -> RoundTimes:
        self._close_round()
        return self.timer.stop()

    def _close_round(self) -> None:
        if self.rounds and self.rounds[-1].times is None:
            self.rounds[-1].times = self.timer.end_round()

    def _open_round(self) -> None:
        self._close_round()
        self.timer.begin_round()
        self.rounds.append(_Round())

    def pass_phase(self, role: str, n_tokens: int) -> str:
        """A model pass over n_tokens starts -> its phase; the first pass after a verify opens a round."""
        fed, self.fed[role] = self.fed[role], self.fed[role] + n_tokens
        self.passes[role] += 1
        self.role = role
        if fed < self.prompt_len - 1:  # mlx-lm feeds prompt[:-1] first (in chunks), then rounds start
            return "prefill"
        if self.verified:
            self._open_round()
        self.verified = role == "target"
        if role == "draft":
            self.rounds[-1].drafted += 1
            return "draft"
        return "verify"

    def sampler(self, base):
        """mlx-lm's sampler, booked as sampling and evaluated before it returns."""

        def sample(logprobs):
            self.timer.begin("sampling")
            y = base(logprobs)
            if self.timed:
                mx.eval(y, logprobs)
            self.timer.end()
            if self.role == "draft" and self.rounds:
                self.rounds[-1].drafts.append(y)
            return y

        return sample

    def token_out(self, token: int, from_draft: bool, logprobs) -> None:
        self.tokens.append(token)
        if self.speculative:
            r = self.rounds[-1]  # the round whose verify pass produced it (mlx-lm yields before drafting on)
            r.tokens.append(token)
            r.flags.append(bool(from_draft))
        else:
            self.steps.append(logprobs)  # a reference: converted after the clock stops

    def records(self) -> list[RoundRecord]:
        """Round records (after the clock): accepted from from_draft, checked against the drafts."""
        out = []
        for i, r in enumerate(self.rounds):
            if self.speculative:
                accepted = _accepted(i, r)
                emitted = len(r.tokens)
            else:
                accepted, emitted = 0, int(i < len(self.tokens))  # the look-ahead pass emits nothing
            out.append(RoundRecord.timed(r.times, r.drafted, accepted, emitted))
        if sum(rec.emitted for rec in out) != len(self.tokens):
            raise RuntimeError(f"mlx-lm {mlx_lm.__version__}: rounds account for {sum(rec.emitted for rec in out)} "
                               f"of {len(self.tokens)} tokens")
        return out


def _accepted(i: int, r: _Round) -> int:
    """The round's from_draft count; it must be the leading flags and the drafts equal to the tokens."""
    n = sum(r.flags)
    drafts = [int(d.item()) for d in r.drafts]
    leading = 0
    while leading < min(len(drafts), len(r.tokens)) and drafts[leading] == r.tokens[leading]:
        leading += 1
    if r.flags != [True] * n + [False] * (len(r.flags) - n) or n != leading or n > r.drafted:
        raise RuntimeError(f"mlx-lm {mlx_lm.__version__}: round {i}'s from_draft flags {r.flags} disagree with its "
                           f"drafts {drafts} and tokens {r.tokens}")
    return n


class _Pass:
    """A model as stream_generate sees it: a call is one pass, booked to its phase and evaluated
    before it returns; every other attribute is the model's."""

    def __init__(self, model, role: str, probe: _Probe):
        self.model, self.role, self.probe = model, role, probe

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, inputs, cache=None, **kwargs):
        probe = self.probe
        phase = probe.pass_phase(self.role, inputs.shape[-1])  # inputs [1, n]
        probe.timer.begin(phase)
        out = self.model(inputs, cache=cache, **kwargs)
        if probe.timed:
            mx.eval([c.state for c in cache] if phase == "prefill" and cache is not None else out)
        probe.timer.end()
        return out


# --- the target as a loop.Model, for mismatch evidence ------------------------------------------------


class MlxKV(Model):
    """mlx-lm's forward of a model with its own KV cache, logits as torch tensors (runtimes/evidence.py)."""

    def __init__(self, model, vocab: int, stream):
        self.model, self.vocab, self.stream = model, vocab, stream
        self.reset()

    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        with mx.stream(self.stream):
            logits = self.model(mx.array([ids]), cache=self.cache)[0, -n_logits:, : self.vocab].astype(mx.float32)
            mx.eval(logits)
        return torch.from_numpy(np.array(logits))  # [n_logits, V]

    def crop(self, length: int) -> None:
        trim_prompt_cache(self.cache, len(self) - length)

    def reset(self) -> None:
        self.cache = make_prompt_cache(self.model)

    def __len__(self) -> int:
        return self.cache[0].offset


# --- the runtime ---------------------------------------------------------------------------------------


def rope_config(folder: str) -> dict:
    """Config keys mlx-lm needs beside a folder's config.json. transformers 5 saves rope_theta (and
    a scaling) inside `rope_parameters`, which mlx-lm 0.32's Llama-family models do not read: they
    would run RoPE at their default base 10000, another model (the default pair's is 100000). This
    gives them the pre-5 keys, rope_theta and rope_scaling, from it."""
    import json
    from pathlib import Path

    path = Path(folder) / "config.json"
    if not path.is_file():  # a Hub id: mlx-lm reads it as it is
        return {}
    cfg = json.loads(path.read_text())
    rope = cfg.get("rope_parameters")
    if "rope_theta" in cfg or not isinstance(rope, dict) or "rope_theta" not in rope:
        return {}
    scaled = rope.get("rope_type", "default") != "default"
    return {"rope_theta": rope["rope_theta"], "rope_scaling": dict(rope) if scaled else None}


def _device(name: str):
    """--device -> the MLX device generations run on; RuntimeUnavailable where MLX has none."""
    metal = mx.metal.is_available()
    if name == "auto":
        return mx.default_device()
    if name == "cpu":
        return mx.Device(mx.cpu)
    if name == "mps" and metal:
        return mx.Device(mx.gpu)
    where = "Apple's Metal GPU (--device mps) or the CPU" if metal else "the CPU here (no Metal GPU)"
    raise RuntimeUnavailable(f"mlx runtime: --device {name}: MLX runs on {where}")


def _dtype(name: str, device):
    if name == "auto":
        return mx.float32 if device.type == mx.cpu else mx.float16
    return getattr(mx, name)


class MlxRuntime(TokenizerText, Runtime):
    name = "mlx"
    samples_drafts = True  # mlx-lm draws each draft token with the same sampler as the target
    def load(self, pair: PairSpec) -> None:
        from transformers import AutoConfig

        from spec_harness.models.compat import check_tokenizers
        from spec_harness.models.loading import load_hf_tokenizer, model_folder
        from spec_harness.models.shape import context_length

        self.device = _device(self.settings.device)
        self.stream = generation_stream if self.device == mx.default_device() else mx.new_stream(self.device)
        self.dtype = _dtype(self.settings.dtype, self.device)
        folders = (model_folder(pair.target, "target"), model_folder(pair.draft, "draft"))
        self.tokenizer = load_hf_tokenizer(folders[0], "target")  # encode/decode, the same ids as torch and hf
        if not pair.self_draft:
            check_tokenizers(self.tokenizer, load_hf_tokenizer(folders[1], "draft"))
        # wrapper: mlx-lm's TokenizerWrapper (its detokenizer)
        self.target, self.wrapper = mlx_lm.load(folders[0], model_config=rope_config(folders[0]))
        self.draft = self.target if pair.self_draft else mlx_lm.load(folders[1], model_config=rope_config(folders[1]))[0]
        for m in {id(m): m for m in (self.target, self.draft)}.values():
            m.set_dtype(self.dtype)
        self.vocab = len(self.tokenizer)
        self.eos_id = self.tokenizer.eos_token_id  # the stop rule of the torch runtime
        self.context = int(context_length(AutoConfig.from_pretrained(folders[0])) or 0) or 1 << 30
        self.folders = folders

    def generate_baseline(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        return self._generate(prompt_ids, gen, speculative=False)

    def generate_speculative(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        return self._generate(prompt_ids, gen, speculative=True)

    def make_sampler(self, gen: GenerationSettings):
        """make_sampler with the harness's settings (top-k off when it keeps the whole vocabulary)."""
        s = gen.sampling
        if s.greedy:
            return make_sampler(0.0)
        top_k = s.top_k if s.top_k and s.top_k < self.vocab else 0
        return make_sampler(s.temperature, top_p=s.top_p if s.top_p < 1 else 0.0, top_k=top_k)

    def _generate(self, prompt: list[int], gen: GenerationSettings, speculative: bool) -> Generation:
        probe = _Probe(len(prompt), speculative)
        kw = dict(max_tokens=gen.max_new_tokens, sampler=probe.sampler(self.make_sampler(gen)), stream=self.stream)
        draft_max = None
        if speculative:
            kw["draft_model"] = _Pass(self.draft, "draft", probe)
            if gen.draft_policy.library_default:
                draft_max = library_gamma()
            else:
                kw["num_draft_tokens"] = draft_max = gen.gamma
        self.wrapper.eos_token_ids = set() if gen.ignore_eos or self.eos_id is None else {self.eos_id}
        target = _Pass(self.target, "target", probe)
        mx.random.seed(gen.seed)
        probe.start()
        try:
            for r in mlx_lm.stream_generate(target, self.wrapper, prompt, **kw):
                probe.token_out(r.token, r.from_draft, r.logprobs)
        finally:
            total = probe.finish()
        g = Generation(token_ids=probe.tokens, phases=Phases.timed(total), rounds=probe.records(),
                       notes=self._notes(gen, speculative), extra={"passes": dict(probe.passes)})
        if speculative:
            g.draft_max = draft_max
        else:
            steps = np.stack([np.array(lp.astype(mx.float32)) for lp in probe.steps])  # [new, V] log-probabilities
            g.keep_steps(torch.from_numpy(steps[:, : self.vocab]))  # the entropy and margins of the logits
        return g

    def _notes(self, gen: GenerationSettings, speculative: bool) -> dict:
        s = gen.sampling
        notes = {
            "prefill_s": "each model's passes over prompt[:-1], chunked as mlx-lm does, closed by mx.eval of its cache",
            "verify_s": "the target's passes in mlx-lm's loop, each closed by mx.eval of its logits",
            "sampling_s": "mlx-lm's sampler on each pass's log-probabilities (log-softmax, filters, argmax or "
                          "categorical), closed by mx.eval; the accept comparisons are Python, unaccounted",
            "unaccounted_s": "mlx-lm's loop between passes (graph building, cache trims, .tolist(), the detokenizer); "
                             "each phase is evaluated before the next, so async_eval's overlap is gone",
        }
        if speculative:
            notes["draft_s"] = "the draft model's passes (one per drafted token), each closed by mx.eval of its logits"
            notes["accepted"] = ("mlx-lm's from_draft per token" if s.greedy else
                                 "mlx-lm's from_draft per token: the target's own sample equals the draft (not the ratio test)")
        else:
            notes["rounds"] = "mlx-lm computes each token's successor before yielding it: the last pass's round emits nothing"
        top_k = bool(s.top_k and s.top_k < self.vocab)
        if not s.greedy and s.top_p < 1 and (s.temperature != 1 or top_k):
            notes["distribution"] = "mlx-lm applies top-p before top-k and temperature; core/sampling.py after them"
        return notes

    drafters = (DraftModelSpec,)  # stream_generate's draft_model, num_draft_tokens (its default without one)
    policies = ("fixed", LIBRARY_DEFAULT)

    def verify_rule(self, gen: GenerationSettings) -> str:
        return "greedy-match" if gen.sampling.greedy else "sample-match"

    def reference(self) -> MlxKV:
        """mlx-lm's forward of the target with a cache of its own (the same weights and kernels)."""
        if getattr(self, "_reference", None) is None:
            self._reference = MlxKV(self.target, self.vocab, self.stream)
        return self._reference

    @classmethod
    def library_command(cls, pair: PairSpec, drafter: Optional[DrafterSpec], gamma: Optional[int],
                        p_min: Optional[float] = None) -> Optional[str]:
        cmd = f"mlx_lm.generate --model {pair.target} --prompt PROMPT"
        return cmd if drafter is None else f"{cmd} --draft-model {pair.draft} --num-draft-tokens {gamma}"

    def describe(self) -> dict:
        from spec_harness.models.shape import pair_sizes, sizes_from_folder

        return {"device": "metal" if self.device.type == mx.gpu else "cpu", "dtype": str(self.dtype).replace("mlx.core.", ""),
                "mlx": mx.__version__, "mlx_lm": mlx_lm.__version__, "model_folders": list(self.folders),
                "draft_length": f"num_draft_tokens gamma; library-default: mlx-lm's own {library_gamma()}",
                "model_sizes": pair_sizes(lambda f: sizes_from_folder(f, str(self.dtype).replace("mlx.core.", "")), *self.folders)}

    def close(self) -> None:
        self.target = self.draft = self._reference = None
