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
reports (reports/), say what a run measures (harness/run_config.py), lay out a row or a console line
(harness/rows.py) or measure the cells under load (harness/under_load.py).
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Optional

from spec_harness import runtimes
from spec_harness.core.config import WARMUP_TOKENS, Arrivals, GenerationSettings, PairSpec, RuntimeSettings, SamplingParams
from spec_harness.core.errors import HarnessError, RuntimeUnavailable
from spec_harness.core.records import Generation
from spec_harness.core.results import ResultsWriter, open_out_dir, read_run_json, row_key, write_run_json
from spec_harness.harness.console import fit
from spec_harness.harness.conversation import CannotAsk
from spec_harness.harness.rows import (Measuring, generation_row, label_of, log, one_line, progress_line, setting_line,
                                       skipped_line)
from spec_harness.harness.run_config import (BASELINE, SPECULATIVE, Cell, Request, RunConfig, Setting, check_fits,
                                             limits_or_why, runs_forwards, runs_variants, target_variants)
from spec_harness.harness.under_load import LoadSetting, UnderLoad, batched_costs
from spec_harness.runtimes.server import ServerSetting

if TYPE_CHECKING:  # runtimes.base imports torch; the command line reads RunConfig's defaults without it
    from spec_harness.runtimes.base import Runtime

class _LoadFailed(Exception):
    """A runtime could not load the pair for a reason specific to it (its cause says why)."""


