"""What a run measures (`RunConfig`): its runtimes, pairs, prompts and the grid of settings,
checked before anything runs, and what follows from it alone: the settings of each runtime
(`Setting`: the baseline or a speculative one), its cells (`Cell`: a prompt in one sampling,
length and repeat) and the settings a runtime is handed for one of them (`RunConfig.generation`),
the requests per prompt of a cell under load, how many rows the run has, and run.json's first
content; this machine's limits at the run's threads (`machine_limits`, measured once per
machine); each pair's target variants a run with --target-quant measures (`target_variants`);
whether the prompts fit a loaded runtime's context (`check_fits`).

What it does not own: running it (harness/runner.py), the defaults (core/config.py's dataclasses)
or a runtime's capabilities (its class, runtimes/base.py; `runs_variants` and `runs_forwards` ask it).
"""

from __future__ import annotations

import itertools
from dataclasses import KW_ONLY, asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from spec_harness import runtimes
from spec_harness.core import drafters
from spec_harness.core.config import (Arrivals, DrafterSpec, DraftPolicy, GenerationSettings, PairSpec, RuntimeSettings, SamplingParams,
                         TorchForward, at_least, default_of)
from spec_harness.core.errors import HarnessError, RuntimeUnavailable
from spec_harness.core.results import row_key
from spec_harness.harness.open_load import OpenLoad
from spec_harness.harness.prompts import Prompt
from spec_harness.harness.rows import log, one_line

BASELINE, SPECULATIVE = "baseline", "speculative"  # a generation's mode (a row's `mode`)
LIMITS_DIR = "limits"  # under models.loading.cache_root(): one file per machine key (core/limits.py)


def machine_limits(n_threads: Optional[int], remeasure: bool = False) -> dict:
    """core.limits.machine_limits at the threads a run with --threads `n_threads` uses, cached
    under $HARNESS_CACHE/limits (so every run folder on this machine shares one measurement)."""
    from spec_harness.core import limits
    from spec_harness.models.loading import cache_root

    return limits.machine_limits(limits.threads_of(n_threads), cache_root() / LIMITS_DIR, remeasure)


def limits_or_why(n_threads: Optional[int]) -> dict:
    """machine_limits for run.json; a measurement that fails costs no run: {"unavailable": why}."""
    try:
        return machine_limits(n_threads)
    except (RuntimeError, MemoryError, OSError) as e:
        return {"unavailable": one_line(e)}


@dataclass(frozen=True)
class Setting:
    """What a generation runs beside its cell: the baseline, or a speculative setting's draft
    policy, most drafts per round (None: the library's choice, under library-default), drafter and
    forced acceptance rates (None: the models decide). A policy or drafter given as text is parsed
    here, once (harness tune's, a test's)."""

    mode: str = BASELINE
    policy: DraftPolicy = DraftPolicy()
    gamma: Optional[int] = None
    drafter: DrafterSpec = field(default_factory=drafters.default)
    forced: Optional[tuple[float, ...]] = None

    def __post_init__(self):
        object.__setattr__(self, "policy", DraftPolicy.of(self.policy))
        object.__setattr__(self, "drafter", drafters.of(self.drafter))

    @classmethod
    def drafting(cls, policy, gamma: Optional[int], drafter, forced: Optional[tuple[float, ...]] = None) -> Setting:
        """A speculative setting."""
        return cls(SPECULATIVE, policy, gamma, drafter, forced)

    @property
    def speculative(self) -> bool:
        return self.mode == SPECULATIVE


@dataclass(frozen=True)
class Cell:
    """One request of one prompt in one sampling, length and repeat: what the baseline and each
    speculative setting of a runtime generate once, side by side (its baseline row is the
    speculative rows' reference)."""

    sampling: SamplingParams
    max_new_tokens: int
    prompt: Prompt
    repeat: int


@dataclass(frozen=True)
class Request:
    """One generation a run asks a runtime for: its cell and setting, the settings the runtime is
    handed (their `concurrency` is its load level) and its row's key (core/results.py's row_key)."""

    cell: Cell
    setting: Setting
    gen: GenerationSettings
    key: tuple


