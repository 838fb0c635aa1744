"""The run loop, shared by `harness run` (one setting) and `harness sweep` (a grid).

For each runtime and pair (with `target_quants`, each pair's target variants, made by
models/quantize.py before any model loads, on the runtimes that read the target's GGUF, and the
pair as given on the others): load once, warm up, then for every setting (temperature x top_p x
max_new_tokens), prompt and repeat, generate target-only (baseline) once and speculatively for
each drafter x draft policy x gamma (one generation for a policy whose library picks the length;
a combination the runtime cannot run is one "skipped" row), with the same seed, appending one results row per generation as soon as it is
measured. A row's key (runtime, pair, mode, prompt, repeat, settings) identifies it: with
`resume`, rows already written without error are not redone, so an interrupted sweep (Ctrl-C,
kill -9) loses at most the generation in flight.

Failures inside a runtime (missing dependency, bad file, out of memory) become a row with
`error` set and the loop goes on; `resume` retries them. Bad settings are rejected before anything
runs. run.json also gets this machine's limits at the run's threads (core/limits.py, measured once
per machine) and, per pair and runtime, the model sizes and prompt lengths the report's roofline
needs. What it does not do: compute metrics (core/metrics.py), lay out rows (core/results.py) or
reports (reports/).
"""

from __future__ import annotations

import itertools
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import runtimes
from core.config import (WARMUP_TOKENS, DrafterSpec, DraftPolicy, GenerationSettings, PairSpec, RuntimeSettings, SamplingParams,
                         TorchForward, at_least, default_of)
from core.errors import HarnessError, RuntimeUnavailable
from core import metrics
from core.metrics import SUSPECTED_BUG
from core.machine import environment
from core.records import Generation
from core.results import ResultsWriter, make_row, model_files, open_out_dir, read_run_json, row_key, write_run_json
from harness.prompts import Prompt
from runtimes.server import ServerSetting

if TYPE_CHECKING:  # runtimes.base imports torch; the command line reads RunConfig's defaults without it
    from runtimes.base import Runtime

BASELINE = (DraftPolicy(), None, DrafterSpec(), None)  # the (draft policy, gamma, drafter, forced) a baseline's settings carry
LIMITS_DIR = "limits"  # under models.loading.cache_root(): one file per machine key (core/limits.py)


def machine_limits(n_threads: Optional[int], remeasure: bool = False) -> dict:
    """core.limits.machine_limits at the threads a run with --n-threads `n_threads` uses, cached
    under $HARNESS_CACHE/limits (so every run folder on this machine shares one measurement)."""
    from core import limits
    from models.loading import cache_root

    return limits.machine_limits(limits.threads_of(n_threads), cache_root() / LIMITS_DIR, remeasure)