class Runner:
    """Runs a RunConfig into cfg.out; `run()` returns every row of the folder (old and new).

    `then(runner, name, pair, rt)`, when given, is called after each runtime and pair is measured,
    with the runtime still loaded and the other runtimes' servers still paused: harness tune
    measures its confirm run there. `lent` holds runtimes another runner loaded, (name, pair name,
    forward) -> Runtime: used instead of loading, and left open; `checkers` another runner's
    acceptance checks (pair name -> Checker), their models and cached passes shared, and kept."""

    def __init__(self, cfg: RunConfig, then: Optional[Callable[[Runner, str, PairSpec, Runtime], None]] = None,
                 lent: Optional[dict[tuple, Runtime]] = None, checkers: Optional[dict] = None):
        self.cfg = cfg
        self.then = then
        self.lent = lent or {}
        self.lent_checkers = checkers is not None
        self.checkers = {} if checkers is None else checkers  # pair name -> runtimes.expected.Checker
        self.out, existing = open_out_dir(cfg.out, cfg.resume)
        self.rows = existing
        self.done = {row_key(r): r for r in existing if not r.get("error")}
        self.variants = target_variants(cfg)  # pair name -> its target's variants (--target-quant), made now
        every = self._every_pair()
        self.labels = {p.name: label_of(p) for p in every}
        self.info = cfg.run_info(every, self.labels)
        if self.done:
            log(f"resuming {self.out}: {len(self.done)} rows already measured are kept")
            prior = read_run_json(self.out) or {}
            self.info["roofline"] = prior.get("roofline") or {}  # runtimes not loaded again
            if "batched_costs" in prior:  # measured once per run, the engines' own prices with it (price_batches)
                self.info["batched_costs"] = prior["batched_costs"]
        self.under_load = UnderLoad(cfg, self.out, self.info, self._emit, lambda k: self.bar.update(k), self._expected)

    def run(self) -> list[dict]:
        from tqdm import tqdm

        self.info["machine_limits"] = limits_or_why(self.cfg.runtime.n_threads)
        if self.cfg.server_loads and "batched_costs" not in self.info:
            self.info["batched_costs"] = batched_costs(self.cfg, self._every_pair())
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
            if not self.lent_checkers:
                self.checkers.clear()
            self.bar.close()
            self.writer.close()
        return self.rows

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
        if not runs_forwards(name):  # or not installed here: its turn says so
            return [None]
        from spec_harness.runtimes.pytorch import resolve_forward

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
        the servers of its first setting, so that their start (a vLLM engine's is long, mostly
        single-threaded imports) overlaps the loading of the runtimes before it; they are held
        paused while anything is measured (_measure). A runtime that cannot do so here is loaded
        again at its turn, where its reason becomes its row."""
        for name in reversed(self.cfg.runtimes[1:]):  # the last measured starts first: it may take longest (vLLM)
            rt = None
            pair = self._pairs_of(name)[0]
            try:
                if not runtimes.get(name).starts_early or not self._todo(name, pair):
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
            log(f"[{name}] loaded; its first servers start in the background, paused while anything is measured")

    def _emit(self, row: dict) -> None:
        self.writer.write(row)
        self.rows.append(row)
        if not row.get("error"):
            self.done[row_key(row)] = row

    def _request(self, name: str, pair: PairSpec, cell: Cell, setting: Setting, concurrency: int = 1,
                 arrivals: Optional[Arrivals] = None) -> Request:
        """One generation of runtime `name` on `pair` (at the forward now measured)."""
        return self.cfg.request(name, pair, self.forward, cell, setting, concurrency, arrivals)

    def _todo(self, name: str, pair: PairSpec) -> list[tuple]:
        """The row keys of this runtime and pair not measured yet."""
        c, o = self.cfg, self.cfg.open_load
        closed = [self._request(name, pair, cell, x, n) for n in c.concurrencies for cell in c.cells(n)
                  for x in c.settings_of(name)]
        opened = [self._request(name, pair, cell, x, o.slots, o.arrivals(r)) for r in o.rates
                  for cells in c.open_cells(r) for cell in cells for x in c.settings_of(name)]
        return [q.key for q in closed + opened if q.key not in self.done]

    def _runtime_pair(self, name: str, pair: PairSpec) -> None:
        todo = self._todo(name, pair)
        self.bar.update(self.cfg.rows_per_pair(name) - len(todo))
        if not todo:
            return
        rt = None
        label = self._label(name)
        tag = label if len(self.cfg.pairs) == 1 else f"{label} {pair.name}"
        if pair.target_quant and len(self.cfg.pairs) == 1:
            tag += f" @{pair.target_quant}"
        try:
            rt = self.lent.get((name, pair.name, self.forward)) or self.early.pop((name, pair.name), None) \
                or self._load(name, pair)
            self.info["runtimes"][label] = rt.describe()
            write_run_json(self.out, self.info)
            self._measure(name, pair, rt, tag)
        except (RuntimeUnavailable, _LoadFailed) as e:
            reason = one_line(e.__cause__) if isinstance(e, _LoadFailed) else str(e)
            log(skipped_line(tag, "", reason))
            self.info["runtimes"][label] = {"skipped": reason}
            write_run_json(self.out, self.info)
            first = self.cfg.first_cell
            self._emit(generation_row(pair, None, name, BASELINE, first.prompt, first.repeat,
                                      self.cfg.generation(first), None, error=f"skipped: {reason}", **self._row_kw(pair)))
            self.bar.update(len(todo))
        finally:
            if rt is not None and rt is not self.lent.get((name, pair.name, self.forward)):
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
        log(f"[{self._label(name)}] loading {pair.name} ...")
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
        encoded = {p.key: rt.encode(p.text) for p in c.prompts if p.turn == 1}  # a later turn's: Measuring.ids
        self._roofline_inputs(name, pair, encoded)
        check_fits(self.cfg, name, pair, rt, encoded)
        m = Measuring(name, pair, rt, tag, encoded, **self._row_kw(pair))
        blocks = self._blocks(name, pair, rt, m.bases) if 1 in c.concurrencies else []
        said: set[Setting] = set()  # the draftings whose skipped row is written
        try:
            for i, b in enumerate(blocks):
                upcoming = [later.server for later in blocks[i + 1:] if later.runnable]
                self._measure_block(m, b, upcoming, said)
            for n in (n for n in c.concurrencies if n > 1):
                self._measure_load(m, n)
            if c.open_load.rates:  # every rate of a setting on one server
                self._measure_load(m, c.open_load.slots, [c.open_load.arrivals(r) for r in c.open_load.rates])
            if self.then is not None:
                self.then(self, name, pair, rt)
        finally:
            for other in self.early.values():
                other.release()
            desc = self.info["runtimes"][self._label(name)] = rt.describe()  # with what measuring added (a server's starts)
            write_run_json(self.out, self.info)
            if "server_starts" in desc and rt not in self.lent.values():  # a lent one's runner says it
                starts = desc["server_starts"]
                log(fit(f"[{tag}] servers started: " + ", ".join(f"{k} {v}x" for k, v in starts.items())))

    def _blocks(self, name, pair, rt, bases) -> list["_Block"]:
        """The generations in the order they are measured: one block per setting for a runtime that
        runs one setting at a time (unless it keeps them all live for cfg.interleave), else one
        block of every cell."""
        settings = self.cfg.settings_of(name)
        whole = self._block(name, pair, rt, settings, bases)
        if rt.one_setting_at_a_time and not (self.cfg.interleave and rt.keep_live(whole.servers())):
            return [self._block(name, pair, rt, [x], bases) for x in settings]
        return [whole]

    def _block(self, name, pair, rt, settings, bases) -> "_Block":
        """What is left to measure of some settings over every cell, their warm-up settings (each
        drafting of the block once, at its first gamma) and why the runtime cannot run some."""
        c = self.cfg
        b = _Block()
        for cell in c.cells():
            for x in settings:
                req = self._request(name, pair, cell, x)
                if req.key not in self.done:
                    b.jobs.append(req)
                elif not x.speculative:
                    bases[cell] = self.done[req.key]
        for req in b.jobs:
            gen = req.gen
            b.warm.setdefault(_drafting(rt, req), replace(
                gen, max_new_tokens=min(WARMUP_TOKENS, gen.max_new_tokens), seed=c.seed, sampling=c.samplings[0]))
        b.why = {k: rt.supports(w) if k.speculative else None for k, w in b.warm.items()}
        b.start = next((k for k in b.warm if not b.why[k]), None)
        return b

    def _measure_block(self, m: Measuring, b: "_Block", upcoming: list, said: set) -> None:
        """Warm-up, then cell by cell, each cell's settings in turn. A runtime that runs one setting
        at a time is told first which setting comes now and which come next (start_setting).
        `said`: the draftings whose skipped row is written."""
        if not b.jobs:
            return
        self._warm_up(m, b, upcoming)
        measured: dict[_Pooled, list[tuple]] = {}  # per setting line: (baseline row, speculative row) of each generation
        for req in b.jobs:
            cell, setting, gen = req.cell, req.setting, req.gen
            how = _drafting(m.rt, req)
            if b.why.get(how):  # one row says so; the other cells of this drafting are not generated
                if how not in said:
                    said.add(how)
                    log(skipped_line(m.tag, f"--draft-policy {setting.policy} --drafter {setting.drafter}", b.why[how]))
                    self._emit(m.row(setting.mode, cell.prompt, cell.repeat, gen, None, error=f"skipped: {b.why[how]}"))
                self.bar.update(1)
                continue
            base = m.bases.get(cell)
            row = self._generate(m, req, base)
            if not setting.speculative:
                m.bases[cell] = row
            self._emit(row)
            self.bar.update(1)
            if setting.speculative and (self.cfg.verbose or row["error"] or (base or {}).get("error")):
                log(progress_line(m.tag, cell.prompt, gen, base, row))
            elif setting.speculative:
                pooled = _Pooled(replace(setting, forced=None), cell.sampling, cell.max_new_tokens)
                measured.setdefault(pooled, []).append((base, row))
            elif row["error"]:
                log(f"[{m.tag}] {cell.prompt.key} baseline rep {gen.seed}: error: {row['error']}")
        for k, pairs in measured.items():
            log(setting_line(m.tag, k.setting.policy, k.setting.gamma, k.setting.drafter, k.sampling.temperature, pairs))

    def _warm_up(self, m: Measuring, b: "_Block", upcoming: list) -> None:
        """A block's settings started (start_setting, when one setting at a time: an interleaved
        block's servers starts_together at a time, the first one's last, so it runs), each of its
        draftings generated --warmup times on the first prompt, and the engine's batches priced
        where it prices them. A runtime that cannot generate at all (a server that dies at once) is
        skipped (_LoadFailed); a setting whose server cannot start is one row saying why."""
        c, rt = self.cfg, m.rt
        runnable = [(k, w) for k, w in b.warm.items() if not b.why[k]]
        first = m.encoded[c.prompts[0].key]
        try:
            servers = b.servers() if rt.one_setting_at_a_time and b.runnable else []
            for i in reversed(range(0, len(servers), rt.starts_together)):  # each with the next; the first last: it runs
                rt.start_setting(servers[i], [*servers[i + 1:], *servers[:i], *upcoming])
            for _ in range(c.warmup):
                for k, w in runnable:
                    (rt.generate_speculative if k.speculative else rt.generate_baseline)(first, w)
            if rt.one_setting_at_a_time and b.runnable:
                self.under_load.price_batches(m, b.warm[b.start], b.start.speculative)
        except HarnessError:
            raise
        except Exception as e:
            if any(not req.setting.speculative for req in b.jobs):
                raise _LoadFailed(m.name) from e
            for k, _ in runnable:  # the run goes on
                b.why[k] = one_line(e)

    def _measure_load(self, m: Measuring, n: int, rates: Optional[list[Arrivals]] = None) -> None:
        """Every cell at concurrency n > 1, or of an open-loop load at each of `rates` on servers of
        n slots (harness/under_load.py); a runtime that runs one sequence at a time is one skipped row."""
        c = self.cfg
        if not m.rt.serves_concurrently:
            rows = sum(len(cells) for cells, _ in self._load_cells(n, rates)) * len(c.settings_of(m.name))
            self.under_load.refuse(m, c.generation(c.first_cell, concurrency=n, arrivals=(rates or [None])[0]), rows)
            return
        self.under_load.measure(m, self._load_plan(m, n, rates))

    def _load_cells(self, n: int, rates: Optional[list[Arrivals]]) -> list[tuple[list[Cell], Optional[Arrivals]]]:
        """The cells at concurrency n, or each rate's open-loop cells, with the arrivals of each."""
        if not rates:
            return [(cells, None) for cells in self.cfg.load_cells(n)]
        return [(cells, a) for a in rates for cells in self.cfg.open_cells(a.rate)]

    def _load_plan(self, m: Measuring, n: int, rates: Optional[list[Arrivals]] = None) -> list[LoadSetting]:
        """Per setting (baseline first) at concurrency n (or each open-loop rate in turn), its cells
        (per sampling and length: every prompt repeats_at(n) times, or the rate's requests) with a
        request not measured yet; a cell measured whole is kept (resume by cell)."""
        plan = []
        for x in self.cfg.settings_of(m.name):
            cells = []
            for load_cell, arrivals in self._load_cells(n, rates):
                reqs = [self._request(m.name, m.pair, cell, x, n, arrivals) for cell in load_cell]
                if any(q.key not in self.done for q in reqs):
                    cells.append(reqs)
                else:
                    self.bar.update(len(reqs))
            plan.append(LoadSetting(x, cells))
        return plan

    def _generate(self, m: Measuring, req: Request, baseline: Optional[dict]) -> dict:
        """One generation -> its row; a runtime's failure is an error row (and errors.log), bad
        input stops the run."""
        p, repeat, mode, gen = req.cell.prompt, req.cell.repeat, req.setting.mode, req.gen
        try:
            ids = m.ids(req.cell)
        except CannotAsk as e:  # a later turn without an earlier answer, or past the context
            return m.row(mode, p, repeat, gen, None, error=str(e))
        started = time.time()  # the harness's clock, just before the runtime's call
        try:
            g = m.rt.generate_speculative(ids, gen) if req.setting.speculative else m.rt.generate_baseline(ids, gen)
        except HarnessError:
            raise
        except Exception as e:  # out of memory, a library error: record it and go on
            with open(self.out / "errors.log", "a") as f:
                f.write(f"[{m.name} {m.pair.name} {mode} {p.key} repeat {repeat}]\n{traceback.format_exc()}\n")
            return m.row(mode, p, repeat, gen, None, error=one_line(e), started_at=started)
        row = m.row(mode, p, repeat, gen, g, baseline=baseline, started_at=started, prompt_tokens=len(ids))
        if row["greedy_match"] is False:
            row["mismatch"] = self._evidence(m.rt, ids, baseline["token_ids"], g)
        self._expected(m.pair, m.rt, row, ids)
        return row

    def _expected(self, pair: PairSpec, rt: Runtime, row: dict, ids: list[int]) -> None:
        """runtimes/expected.py for a row, after its measurement: what a speculative row's rule should
        have accepted with these models, and whether a sampled row's tokens are the target's samples
        (the pair loaded in torch once per run); a check that cannot run is noted in the row, never
        a lost row. Its time is run.json's `acceptance_check_s`."""
        from spec_harness.core.limits import threads_of
        from spec_harness.runtimes.expected import Checker

        if row.get("error") or self.cfg.forced or (row["mode"] != SPECULATIVE and not row.get("temperature")):
            return
        t = time.perf_counter()
        threads = threads_of(self.cfg.runtime.n_threads)
        checker = self.checkers.setdefault(pair.name, Checker(pair))
        for key, check in (("expected_acceptance", lambda: checker.check(row, ids, rt.samples_drafts, threads)),
                           ("output_check", lambda: checker.output(row, ids, threads))):
            try:
                row[key] = check()
            except Exception as e:  # noqa: BLE001 - the row is measured; say why it has no expectation
                row[key] = {"verdict": "unchecked", "why": one_line(e)}
        self.info["acceptance_check_s"] = self.info.get("acceptance_check_s", 0.0) + time.perf_counter() - t

    def _evidence(self, rt: Runtime, ids: list[int], base_ids: list[int], g: Generation) -> Optional[dict]:
        """runtimes/evidence.py for a greedy mismatch, after the measurement; a failure here is noted,
        never a lost row."""
        try:
            return rt.mismatch_evidence(ids, base_ids, g)
        except Exception as e:  # noqa: BLE001 - the row is measured; say why it has no evidence
            return {"error": one_line(e)}