@dataclass
class RunConfig:
    runtimes: list[str]
    pairs: list[PairSpec]
    prompts: list[Prompt]
    _: KW_ONLY  # the rest by name
    gammas: list[int] = field(default_factory=lambda: [default_of(GenerationSettings, "gamma")])
    samplings: list[SamplingParams] = field(default_factory=lambda: [SamplingParams()])
    max_new_tokens: list[int] = field(default_factory=lambda: [default_of(GenerationSettings, "max_new_tokens")])
    seed: int = 0
    ignore_eos: bool = False
    # the draft policies, drafters and torch forwards, each parsed once (a string given is parsed in __post_init__)
    draft_policies: list[DraftPolicy] = field(default_factory=lambda: [default_of(GenerationSettings, "draft_policy")])
    drafters: list[DrafterSpec] = field(default_factory=lambda: [default_of(GenerationSettings, "drafter")])
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    repeats: int = 1
    warmup: int = 1
    out: Path = Path("runs/latest")
    resume: bool = False
    forced: Optional[list[tuple]] = None  # forced acceptance rates per setting (harness calibrate); None: the models decide
    concurrencies: list[int] = field(default_factory=lambda: [1])  # client streams at once (--concurrency)
    torch_forwards: list[TorchForward] = field(default_factory=lambda: [default_of(RuntimeSettings, "torch_forward")])
    verbose: bool = False  # a progress line per generation, not per setting
    # llama.cpp quantization types of the target (--target-quant, models/quantize.py): every pair runs
    # once per type on the runtimes that read the target's GGUF (runs_variants), once as given on the
    # others; empty: every pair as given
    target_quants: list[str] = field(default_factory=list)
    # the speculative settings to run, in place of the grid drafters x policies x gammas (harness
    # tune's candidates); None: the whole grid
    only: Optional[list[Setting]] = None
    # speculative settings that one runtime (its registry name) runs after the others (harness
    # tune's probe: a runtime's own extra cells)
    also: dict[str, list[Setting]] = field(default_factory=dict)
    # a runtime that runs one setting at a time (a server per setting) takes each cell's settings in
    # turn, as the in-process runtimes do, where it can keep all their servers live (keep_live): the
    # settings paired prompt by prompt against a machine whose speed drifts (harness tune)
    interleave: bool = False
    # the input lengths the prompts were built to (--input-len, harness/input_len.py); []: as given
    input_lens: list[int] = field(default_factory=list)
    # an open-loop load (--request-rate, harness/open_load.py); its rates empty: none
    open_load: OpenLoad = field(default_factory=OpenLoad)

    def __post_init__(self):
        self._parse()
        at_least("--repeats", self.repeats, 1)
        at_least("--warmup", self.warmup, 0)
        for name, xs in (("prompts", self.prompts), ("--gamma", self.gammas), ("--max-new-tokens", self.max_new_tokens),
                         ("pairs", self.pairs), ("runtimes", self.runtimes), ("sampling settings", self.samplings),
                         ("--draft-policy", self.draft_policies), ("--drafter", self.drafters),
                         ("--concurrency", self.concurrencies), ("--torch-forward", self.torch_forwards)):
            if not xs:
                raise HarnessError(f"nothing to run: {name} is empty")
        if self.forced is None and any(p.synthetic for p in self.pairs):
            raise HarnessError("a synthetic pair has random weights and measures cost only: force the acceptance "
                               "(harness calibrate)")
        for g, n, p, d, f, c in itertools.product(self.gammas, self.max_new_tokens, self.draft_policies, self.drafters,
                                                  self.forced or [None], self.concurrencies):
            # validates the grid up front
            GenerationSettings(gamma=g, max_new_tokens=n, draft_policy=p, drafter=d, forced=f, concurrency=c)
        for x in (self.only or []) + [x for xs in self.also.values() for x in xs]:
            self.generation(self.first_cell, x)
        self._check_loads_fit()
        if any(p.turn > 1 for p in self.prompts) and 1 not in self.concurrencies:
            raise HarnessError("--prompts holds conversations, whose later turns read the runtime's own answers measured "
                               "one request at a time: add 1 to --concurrency")
        if self.target_quants:
            from spec_harness.models.quantize import parse_types

            self.target_quants = parse_types(self.target_quants)

    def _parse(self) -> None:
        """The draft policies, drafters and forwards given as text (harness tune's, a test's) parsed."""
        self.draft_policies = [DraftPolicy.of(p) for p in self.draft_policies]
        self.drafters = [drafters.of(d) for d in self.drafters]
        self.torch_forwards = [TorchForward.parse(f) for f in self.torch_forwards]

    def _check_loads_fit(self) -> None:
        """Each --concurrency N above 1 against what each runtime of the run that serves
        concurrently could hold before any load (its class's most_sequences, runtimes/server.py):
        N sequences of a prompt (one token at least) and the longest --max-new-tokens. The runner
        checks the prompts themselves against the loaded runtime (load_capacity)."""
        loads = self.server_loads
        if not loads:
            return
        tokens, longest = 1 + max(self.max_new_tokens), max(self.max_new_tokens)
        for name in self.runtimes:
            try:
                cls = runtimes.get(name)
            except RuntimeUnavailable:
                continue  # its own skipped row says why
            if not cls.serves_concurrently:
                continue
            most = cls.most_sequences(self.runtime, tokens)
            for n in loads:
                if most is not None and n > most:
                    context = f"--n-ctx {self.runtime.n_ctx}" if self.runtime.n_ctx else \
                        f"its default of at most {RuntimeSettings.N_CTX_CAP} tokens"
                    fit = f"at most {most} do with {context}" if most else f"not one does with {context}"
                    raise HarnessError(f"{self.load_flag(n)}: {n} sequences of at least {tokens} tokens (a prompt and "
                                       f"--max-new-tokens {longest}) do not fit {name}'s context ({fit}); lower "
                                       f"{self.load_flag(n).split()[0]} or raise --n-ctx")

    @property
    def server_loads(self) -> list[int]:
        """The sequences at once the servers are started for under load: each --concurrency N above
        1, and an open-loop load's slots."""
        slots = [self.open_load.slots] if self.open_load.rates and self.open_load.slots > 1 else []
        return sorted({*(n for n in self.concurrencies if n > 1), *slots})

    def load_flag(self, n: int) -> str:
        """The flag that asked for servers of n sequences, as an error names it."""
        default = "" if self.open_load.max_concurrency else ", its default"
        return f"--concurrency {n}" if n in self.concurrencies else \
            f"--max-concurrency {n} (the servers' slots under --request-rate{default})"

    def generation(self, cell: Cell, setting: Setting = Setting(), concurrency: int = 1,
                   arrivals: Optional[Arrivals] = None) -> GenerationSettings:
        """The settings a runtime is handed for `cell` in `setting`, one of `concurrency` client
        streams at once (--concurrency: the one place a generation's load level is set), or one
        request of an open-loop cell with `arrivals` on a server of `concurrency` slots. A setting
        without a gamma (the baseline, library-default) carries the run's first one."""
        return GenerationSettings(sampling=cell.sampling, gamma=setting.gamma or self.gammas[0],
                                  max_new_tokens=cell.max_new_tokens, seed=self.seed + cell.repeat,
                                  ignore_eos=self.ignore_eos, draft_policy=setting.policy, drafter=setting.drafter,
                                  forced=setting.forced, concurrency=concurrency, arrivals=arrivals)

    def request(self, name: str, pair: PairSpec, forward: Optional[str], cell: Cell, setting: Setting,
                concurrency: int = 1, arrivals: Optional[Arrivals] = None) -> Request:
        """The generation of `cell` in `setting` by runtime `name` (its `forward` where it has a
        choice of them) on `pair`, one of `concurrency` client streams at once (or one request of an
        open-loop cell with `arrivals`)."""
        from spec_harness.core.results import rate_value

        gen = self.generation(cell, setting, concurrency, arrivals)
        spec = setting.speculative
        row = {"runtime": name, "pair": pair.name, "mode": setting.mode, "prompt_id": cell.prompt.id, "turn": cell.prompt.turn,
               "input_len": cell.prompt.input_len,
               "repeat": cell.repeat, "gamma": gen.gamma_max if spec else None,
               "draft_policy": str(setting.policy) if spec else None, "drafter": str(setting.drafter) if spec else None,
               "forced_rates": setting.forced, "temperature": cell.sampling.temperature, "top_p": cell.sampling.top_p,
               "top_k": cell.sampling.top_k, "max_new_tokens": cell.max_new_tokens, "seed": gen.seed,
               "concurrency": gen.concurrency, "torch_forward": forward, "target_quant": pair.target_quant,
               "request_rate": rate_value(arrivals.rate) if arrivals else None,
               "burstiness": arrivals.burstiness if arrivals else None}
        return Request(cell, setting, gen, row_key(row))

    @property
    def first_cell(self) -> Cell:
        """The cell of a row that stands for many (a runtime, setting or load level skipped)."""
        return Cell(self.samplings[0], self.max_new_tokens[0], self.prompts[0], 0)

    def cells(self, concurrency: int = 1) -> Iterator[Cell]:
        """Every cell in run order: sampling, length, prompt, then repeat (repeats_at(concurrency))."""
        for s, n, p, rep in itertools.product(self.samplings, self.max_new_tokens, self.prompts,
                                              range(self.repeats_at(concurrency))):
            yield Cell(s, n, p, rep)

    def load_cells(self, concurrency: int) -> Iterator[list[Cell]]:
        """The cells under load, one list per sampling and length (one closed-loop cell of client
        requests): every prompt, repeat by repeat (repeats_at(concurrency) times)."""
        for s, n in itertools.product(self.samplings, self.max_new_tokens):
            yield [Cell(s, n, p, rep) for rep in range(self.repeats_at(concurrency)) for p in self.prompts]

    def open_cells(self, rate: float) -> Iterator[list[Cell]]:
        """The open-loop cells at `rate`, one list per sampling and length: its requests' cells in
        the order they are sent (OpenLoad.order: seeded, the same for every setting)."""
        order = list(OpenLoad.order(self.prompts, self.open_load.requests_at(rate), self.seed))
        for s, n in itertools.product(self.samplings, self.max_new_tokens):
            yield [Cell(s, n, p, rep) for p, rep in order]

    def run_info(self, pairs: list[PairSpec], labels: dict[str, str]) -> dict:
        """run.json's first content: these settings with every pair measured (`pairs`, the variants
        too) and its label, the machine's environment and every model file ("runtimes" filled as
        each runtime loads)."""
        from spec_harness.core.machine import environment
        from spec_harness.core.results import model_files

        config = {
            "runtimes": self.runtimes, "pair": asdict(self.pairs[0]),
            "pairs": [{**asdict(p), "label": labels[p.name]} for p in pairs],
            "target_quants": self.target_quants,
            "gammas": self.gammas, "samplings": [asdict(s) for s in self.samplings],
            "max_new_tokens": self.max_new_tokens, "draft_policies": [str(p) for p in self.draft_policies],
            "drafters": [str(d) for d in self.drafters], "torch_forwards": self.torch_forwards, "seed": self.seed,
            "ignore_eos": self.ignore_eos,
            "runtime_settings": asdict(self.runtime), "repeats": self.repeats, "warmup": self.warmup,
            "interleave": self.interleave, "prompts": [asdict(p) for p in self.prompts],
        }
        if self.open_load.rates:
            config["open_load"] = self.open_load.config()
        if self.input_lens:
            from spec_harness.harness.input_len import RULE

            config.update(input_lens=self.input_lens, input_len_rule=RULE)
        # a variant's own file only (its float32 folder is that file's weights, its draft the pair's)
        files = model_files(ref for p in pairs for ref in ((p.target_gguf,) if p.target_quant else
                                                           (p.target, p.draft, p.target_gguf, p.draft_gguf)))
        return {"config": config, "environment": environment(), "model_files": files, "runtimes": {}}

    def repeats_at(self, concurrency: int) -> int:
        """Requests per prompt in a cell: --repeats one request at a time; under load enough that a
        cell has at least 2N requests (every prompt as often)."""
        if concurrency == 1:
            return self.repeats
        return max(self.repeats, -(-2 * concurrency // len(self.prompts)))

    def speculative_settings(self, name: Optional[str] = None) -> list[Setting]:
        """Each speculative setting of runtime `name`, one generation per cell each: every gamma
        for every policy in which gamma is the most drafts per round, one (gamma None) for
        library-default, in which the library chooses the length; each forced acceptance setting
        when `forced` is given (harness calibrate); the `only` list when given; then the runtime's
        `also`."""
        if self.only is not None:
            grid = list(self.only)
        else:
            grid = [Setting.drafting(p, g, d, f) for d in self.drafters for p in self.draft_policies
                    for g in (self.gammas if not p.library_default else [None]) for f in (self.forced or [None])]
        return grid + self.also.get(name, [])

    def settings_of(self, name: str) -> list[Setting]:
        """The baseline and each speculative setting of runtime `name`, in the order measured."""
        return [Setting()] + self.speculative_settings(name)

    def n_pairs(self, name: str) -> int:
        """Pairs runtime `name` measures: each pair once per --target-quant where it reads the target's GGUF."""
        return len(self.pairs) * (len(self.target_quants) if self.target_quants and runs_variants(name) else 1)

    def rows_per_pair(self, name: Optional[str] = None) -> int:
        """Rows of one runtime (one forward) and one pair."""
        per_prompt = sum(self.repeats_at(c) for c in self.concurrencies) * (1 + len(self.speculative_settings(name))) \
            * len(self.samplings) * len(self.max_new_tokens)
        open_rows = sum(self.open_load.requests_at(r) for r in self.open_load.rates) \
            * (1 + len(self.speculative_settings(name))) * len(self.samplings) * len(self.max_new_tokens)
        return len(self.prompts) * per_prompt + open_rows

    def n_rows(self) -> int:
        forwards = len(set(self.torch_forwards))
        return sum((forwards if runs_forwards(n) else 1) * self.n_pairs(n) * self.rows_per_pair(n) for n in self.runtimes)


def _declares(name: str, capability: str) -> bool:
    """What runtime `name`'s class declares in `capability` (runtimes/base.py's Runtime), as a
    truth value; a runtime not installed here declares nothing (its one skipped row)."""
    try:
        return bool(getattr(runtimes.get(name), capability))
    except RuntimeUnavailable:
        return False


def runs_variants(name: str) -> bool:
    """Whether runtime `name` runs each target quantization (its class reads the target's GGUF,
    `Runtime.reads_target_gguf`)."""
    return _declares(name, "reads_target_gguf")


def runs_forwards(name: str) -> bool:
    """Whether runtime `name` is measured once per --torch-forward (its class has a choice of
    forwards, `Runtime.forwards`)."""
    return _declares(name, "forwards")


def target_variants(cfg: RunConfig) -> dict[str, list[PairSpec]]:
    """Each pair's target variants (models/quantize.py: llama-quantize, cached), made before any
    model loads, where a runtime of the run reads the target's GGUF."""
    if not cfg.target_quants:
        return {}
    if not any(runs_variants(n) for n in cfg.runtimes):
        log(f"--target-quant: no runtime of this run reads the target's GGUF "
            f"({runtimes.listed(runtimes.able('reads_target_gguf'))}); every pair runs as given")
        return {}
    from spec_harness.models.quantize import variants

    out = {}
    for p in cfg.pairs:
        log(f"target quantizations of {p.name}: {', '.join(cfg.target_quants)} (llama-quantize; cached after the first run)")
        out[p.name] = variants(p, cfg.target_quants, lambda msg: log(f"  {msg}"))
    return out


def check_fits(c: RunConfig, name: str, pair: PairSpec, rt, encoded: dict[str, list[int]]) -> None:
    """Every prompt (`encoded` by the loaded runtime `rt`) and the longest --max-new-tokens in the
    pair's context, and at each --concurrency N above 1 in what each of N sequences can hold; else
    one line (HarnessError)."""
    for p in (p for p in c.prompts if p.key in encoded):  # a later turn's length is known when asked (Measuring.ids)
        if len(encoded[p.key]) + max(c.max_new_tokens) > rt.context_length:
            raise HarnessError(
                f"prompt {p.id} ({len(encoded[p.key])} tokens) + --max-new-tokens {max(c.max_new_tokens)} exceeds "
                f"the {rt.context_length}-token context of {pair.name}; "
                + ("lower --max-new-tokens" if len(encoded[p.key]) < rt.context_length
                   else "choose shorter prompts (--prompts) or a model with a longer context"))
    if not rt.serves_concurrently:  # its --concurrency above 1 is one skipped row
        return
    longest = max(len(v) for v in encoded.values()) + max(c.max_new_tokens)
    for n in c.server_loads:
        if longest > (each := rt.load_capacity(n)):
            raise HarnessError(f"{c.load_flag(n)}: {n} sequences of up to {longest} tokens (prompt + --max-new-tokens) "
                               f"do not fit {name}'s context ({f'{each} tokens each' if each else 'not a token each'}); "
                               f"raise --n-ctx or lower {c.load_flag(n).split()[0]}")