@dataclass
class RunConfig:
    runtimes: list[str]
    pairs: list[PairSpec]
    prompts: list[Prompt]
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
    # (draft policy, gamma, drafter) of the speculative settings to run, in place of the grid
    # drafters x policies x gammas (harness tune's candidates); None: the whole grid
    only: Optional[list[tuple[DraftPolicy, int, DrafterSpec]]] = None

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
            GenerationSettings(SamplingParams(), g, n, draft_policy=p, drafter=d, forced=f, concurrency=c)  # validates the grid up front
        for p, g, d in self.only or []:
            GenerationSettings(SamplingParams(), g, self.max_new_tokens[0], draft_policy=p, drafter=d)
        self._check_loads_fit()
        if self.target_quants:
            from models.quantize import parse_types

            self.target_quants = parse_types(self.target_quants)

    def _parse(self) -> None:
        """The draft policies, drafters and forwards given as text (harness tune's, a test's) parsed."""
        self.draft_policies = [DraftPolicy.of(p) for p in self.draft_policies]
        self.drafters = [DrafterSpec.of(d) for d in self.drafters]
        self.torch_forwards = [TorchForward.parse(f) for f in self.torch_forwards]
        if self.only is not None:
            self.only = [(DraftPolicy.of(p), g, DrafterSpec.of(d)) for p, g, d in self.only]

    def _check_loads_fit(self) -> None:
        """Each --concurrency N above 1 against what each runtime of the run that serves
        concurrently could hold before any load (its class's most_sequences, runtimes/server.py):
        N sequences of a prompt (one token at least) and the longest --max-new-tokens. The runner
        checks the prompts themselves against the loaded runtime (load_capacity)."""
        loads = [n for n in self.concurrencies if n > 1]
        if not loads:
            return
        tokens, longest = 1 + max(self.max_new_tokens), max(self.max_new_tokens)
        for name in self.runtimes:
            try:
                cls = runtimes.get(name)
            except RuntimeUnavailable:
                continue  # its own skipped row says why
            if not getattr(cls, "serves_concurrently", False) or not hasattr(cls, "most_sequences"):
                continue
            most = cls.most_sequences(self.runtime, tokens)
            for n in loads:
                if most is not None and n > most:
                    context = f"--n-ctx {self.runtime.n_ctx}" if self.runtime.n_ctx else \
                        f"its default of at most {RuntimeSettings.N_CTX_CAP} tokens"
                    fit = f"at most {most} do with {context}" if most else f"not one does with {context}"
                    raise HarnessError(f"--concurrency {n}: {n} sequences of at least {tokens} tokens (a prompt and "
                                       f"--max-new-tokens {longest}) do not fit {name}'s context ({fit}); lower "
                                       "--concurrency or raise --n-ctx")

    def settings(self, s: SamplingParams, max_new: int, repeat: int, gamma: Optional[int] = None,
                 policy: DraftPolicy = DraftPolicy(), drafter: DrafterSpec = DrafterSpec(), forced: Optional[tuple] = None,
                 concurrency: int = 1) -> GenerationSettings:
        return GenerationSettings(s, gamma or self.gammas[0], max_new, self.seed + repeat, self.ignore_eos, policy, drafter,
                                  forced, concurrency)

    def repeats_at(self, concurrency: int) -> int:
        """Requests per prompt in a cell: --repeats one request at a time; under load enough that a
        cell has at least 2N requests (every prompt as often)."""
        if concurrency == 1:
            return self.repeats
        return max(self.repeats, -(-2 * concurrency // len(self.prompts)))

    def speculative_settings(self) -> list[tuple[DraftPolicy, Optional[int], DrafterSpec, Optional[tuple]]]:
        """(draft policy, gamma, drafter, forced rates) of each speculative generation per prompt:
        every gamma for every policy in which gamma is the most drafts per round, one generation
        (gamma None) for library-default, in which the library chooses the length; each forced
        acceptance setting when `forced` is given (harness calibrate); the `only` list when given."""
        if self.only is not None:
            return [(p, g, d, None) for p, g, d in self.only]
        return [(p, g, d, f) for d in self.drafters for p in self.draft_policies
                for g in (self.gammas if not p.library_default else [None]) for f in (self.forced or [None])]

    def n_runtimes(self) -> int:
        """Runtimes measured: torch once per --torch-forward."""
        return len(self.runtimes) + ("torch" in self.runtimes) * (len(set(self.torch_forwards)) - 1)

    def n_pairs(self, name: str) -> int:
        """Pairs runtime `name` measures: each pair once per --target-quant where it reads the target's GGUF."""
        return len(self.pairs) * (len(self.target_quants) if self.target_quants and runs_variants(name) else 1)

    def rows_per_pair(self) -> int:
        """Rows of one runtime (one forward) and one pair."""
        per_prompt = sum(self.repeats_at(c) for c in self.concurrencies) * (1 + len(self.speculative_settings())) \
            * len(self.samplings) * len(self.max_new_tokens)
        return len(self.prompts) * per_prompt

    def n_rows(self) -> int:
        forwards = len(set(self.torch_forwards))
        return sum((forwards if n == "torch" else 1) * self.n_pairs(n) for n in self.runtimes) * self.rows_per_pair()


def runs_variants(name: str) -> bool:
    """Whether runtime `name` runs each target quantization (its class reads the target's GGUF,
    `Runtime.reads_target_gguf`); a runtime not installed here runs the pair once (its skipped row)."""
    try:
        return bool(getattr(runtimes.get(name), "reads_target_gguf", False))
    except RuntimeUnavailable:
        return False


def _log(msg: str) -> None:
    from tqdm import tqdm

    tqdm.write(msg, file=sys.stderr)


def generation_row(pair: PairSpec, rt: Optional[Runtime], name: str, mode: str, prompt: Prompt, repeat: int,
                   gen: GenerationSettings, g: Optional[Generation], error: Optional[str] = None,
                   baseline: Optional[dict] = None, settings: RuntimeSettings = RuntimeSettings(),
                   label: Optional[str] = None, forward: Optional[str] = None,
                   started_at: Optional[float] = None) -> dict:
    """core.results.make_row for one generation of runtime `rt` (None when it never loaded);
    `label` is the pair as a person names it (models.info.pair_label); `forward` the forward a
    runtime with a choice of them runs (torch: kernels or eager), None for the others;
    `started_at` when the runner asked for it (unix epoch seconds: the harness's clock, which
    reports/trace.py lays generations on), None for a row no generation was asked for."""
    desc = rt.describe() if rt is not None else {}
    identity = {"runtime": name, "mode": mode, "pair": pair.name, "target_quant": pair.target_quant,
                "prompt_id": prompt.id, "category": prompt.category, "repeat": repeat}
    row = make_row(identity, gen, desc.get("device", settings.device), desc.get("dtype", settings.dtype), g,
                   text=rt.decode(g.token_ids) if g is not None else None, error=error, baseline=baseline,
                   verify_rule=rt.verify_rule(gen) if rt is not None else None, started_at=started_at)
    row["pair_label"] = label or pair.name
    row["torch_forward"] = forward
    return row


def label_of(pair: PairSpec) -> str:
    """The pair as a person names it, from the files the llama.cpp runtimes load, else the HF ones;
    a target variant (--target-quant) ends in "@TYPE"."""
    from models.info import pair_label

    label = pair_label(pair.target_gguf or pair.target, pair.draft_gguf or pair.draft)
    return f"{label} @{pair.target_quant}" if pair.target_quant else label


def _one_line(e: BaseException) -> str:
    msg = (str(e).strip().splitlines() or [""])[0]
    return msg if isinstance(e, HarnessError) else f"{type(e).__name__}: {msg}"


class _LoadFailed(Exception):
    """A runtime could not load the pair for a reason specific to it (its cause says why)."""


class Runner:
    """Runs a RunConfig into cfg.out; `run()` returns every row of the folder (old and new)."""

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.out, existing = open_out_dir(cfg.out, cfg.resume)
        self.rows = existing
        self.done = {row_key(r): r for r in existing if not r.get("error")}
        self.variants = self._variants()  # pair name -> its target's variants (--target-quant), made now
        every = self._every_pair()
        self.labels = {p.name: label_of(p) for p in every}
        self.checkers: dict = {}  # pair name -> runtimes.expected.Checker, loaded at its first speculative row
        self.info = {
            "config": {
                "runtimes": cfg.runtimes, "pair": asdict(cfg.pairs[0]),
                "pairs": [{**asdict(p), "label": self.labels[p.name]} for p in every],
                "target_quants": cfg.target_quants,
                "gammas": cfg.gammas, "samplings": [asdict(s) for s in cfg.samplings],
                "max_new_tokens": cfg.max_new_tokens, "draft_policies": [str(p) for p in cfg.draft_policies],
                "drafters": [str(d) for d in cfg.drafters], "torch_forwards": cfg.torch_forwards, "seed": cfg.seed,
                "ignore_eos": cfg.ignore_eos,
                "runtime_settings": asdict(cfg.runtime), "repeats": cfg.repeats, "warmup": cfg.warmup,
                "prompts": [asdict(p) for p in cfg.prompts],
            },
            "environment": environment(),
            # a variant's own file only (its float32 folder is that file's weights, its draft the pair's)
            "model_files": model_files(ref for p in every for ref in ((p.target_gguf,) if p.target_quant else
                                                                      (p.target, p.draft, p.target_gguf, p.draft_gguf))),
            "runtimes": {},
        }
        if self.done:
            _log(f"resuming {self.out}: {len(self.done)} rows already measured are kept")
            prior = read_run_json(self.out) or {}
            self.info["roofline"] = prior.get("roofline") or {}  # runtimes not loaded again
            if "batched_costs" in prior:  # measured once per run, the engines' own prices with it (_price_batches)
                self.info["batched_costs"] = prior["batched_costs"]

    def run(self) -> list[dict]:
        from tqdm import tqdm

        self.info["machine_limits"] = _limits_or_why(self.cfg.runtime.n_threads)
        if any(n > 1 for n in self.cfg.concurrencies) and "batched_costs" not in self.info:
            self.info["batched_costs"] = self._batched_costs()
        write_run_json(self.out, self.info)
        self.writer = ResultsWriter(self.out)
        self.bar = tqdm(total=self.cfg.n_rows(), unit="gen", desc="generations", file=sys.stderr,
                        dynamic_ncols=True, disable=None)
        self.early: dict[tuple[str, str], Runtime] = {}  # (runtime, pair) -> loaded, its first servers starting
        self.forward: Optional[str] = None  # the forward of the runtime now measured (_forwards)
        try:
            self._start_early()
            for name in self.cfg.runtimes:
                for pair in self._pairs_of(name):
                    for self.forward in self._forwards(name):
                        self._runtime_pair(name, pair)
            self.forward = None
        finally:
            for rt in self.early.values():
                rt.close()
            self.checkers.clear()
            self.bar.close()
            self.writer.close()
        return self.rows

    def _variants(self) -> dict[str, list[PairSpec]]:
        """Each pair's target variants (models/quantize.py: llama-quantize, cached), made before any
        model loads, where a runtime of the run reads the target's GGUF."""
        c = self.cfg
        if not c.target_quants:
            return {}
        if not any(runs_variants(n) for n in c.runtimes):
            _log(f"--target-quant: no runtime of this run reads the target's GGUF "
                 f"({runtimes.listed(runtimes.able('reads_target_gguf'))}); every pair runs as given")
            return {}
        from models.quantize import variants

        out = {}
        for p in c.pairs:
            _log(f"target quantizations of {p.name}: {', '.join(c.target_quants)} (llama-quantize; cached after the first run)")
            out[p.name] = variants(p, c.target_quants, lambda msg: _log(f"  {msg}"))
        return out

    def _pairs_of(self, name: str) -> list[PairSpec]:
        """The pairs runtime `name` measures: each pair's target variants where it reads the target's
        GGUF and --target-quant asked for them, else the pairs as given."""
        if not self.variants or not runs_variants(name):
            return self.cfg.pairs
        return [v for p in self.cfg.pairs for v in self.variants.get(p.name, [p])]

    def _every_pair(self) -> list[PairSpec]:
        """The pairs as given and every variant, each once (run.json, labels, batched prices)."""
        return self.cfg.pairs + [v for p in self.cfg.pairs for v in self.variants.get(p.name, [])]

    def _forwards(self, name: str) -> list[Optional[str]]:
        """The forwards a runtime runs in this run, each measured as a runtime of its own: --torch-forward
        resolved (auto: kernels where they build here, else eager) for a runtime with a choice of
        forwards (torch), [None] for the others."""
        try:
            if not runtimes.get(name).forwards:
                return [None]
        except RuntimeUnavailable:  # not installed here: its turn says so
            return [None]
        from runtimes.pytorch import resolve_forward

        return list(dict.fromkeys(resolve_forward(replace(self.cfg.runtime, torch_forward=f))[0]
                                  for f in self.cfg.torch_forwards))

    @property
    def rs(self) -> RuntimeSettings:
        """The runtime settings of the runtime now measured (its forward, where it has a choice)."""
        return replace(self.cfg.runtime, torch_forward=self.forward) if self.forward else self.cfg.runtime

    def _label(self, name: str) -> str:
        """The runtime as the console, run.json and the report name it: `torch [kernels]` where the
        forward is a choice, else its registry name."""
        return f"{name} [{self.forward}]" if self.forward else name

    def _row_kw(self, pair: PairSpec) -> dict:
        return dict(settings=self.rs, label=self.labels[pair.name], forward=self.forward)

    def _start_early(self) -> None:
        """Each server runtime measured after another one (`starts_early`) is loaded now and launches
        the servers of its first setting, so that their start (a vLLM engine: 20-30 s, mostly
        single-threaded imports) overlaps the loading of the runtimes before it; they are held
        paused while anything is measured (_measure). A runtime that cannot do so here is loaded
        again at its turn, where its reason becomes its row."""
        for name in reversed(self.cfg.runtimes[1:]):  # the last measured starts first: it may take longest (vLLM)
            rt = None
            pair = self._pairs_of(name)[0]
            try:
                if not getattr(runtimes.get(name), "starts_early", False) or not self._todo(name, pair):
                    continue
                rt = runtimes.get(name)(self.cfg.runtime, workdir=self.out)
                rt.load(pair)
                blocks = self._blocks(name, pair, rt, {})
                first = next((i for i, b in enumerate(blocks) if b.jobs and b.runnable), None)
                if first is None:
                    rt.close()
                    continue
                rt.start_early(blocks[first].server, [b.server for b in blocks[first + 1:] if b.runnable])
            except Exception:  # noqa: BLE001 - its own turn says why
                if rt is not None:
                    rt.close()
                continue
            self.early[(name, pair.name)] = rt
            _log(f"[{name}] loaded; its first servers start in the background, paused while anything is measured")

    def _batched_costs(self) -> dict:
        """The batched cost model's inputs under load (reports/concurrency.py): per pair with GGUF
        files, llama.cpp's seconds for one pass of N sequences x k tokens, k = 1 and each gamma + 1,
        target and draft, at every N of the run (and 1), before any runtime loads."""
        from runtimes.llama_common import batched_pass_s

        c = self.cfg
        ns = sorted({1, *c.concurrencies})
        ks = sorted({1, *(g + 1 for g in c.gammas)})
        out = {}
        for pair in self._every_pair():
            if not (pair.target_gguf and pair.draft_gguf):
                continue
            _log(f"measuring llama.cpp's batched passes of {pair.name} (N = {', '.join(map(str, ns))}; tokens {ks}) ...")
            try:
                out[pair.name] = {
                    "target": {str(n): {str(k): batched_pass_s(pair.target_gguf, c.runtime, n, k) for k in ks} for n in ns},
                    "draft": {str(n): {"1": batched_pass_s(pair.draft_gguf, c.runtime, n, 1)} for n in ns},
                    "depth": 64}
            except (RuntimeError, HarnessError, OSError) as e:
                out[pair.name] = {"unavailable": _one_line(e)}
        return out

    def _emit(self, row: dict) -> None:
        self.writer.write(row)
        self.rows.append(row)
        if not row.get("error"):
            self.done[row_key(row)] = row

    def _cells(self, concurrency: int = 1):
        """(sampling, max_new, prompt, repeat) in run order."""
        c = self.cfg
        return itertools.product(c.samplings, c.max_new_tokens, c.prompts, range(c.repeats_at(concurrency)))

    def _settings(self) -> list[tuple[str, tuple]]:
        """(mode, (draft policy, gamma, drafter, forced)) of the baseline and each speculative setting."""
        return [("baseline", BASELINE)] + [("speculative", x) for x in self.cfg.speculative_settings()]

    def _key(self, name: str, pair: PairSpec, cell: tuple, mode: str, setting: tuple,
             concurrency: int = 1) -> tuple[GenerationSettings, tuple]:
        """(settings, row key) of one generation: a cell (sampling, max_new, prompt, repeat) in one setting."""
        s, n, p, rep = cell
        policy, gamma, drafter, forced = setting
        gen = self.cfg.settings(s, n, rep, gamma, policy, drafter, forced, concurrency)
        spec = mode == "speculative"
        row = {"runtime": name, "pair": pair.name, "mode": mode, "prompt_id": p.id, "repeat": rep,
               "gamma": gen.gamma_max if spec else None, "draft_policy": str(policy) if spec else None,
               "drafter": str(drafter) if spec else None, "forced_rates": forced,
               "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k, "max_new_tokens": n,
               "seed": gen.seed, "concurrency": concurrency, "torch_forward": self.forward,
               "target_quant": pair.target_quant}
        return gen, row_key(row)

    def _todo(self, name: str, pair: PairSpec) -> list[tuple]:
        """The row keys of this runtime and pair not measured yet."""
        return [k for c in self.cfg.concurrencies for cell in self._cells(c) for mode, x in self._settings()
                if (k := self._key(name, pair, cell, mode, x, c)[1]) not in self.done]

    def _runtime_pair(self, name: str, pair: PairSpec) -> None:
        todo = self._todo(name, pair)
        self.bar.update(self.cfg.rows_per_pair() - len(todo))
        if not todo:
            return
        rt = None
        label = self._label(name)
        tag = label if len(self.cfg.pairs) == 1 else f"{label} {pair.name}"
        if pair.target_quant and len(self.cfg.pairs) == 1:
            tag += f" @{pair.target_quant}"
        try:
            rt = self.early.pop((name, pair.name), None) or self._load(name, pair)
            self.info["runtimes"][label] = rt.describe()
            write_run_json(self.out, self.info)
            self._measure(name, pair, rt, tag)
        except (RuntimeUnavailable, _LoadFailed) as e:
            reason = _one_line(e.__cause__) if isinstance(e, _LoadFailed) else str(e)
            _log(f"[{tag}] skipped: {reason}")
            self.info["runtimes"][label] = {"skipped": reason}
            write_run_json(self.out, self.info)
            s, n = self.cfg.samplings[0], self.cfg.max_new_tokens[0]
            self._emit(generation_row(pair, None, name, "baseline", self.cfg.prompts[0], 0, self.cfg.settings(s, n, 0),
                                      None, error=f"skipped: {reason}", **self._row_kw(pair)))
            self.bar.update(len(todo))
        finally:
            if rt is not None:
                rt.close()

    def _roofline_inputs(self, name: str, pair: PairSpec, encoded: dict[str, list[int]]) -> None:
        """run.json's roofline[pair][runtime]: the model sizes the runtime describes and each
        prompt's token count, what the report's roofline needs beside the rows (kept per pair: a
        sweep over pairs loads a runtime once per pair, and `runtimes` holds the last description)."""
        label = self._label(name)
        entry = {"model_sizes": self.info["runtimes"][label].get("model_sizes"),  # the description just taken
                 "prompt_tokens": {k: len(v) for k, v in encoded.items()}}
        self.info.setdefault("roofline", {}).setdefault(pair.name, {})[label] = entry
        write_run_json(self.out, self.info)

    def _load(self, name: str, pair: PairSpec) -> Runtime:
        cls = runtimes.get(name)
        rt = cls(self.rs, workdir=self.out)
        _log(f"[{self._label(name)}] loading {pair.name} ...")
        try:
            rt.load(pair)
        except HarnessError:
            raise  # bad input (missing file, mismatched tokenizers): the same for every runtime
        except (MemoryError, RuntimeError, OSError, ValueError, AttributeError) as e:
            raise _LoadFailed(name) from e
        return rt

    def _measure(self, name: str, pair: PairSpec, rt: Runtime, tag: str) -> None:
        """Every generation of one runtime and pair. A runtime that runs one setting at a time (a
        server started per setting) measures each setting's generations together, every prompt,
        repeat and sampling, so each server starts once; the others take the cells in turn, each
        cell's baseline and speculative generations side by side."""
        c = self.cfg
        for other in self.early.values():  # servers starting in the background take nothing from a measurement
            other.hold()
        encoded = {p.id: rt.encode(p.text) for p in c.prompts}
        self._roofline_inputs(name, pair, encoded)
        for p in c.prompts:
            if len(encoded[p.id]) + max(c.max_new_tokens) > rt.context_length:
                raise HarnessError(
                    f"prompt {p.id} ({len(encoded[p.id])} tokens) + --max-new-tokens {max(c.max_new_tokens)} exceeds "
                    f"the {rt.context_length}-token context of {pair.name}; "
                    + ("lower --max-new-tokens" if len(encoded[p.id]) < rt.context_length
                       else "choose shorter prompts (--prompts) or a model with a longer context"))
        loads = [n for n in c.concurrencies if n > 1]
        longest = max(len(v) for v in encoded.values()) + max(c.max_new_tokens)
        for n in loads if getattr(rt, "serves_concurrently", False) else ():
            if longest > (each := rt.load_capacity(n)):
                raise HarnessError(f"--concurrency {n}: {n} sequences of up to {longest} tokens (prompt + --max-new-tokens) "
                                   f"do not fit {name}'s context ({f'{each} tokens each' if each else 'not a token each'}); "
                                   "raise --n-ctx or lower --concurrency")
        bases: dict[tuple, dict] = {}  # (sampling, max_new, prompt id, repeat) -> its baseline row
        blocks = self._blocks(name, pair, rt, bases) if 1 in c.concurrencies else []
        said: set[tuple] = set()
        try:
            for i, b in enumerate(blocks):
                upcoming = [later.server for later in blocks[i + 1:] if later.runnable]
                self._measure_block(name, pair, rt, tag, b, upcoming, encoded, bases, said)
            for n in loads:
                self._measure_load(name, pair, rt, tag, n, encoded)
        finally:
            for other in self.early.values():
                other.release()
            desc = self.info["runtimes"][self._label(name)] = rt.describe()  # with what measuring added (a server's starts)
            write_run_json(self.out, self.info)
            if "server_starts" in desc:
                starts = desc["server_starts"]
                _log(f"[{tag}] servers started: " + ", ".join(f"{k} {v}x" for k, v in starts.items()))

    def _blocks(self, name, pair, rt, bases) -> list["_Block"]:
        """The generations in the order they are measured: one block per setting for a runtime that
        runs one setting at a time, else one block of every cell."""
        settings = self._settings()
        return [self._block(name, pair, rt, [x], bases) for x in settings] if rt.one_setting_at_a_time \
            else [self._block(name, pair, rt, settings, bases)]

    def _block(self, name, pair, rt, settings, bases) -> "_Block":
        """What is left to measure of some settings over every cell, their warm-up settings (each
        drafting of the block once, at its first gamma) and why the runtime cannot run some."""
        c = self.cfg
        b = _Block()
        for cell in self._cells():
            for mode, x in settings:
                gen, key = self._key(name, pair, cell, mode, x)
                if key not in self.done:
                    b.jobs.append((cell, mode, gen))
                elif mode == "baseline":
                    bases[_cell_id(cell)] = self.done[key]
        for _, mode, gen in b.jobs:
            b.warm.setdefault((mode, gen.draft_policy, gen.drafter), replace(
                gen, max_new_tokens=min(WARMUP_TOKENS, gen.max_new_tokens), seed=c.seed, sampling=c.samplings[0]))
        b.why = {k: rt.supports(w) if k[0] == "speculative" else None for k, w in b.warm.items()}
        runnable = [(k, w) for k, w in b.warm.items() if not b.why[k]]
        if runnable:
            b.runnable, b.start = True, runnable[0][1] if runnable[0][0][0] == "speculative" else None
        return b

    def _measure_block(self, name, pair, rt, tag, b: "_Block", upcoming, encoded, bases, said) -> None:
        """Warm-up, then cell by cell, each cell's settings in turn. A runtime that runs one setting
        at a time is told first which setting comes now and which come next (start_setting)."""
        c = self.cfg
        if not b.jobs:
            return
        runnable = [(k, w) for k, w in b.warm.items() if not b.why[k]]
        first = encoded[c.prompts[0].id]
        try:
            if rt.one_setting_at_a_time and b.runnable:
                rt.start_setting(b.server, upcoming)
            for _ in range(c.warmup):
                for (mode, _, _), w in runnable:
                    (rt.generate_speculative if mode == "speculative" else rt.generate_baseline)(first, w)
            if rt.one_setting_at_a_time and b.runnable:
                self._price_batches(name, pair, rt, 1, b.start, first)
        except HarnessError:
            raise
        except Exception as e:  # a runtime that cannot generate at all (a server that dies at once) is skipped
            if any(mode == "baseline" for _, mode, _ in b.jobs):
                raise _LoadFailed(name) from e
            for k, _ in runnable:  # a setting whose server cannot start: one row says why, the run goes on
                b.why[k] = _one_line(e)
        measured: dict[tuple, list[tuple]] = {}  # per setting: (baseline row, speculative row) of each generation
        for cell, mode, gen in b.jobs:
            s, n, p, rep = cell
            how = (mode, gen.draft_policy, gen.drafter)
            if b.why.get(how):  # one row says so; the other cells of this drafting are not generated
                if how not in said:
                    said.add(how)
                    _log(f"[{tag}] --draft-policy {gen.draft_policy} --drafter {gen.drafter}: skipped: {b.why[how]}")
                    self._emit(generation_row(pair, rt, name, mode, p, rep, gen, None, error=f"skipped: {b.why[how]}",
                                              **self._row_kw(pair)))
                self.bar.update(1)
                continue
            base = bases.get(_cell_id(cell))
            row = self._generate(pair, rt, name, mode, p, rep, gen, encoded[p.id], base)
            if mode == "baseline":
                bases[_cell_id(cell)] = row
            self._emit(row)
            self.bar.update(1)
            if mode == "speculative" and (c.verbose or row["error"] or (base or {}).get("error")):
                _log(_progress(tag, p, gen, base, row))
            elif mode == "speculative":
                measured.setdefault((gen.draft_policy, gen.gamma_max, gen.drafter, gen.sampling, gen.max_new_tokens), []).append((base, row))
            elif row["error"]:
                _log(f"[{tag}] {p.id} baseline rep {gen.seed}: error: {row['error']}")
        for (policy, gamma, drafter, s, n), pairs in measured.items():
            _log(_setting_line(tag, policy, gamma, drafter, s.temperature, pairs))

    def _measure_load(self, name, pair, rt, tag, n: int, encoded) -> None:
        """Every cell at concurrency n > 1 (runtimes/load.py): for each setting (baseline first, the
        server started for n sequences), warm-up requests outside the cells, then per sampling and
        length one cell of every prompt repeats_at(n) times through n closed-loop streams, one row
        per request. A cell with every row measured is kept (resume by cell); a runtime that runs
        one sequence at a time is one skipped row."""
        c = self.cfg
        kw = self._row_kw(pair)
        per = c.repeats_at(n) * len(c.prompts)
        settings = self._settings()
        if not getattr(rt, "serves_concurrently", False):
            gen = c.settings(c.samplings[0], c.max_new_tokens[0], 0, concurrency=n)
            why = (f"skipped: {name} runs one sequence at a time (--concurrency above 1 runs on "
                   f"{runtimes.listed(runtimes.able('serves_concurrently'))})")
            _log(f"[{tag}] --concurrency {n}: {why}")
            self._emit(generation_row(pair, rt, name, "baseline", c.prompts[0], 0, gen, None, error=why, **kw))
            self.bar.update(per * len(settings) * len(c.samplings) * len(c.max_new_tokens))
            return
        plan = []
        for mode, x in settings:
            cells = []
            for s, maxn in itertools.product(c.samplings, c.max_new_tokens):
                reqs = [((s, maxn, p, rep), *self._key(name, pair, (s, maxn, p, rep), mode, x, n))
                        for rep in range(c.repeats_at(n)) for p in c.prompts]
                if any(key not in self.done for _, _, key in reqs):
                    cells.append(reqs)
                else:
                    self.bar.update(len(reqs))
            plan.append((mode, cells))
        bases: dict[tuple, dict] = {}
        for i, (mode, cells) in enumerate(plan):
            if not cells:
                continue
            first = cells[0][0][1]
            spec = mode == "speculative"
            why = rt.supports(first) if spec else None
            if why:
                _log(f"[{tag}] --concurrency {n} --drafter {first.drafter}: skipped: {why}")
                self._emit(generation_row(pair, rt, name, mode, c.prompts[0], 0, first, None, error=f"skipped: {why}", **kw))
                self.bar.update(sum(len(cl) for cl in cells))
                continue
            upcoming = [ServerSetting.of(cls[0][0][1]) if m == "speculative" else ServerSetting.baseline(n)
                        for m, cls in plan[i + 1:] if cls]  # each later setting's first request's settings
            rt.start_setting(ServerSetting.of(first) if spec else ServerSetting.baseline(n), upcoming)
            if c.warmup:  # n requests at once, outside every cell
                warm = replace(first, max_new_tokens=min(WARMUP_TOKENS, first.max_new_tokens))
                rt.generate_load([encoded[c.prompts[0].id]] * n, [warm] * n, spec)
            self._price_batches(name, pair, rt, n, first if spec else None, encoded[c.prompts[0].id])
            for reqs in cells:
                self._load_cell(pair, rt, name, mode, n, reqs, encoded, bases, tag, kw)
        if any(cells for _, cells in plan):
            _log(f"[{tag}] --concurrency {n}: {sum(len(cl) for _, cls in plan for cl in cls)} requests measured")

    def _price_batches(self, name, pair, rt, n: int, gen: Optional[GenerationSettings], ids: list[int]) -> None:
        """Under load, a server runtime that times its own engine (vLLM, whose float32 batches
        llama.cpp's quantized ones do not price) measures the batched cost model's inputs on the
        server of the setting about to be measured, outside every cell, into run.json's
        batched_costs[pair]["by_runtime"][runtime]: at the baseline's server the target's step of
        n x k tokens for k = 1 and each gamma + 1 (`batch_pass_s`, "target") and its decode step
        (`decode_step_s`, "step"); at a draft model's server its decode step, whose extra over the
        baseline's beyond the verify batch (v) is the draft's gamma passes ("draft", as seconds of
        one pass). Prompt lookup runs no model, and an EAGLE-3 head's round is priced from its own
        round at N = 1 (reports/concurrency.py): neither is priced here."""
        c = self.cfg
        if not hasattr(rt, "batch_pass_s") or not any(x > 1 for x in c.concurrencies):
            return
        own = self.info.setdefault("batched_costs", {}).setdefault(pair.name, {}).setdefault("by_runtime", {}) \
            .setdefault(name, {"how": "the engine's own steps, timed on its servers outside the cells"})
        ids = (ids * (64 // max(len(ids), 1) + 1))[:64]
        try:
            if gen is None:
                own.setdefault("target", {})[str(n)] = rt.batch_pass_s(n, sorted({1, *(g + 1 for g in c.gammas)}), ids)
                own.setdefault("step", {})[str(n)] = rt.decode_step_s(None, n, ids)
                return
            kind = gen.drafter.kind
            t, base = own.get("target", {}).get(str(n), {}), own.get("step", {}).get(str(n))
            k = str(gen.gamma_max + 1)
            if kind != "model" or base is None or k not in t:
                return
            per_gamma = max(rt.decode_step_s(gen, n, ids) / base - t[k] / t["1"], 0.0) / gen.gamma_max
            own.setdefault("draft", {})[str(n)] = {"1": per_gamma * t["1"]}
        except (RuntimeError, OSError) as e:  # a server that cannot price its batches (ServerError) costs no measurement
            own.setdefault("unavailable", {})[f"N{n} {gen.drafter if gen else 'baseline'}"] = _one_line(e)
        finally:
            write_run_json(self.out, self.info)

    def _load_cell(self, pair, rt, name, mode, n, reqs, encoded, bases, tag, kw) -> None:
        """One cell's requests through rt.generate_load -> one row per request."""
        from runtimes.load import CLIENT_CPU_WARN

        spec = mode == "speculative"
        gens = [gen for _, gen, _ in reqs]
        # the harness's clock: the cell's own (runtimes/load.py) starts a moment later, once the server's
        # counters are read; a request's started_at is t0 + its start on the cell's clock
        t0 = time.time()
        try:
            cell, gs = rt.generate_load([encoded[p.id] for (_, _, p, _), _, _ in reqs], gens, spec)
        except HarnessError:
            raise
        except Exception as e:  # the server died or answered nonsense: every request of the cell is an error row
            with open(self.out / "errors.log", "a") as f:
                f.write(f"[{name} {pair.name} {mode} concurrency {n}]\n{traceback.format_exc()}\n")
            cell, gs = None, [_one_line(e)] * len(reqs)
        cell_id = f"{name}|{mode}|{gens[0].draft_policy if spec else '-'}|{gens[0].gamma_max if spec else '-'}|" \
                  f"{gens[0].drafter if spec else '-'}|T{gens[0].sampling.temperature:g}|{gens[0].max_new_tokens}|N{n}"
        for ((s, maxn, p, rep), gen, _), g, r in zip(reqs, gs, cell.requests if cell else [None] * len(reqs)):
            base = bases.get((s, maxn, p.id, rep)) if spec else None
            started = t0 + (r.start_s if r is not None else 0.0)
            if isinstance(g, str):
                row = generation_row(pair, rt, name, mode, p, rep, gen, None, error=g, started_at=started, **kw)
            else:
                row = generation_row(pair, rt, name, mode, p, rep, gen, g, baseline=base, started_at=started, **kw)
                itl = r.inter_token_s()
                row.update(cell=cell_id, request_start_s=r.start_s, request_end_s=r.end_s, ttft_s=r.ttft_s,
                           itl_median_s=metrics.quantile(itl, 0.5), itl_p90_s=metrics.quantile(itl, 0.9))
                row["extra"] = {**(row.get("extra") or {}), "cell": {"wall_s": cell.wall_s, "client_cpu_s": cell.client_cpu_s,
                                                                      "requests": len(reqs), "concurrency": n}}
                self._expected(pair, rt, row, encoded[p.id])
            if not spec:
                bases[(s, maxn, p.id, rep)] = row
            self._emit(row)
            self.bar.update(1)
        if cell is not None:
            agg = sum(len(r.tokens) for r in cell.requests) / cell.wall_s if cell.wall_s else 0.0
            _log(f"[{tag}] {cell_id.split('|', 1)[1].replace('|', ' ')}: {len(reqs)} requests, {agg:.1f} tok/s in all")
            if cell.client_cpu_share > CLIENT_CPU_WARN:
                _log(f"[{tag}] warning: the client took {100 * cell.client_cpu_share:.1f} % of a core over this cell "
                     f"(above {100 * CLIENT_CPU_WARN:.0f} %): it may be part of what was measured")

    def _generate(self, pair, rt, name, mode, p, repeat, gen, ids, baseline) -> dict:
        kw = dict(self._row_kw(pair), started_at=time.time())  # the harness's clock, just before the runtime's call
        try:
            g = rt.generate_speculative(ids, gen) if mode == "speculative" else rt.generate_baseline(ids, gen)
        except HarnessError:
            raise
        except Exception as e:  # out of memory, a library error: record it and go on
            with open(self.out / "errors.log", "a") as f:
                f.write(f"[{name} {pair.name} {mode} {p.id} repeat {repeat}]\n{traceback.format_exc()}\n")
            return generation_row(pair, rt, name, mode, p, repeat, gen, None, error=_one_line(e), **kw)
        row = generation_row(pair, rt, name, mode, p, repeat, gen, g, baseline=baseline, **kw)
        if row["greedy_match"] is False:
            row["mismatch"] = self._evidence(rt, ids, baseline["token_ids"], g)
        self._expected(pair, rt, row, ids)
        return row

    def _expected(self, pair: PairSpec, rt: Runtime, row: dict, ids: list[int]) -> None:
        """runtimes/expected.py for a row, after its measurement: what a speculative row's rule should
        have accepted with these models, and whether a sampled row's tokens are the target's samples
        (the pair loaded in torch once per run); a check that cannot run is noted in the row, never
        a lost row. Its time is run.json's `acceptance_check_s`."""
        from core.limits import threads_of
        from runtimes.expected import Checker

        if row.get("error") or self.cfg.forced or (row["mode"] != "speculative" and not row.get("temperature")):
            return
        t = time.perf_counter()
        threads = threads_of(self.cfg.runtime.n_threads)
        checker = self.checkers.setdefault(pair.name, Checker(pair))
        for key, check in (("expected_acceptance", lambda: checker.check(row, ids, rt.samples_drafts, threads)),
                           ("output_check", lambda: checker.output(row, ids, threads))):
            try:
                row[key] = check()
            except Exception as e:  # noqa: BLE001 - the row is measured; say why it has no expectation
                row[key] = {"verdict": "unchecked", "why": _one_line(e)}
        self.info["acceptance_check_s"] = self.info.get("acceptance_check_s", 0.0) + time.perf_counter() - t

    def _evidence(self, rt: Runtime, ids: list[int], base_ids: list[int], g: Generation) -> Optional[dict]:
        """runtimes/evidence.py for a greedy mismatch, after the measurement; a failure here is noted,
        never a lost row."""
        try:
            return rt.mismatch_evidence(ids, base_ids, g)
        except Exception as e:  # noqa: BLE001 - the row is measured; say why it has no evidence
            return {"error": _one_line(e)}


@dataclass
class _Block:
    """Generations the runner measures together (runner._block)."""

    jobs: list = field(default_factory=list)  # (cell, mode, settings) not measured yet, in order
    warm: dict = field(default_factory=dict)  # (mode, draft policy, drafter) -> warm-up settings
    why: dict = field(default_factory=dict)  # the same keys -> why the runtime cannot run it, or None
    runnable: bool = False  # something of it can run
    start: Optional[GenerationSettings] = None  # the settings of its first speculative drafting (None: the baseline)

    @property
    def server(self) -> ServerSetting:
        """What start_setting is given for it."""
        return ServerSetting.of(self.start) if self.start is not None else ServerSetting.baseline()


def _cell_id(cell: tuple) -> tuple:
    s, n, p, rep = cell
    return s, n, p.id, rep


def _limits_or_why(n_threads: Optional[int]) -> dict:
    """machine_limits for run.json; a measurement that fails costs no run: {"unavailable": why}."""
    try:
        return machine_limits(n_threads)
    except (RuntimeError, MemoryError, OSError) as e:
        return {"unavailable": _one_line(e)}


def run(cfg: RunConfig) -> list[dict]:
    return Runner(cfg).run()


def _mismatch_flag(m: Optional[dict]) -> str:
    if not m or "verdict" not in m:
        return "  GREEDY MISMATCH"
    at = f"at token {m['position']} (top-2 margin {m['margin_one_token']:.3f}, passes differ by {m['max_abs_diff']:.3f})"
    return f"  SUSPECTED BUG: greedy output left the baseline {at}" if m["verdict"] == SUSPECTED_BUG else f"  near-tie flip {at}"


def _setting_line(tag, policy, gamma, drafter, temperature, pairs: list[tuple[dict, dict]]) -> str:
    """One setting's generations pooled: `[torch] g4 eagle3 T0: 5 generations, 87.5 -> 100.3 tok/s,
    1.15x, alpha_hat 0.53` (ratios of sums, as the report's); greedy mismatches counted."""
    base = [b for b, _ in pairs if b]
    spec = [s for _, s in pairs]
    drafting = f"g{gamma}" if policy.kind == "fixed" else f"{policy}" + (f" g{gamma}" if gamma else "")
    drafting += "" if drafter.kind == "model" else f" {drafter}"
    b_tps = metrics.tokens_per_s(sum(r["new_tokens"] for r in base), sum(r["wall_s"] for r in base),
                                 sum(r["prefill_s"] or 0.0 for r in base)) if base else None
    s_tps = metrics.tokens_per_s(sum(r["new_tokens"] for r in spec), sum(r["wall_s"] for r in spec),
                                 sum(r["prefill_s"] or 0.0 for r in spec))
    speedup = metrics.speedup(sum(r["wall_s"] for r in base), sum(r["new_tokens"] for r in base),
                              sum(r["wall_s"] for r in spec), sum(r["new_tokens"] for r in spec)) if base else None
    alpha = metrics.alpha_hat([rd for r in spec for rd in (r.get("rounds") or [])])
    off = [s for s in spec if s["greedy_match"] is False]
    bugs = sum(1 for s in off if (s.get("mismatch") or {}).get("verdict") == SUSPECTED_BUG)
    flag = "" if not off else f"; {len(off)} greedy mismatch(es)" + (f", {bugs} SUSPECTED BUG" if bugs else "")
    f = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    return (f"[{tag}] {drafting} T{temperature:g}: {len(spec)} generations, {f(b_tps, '.1f')} -> {f(s_tps, '.1f')} tok/s, "
            f"{f(speedup, '.2f')}x, alpha_hat {f(alpha, '.2f')}{flag}")


def _progress(tag, p, gen, b, s) -> str:
    """One generation's line: `[torch] factual-1 g4 eagle3 T0 r0: 87.5 -> 100.3 tok/s, 1.15x, alpha_hat 0.53`."""
    drafting = f"g{gen.gamma}" if gen.draft_policy.kind == "fixed" else \
        f"{gen.draft_policy}" + (f" g{gen.gamma_max}" if gen.gamma_max else "")
    drafting += "" if gen.drafter.kind == "model" else f" {gen.drafter}"
    drafting += f" forced alpha {','.join(f'{a:g}' for a in gen.forced)}" if gen.forced else ""
    where = f"[{tag}] {p.id} {drafting} T{gen.sampling.temperature:g} r{gen.seed}"
    if (b or {}).get("error") or s["error"]:
        return f"{where}: error: {(b or {}).get('error') or s['error']}"
    flag = "" if s["greedy_match"] in (None, True) else _mismatch_flag(s.get("mismatch"))
    speedup = "-" if s["speedup"] is None else f"{s['speedup']:.2f}x"
    base_tps = "-" if not b else f"{b['tokens_per_s']:.1f}"
    alpha = "-" if s["alpha_hat"] is None else f"{s['alpha_hat']:.2f}"
    return f"{where}: {base_tps} -> {s['tokens_per_s']:.1f} tok/s, {speedup}, alpha_hat {alpha}{flag}"