@dataclass
class _Block:
    """Generations the runner measures together (runner._block)."""

    jobs: list[Request] = field(default_factory=list)  # not measured yet, in order
    warm: dict[Setting, GenerationSettings] = field(default_factory=dict)  # each drafting (_drafting) -> its warm-up settings
    why: dict[Setting, Optional[str]] = field(default_factory=dict)  # each drafting -> why the runtime cannot run it, or None
    start: Optional[Setting] = None  # its first drafting the runtime can run (None: none can)

    @property
    def runnable(self) -> bool:
        """Something of it can run."""
        return self.start is not None

    @property
    def server(self) -> ServerSetting:
        """What start_setting is given for it."""
        return self._server(self.start) if self.start is not None else ServerSetting.baseline()

    def servers(self) -> list[ServerSetting]:
        """The server of each drafting it can run, the first one's first (one setting's block: one)."""
        return list(dict.fromkeys(self._server(k) for k in self.warm if not self.why[k]))

    def _server(self, drafting: Setting) -> ServerSetting:
        return ServerSetting.of(self.warm[drafting]) if drafting.speculative else ServerSetting.baseline()


@dataclass(frozen=True)
class _Pooled:
    """The speculative generations of a block that one console line pools (setting_line): one
    setting (whatever its forced rates), sampling and length."""

    setting: Setting
    sampling: SamplingParams
    max_new_tokens: int


def _drafting(rt: "Runtime", req: Request) -> Setting:
    """What a block warms up once: a request's setting without its forced rates, with its gamma
    only where each gamma is a server of its own."""
    return replace(req.setting, forced=None, gamma=req.gen.gamma_max if rt.one_setting_at_a_time else None)


def run(cfg: RunConfig, then=None, lent: Optional[dict] = None, checkers: Optional[dict] = None) -> list[dict]:
    return Runner(cfg, then, lent, checkers).run()
