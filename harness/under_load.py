"""The runner's scenario under load: every cell at a --concurrency N above 1 and every open-loop
cell (--request-rate R: requests sent on a schedule to servers of the load's slots), and the prices
of the batched cost model (reports/concurrency.py).

For each setting (baseline first, the server started for N sequences): warm-up requests outside
the cells, the engine's own batch prices where the runtime times them (`Runtime.prices_batches`:
vLLM), then per sampling and length one cell of every prompt `repeats_at(N)` times through N
closed-loop streams (the runtime's `generate_load`, runtimes/closed_loop.py), or at rate R the
rate's requests on their arrival times (runtimes/open_loop.py), one row per request. A
runtime that runs one sequence at a time is one skipped row per N. `batched_costs` is llama.cpp's
price of the same batches on the pair's GGUF files, measured before any runtime loads.
What it does not own: which settings and requests there are and which are measured already
(harness/runner.py plans them, `LoadSetting`), the rows' layout (harness/rows.py), or the client
(runtimes/closed_loop.py).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from spec_harness import runtimes
from spec_harness.core import drafters, metrics
from spec_harness.core.config import WARMUP_TOKENS, GenerationSettings, PairSpec
from spec_harness.core.errors import HarnessError
from spec_harness.core.results import write_run_json
from spec_harness.harness.console import fit
from spec_harness.harness.conversation import CannotAsk
from spec_harness.harness.rows import Measuring, log, one_line, skipped_line
from spec_harness.harness.run_config import BASELINE, Cell, Request, RunConfig, Setting
from spec_harness.runtimes import open_loop
from spec_harness.runtimes.server import ServerSetting


@dataclass
class LoadSetting:
    """One setting at one load level: its cells (each a list of client requests) with a request
    not measured yet. The level is its requests' own (GenerationSettings.concurrency)."""

    setting: Setting
    cells: list[list[Request]]

    @property
    def speculative(self) -> bool:
        return self.setting.speculative

    @property
    def first(self) -> GenerationSettings:
        """The settings of its first request (it has one: a setting without cells is not measured)."""
        return next(q.gen for cell in self.cells for q in cell)

    @property
    def n(self) -> int:
        """Its load level: the client streams at once (an open-loop load's: the servers' slots)."""
        return self.first.concurrency

    @property
    def level(self) -> str:
        """Its load level as the flag that asked for it."""
        return load_level(self.first)

    def start(self) -> ServerSetting:
        """What start_setting is given for it: its settings' server, or the baseline's for n sequences."""
        return ServerSetting.of(self.first) if self.speculative else ServerSetting.baseline(self.n)


@dataclass
class UnderLoad:
    """The runner's cells under load: where their rows and prices go."""

    cfg: RunConfig
    out: Path  # the run folder (run.json, errors.log)
    info: dict  # run.json's content, whose batched_costs the engine's own prices join
    emit: Callable[[dict], None]  # a row measured: written, and done for --resume
    advance: Callable[[int], None]  # rows accounted for on the progress bar
    check: Callable[[PairSpec, object, dict, list[int]], None]  # runtimes/expected.py for a row

    def refuse(self, m: Measuring, gen: GenerationSettings, rows: int) -> None:
        """A runtime that runs one sequence at a time: one skipped row, in settings `gen` at their
        load level, stands for the `rows` of that level."""
        why = (f"{m.name} runs one sequence at a time (--concurrency above 1 and --request-rate run on "
               f"{runtimes.listed(runtimes.able('serves_concurrently'))})")
        log(skipped_line(m.tag, load_level(gen), why))
        first = self.cfg.first_cell
        self.emit(m.row(BASELINE, first.prompt, first.repeat, gen, None, error=f"skipped: {why}"))
        self.advance(rows)

    def measure(self, m: Measuring, plan: list[LoadSetting]) -> None:
        """Every cell of `plan` (one load level), setting by setting in its order; a setting the
        runtime cannot run is one skipped row."""
        bases: dict[tuple, dict] = {}  # each (cell, arrivals)'s baseline row
        for i, load in enumerate(plan):
            if not load.cells:
                continue
            why = m.rt.supports(load.first) if load.speculative else None
            if why:
                log(skipped_line(m.tag, f"{load.level} --drafter {load.setting.drafter}", why))
                first = self.cfg.first_cell
                self.emit(m.row(load.setting.mode, first.prompt, first.repeat, load.first, None, error=f"skipped: {why}"))
                self.advance(sum(len(cell) for cell in load.cells))
                continue
            self._setting(m, load, [later.start() for later in plan[i + 1:] if later.cells], bases)
        requests = [q for load in plan for cell in load.cells for q in cell]
        if requests:
            level = "open-loop load" if requests[0].gen.arrivals else load_level(requests[0].gen)
            log(f"[{m.tag}] {level}: {len(requests)} requests measured")

    def _setting(self, m: Measuring, load: LoadSetting, upcoming: list, bases: dict) -> None:
        """One setting's server started for its n sequences, warmed up by n requests at once
        outside every cell, priced where the engine prices itself, then its cells."""
        first, spec, n = load.first, load.speculative, load.n
        ids = m.encoded[self.cfg.prompts[0].key]
        m.rt.start_setting(load.start(), upcoming)
        if self.cfg.warmup:
            warm = replace(first, max_new_tokens=min(WARMUP_TOKENS, first.max_new_tokens), arrivals=None)
            m.rt.generate_load([ids] * n, [warm] * n, spec)
        self.price_batches(m, first, spec)
        for reqs in load.cells:
            self._cell(m, reqs, bases)

    def price_batches(self, m: Measuring, gen: GenerationSettings, speculative: bool) -> None:
        """Under load, a server runtime that times its own engine (vLLM, whose float32 batches
        llama.cpp's quantized ones do not price) measures the batched cost model's inputs on the
        server of the setting about to be measured (`gen`, at its load level n; the baseline's
        unless `speculative`), outside every cell, into run.json's
        batched_costs[pair]["by_runtime"][runtime]: at the baseline's server the target's step of
        n x k tokens for k = 1 and each gamma + 1 (`batch_pass_s`, "target") and its decode step
        (`decode_step_s`, "step"); at a draft model's server its decode step, whose extra over the
        baseline's beyond the verify batch (v) is the draft's gamma passes ("draft", as seconds of
        one pass). Prompt lookup runs no model, and an EAGLE-3 head's round is priced from its own
        round at N = 1 (reports/concurrency.py): neither is priced here."""
        c, rt = self.cfg, m.rt
        if not rt.prices_batches or not c.server_loads:
            return
        own = self.info.setdefault("batched_costs", {}).setdefault(m.pair.name, {}).setdefault("by_runtime", {}) \
            .setdefault(m.name, {"how": "the engine's own steps, timed on its servers outside the cells"})
        ids = m.encoded[c.prompts[0].key]
        ids = (ids * (64 // max(len(ids), 1) + 1))[:64]
        n = gen.concurrency
        try:
            if not speculative:
                own.setdefault("target", {})[_at(n)] = rt.batch_pass_s(n, sorted({1, *(g + 1 for g in c.gammas)}), ids)
                own.setdefault("step", {})[_at(n)] = rt.decode_step_s(None, n, ids)
                return
            passes = {int(k): s for k, s in own.get("target", {}).get(_at(n), {}).items()}  # k tokens per sequence -> s
            base, g = own.get("step", {}).get(_at(n)), gen.gamma_max
            if gen.drafter.cost != drafters.DRAFT_MODEL or base is None or g + 1 not in passes:
                return
            v = passes[g + 1] / passes[1]  # the verify batch: a pass of n x (g + 1) tokens over one of n x 1
            per_gamma = max(rt.decode_step_s(gen, n, ids) / base - v, 0.0) / g
            own.setdefault("draft", {})[_at(n)] = {_at(1): per_gamma * passes[1]}
        except (RuntimeError, OSError) as e:  # a server that cannot price its batches (ServerError) costs no measurement
            own.setdefault("unavailable", {})[f"N{n} {gen.drafter if speculative else 'baseline'}"] = one_line(e)
        finally:
            write_run_json(self.out, self.info)

    def _cell(self, m: Measuring, reqs: list[Request], bases: dict) -> None:
        """One cell's requests (one setting, sampling and length at one load level) through
        rt.generate_load -> one row per request."""
        from spec_harness.runtimes.closed_loop import CLIENT_CPU_WARN

        mode, spec, n = reqs[0].setting.mode, reqs[0].setting.speculative, reqs[0].gen.concurrency
        gens = [q.gen for q in reqs]
        # the harness's clock: the cell's own (runtimes/closed_loop.py) starts a moment later, once the server's
        # counters are read; a request's started_at is t0 + its start on the cell's clock
        t0 = time.time()
        try:
            inputs = [m.ids(q.cell) for q in reqs]
        except CannotAsk as e:  # a later turn whose earlier answer is missing: the cell's rows say so
            inputs, cell, gs = [], None, [str(e)] * len(reqs)
        try:
            if inputs:
                cell, gs = m.rt.generate_load(inputs, gens, spec)
        except HarnessError:
            raise
        except Exception as e:  # the server died or answered nonsense: every request of the cell is an error row
            with open(self.out / "errors.log", "a") as f:
                f.write(f"[{m.name} {m.pair.name} {mode} concurrency {n}]\n{traceback.format_exc()}\n")
            cell, gs = None, [one_line(e)] * len(reqs)
        arrivals = gens[0].arrivals
        cell_id = f"{m.name}|{mode}|{gens[0].draft_policy if spec else '-'}|{gens[0].gamma_max if spec else '-'}|" \
                  f"{gens[0].drafter if spec else '-'}|T{gens[0].sampling.temperature:g}|{gens[0].max_new_tokens}|N{n}" \
                  + (f"|R{arrivals.rate:g}|B{arrivals.burstiness:g}" if arrivals else "")
        opened = open_loop.summary(cell, self.cfg.open_load.slo or None) if arrivals and cell is not None else None
        for i, (q, g, r) in enumerate(zip(reqs, gs, cell.requests if cell else [None] * len(reqs))):
            p, rep = q.cell.prompt, q.cell.repeat
            base = bases.get((q.cell, q.gen.arrivals)) if spec else None
            started = t0 + (r.start_s if r is not None else 0.0)
            if isinstance(g, str):
                row = m.row(mode, p, rep, q.gen, None, error=g, started_at=started)
            else:
                row = m.row(mode, p, rep, q.gen, g, baseline=base, started_at=started, prompt_tokens=len(inputs[i]))
                itl = r.inter_token_s()
                row.update(cell=cell_id, request_start_s=r.start_s, request_end_s=r.end_s, ttft_s=r.ttft_s,
                           itl_median_s=metrics.quantile(itl, 0.5), itl_p90_s=metrics.quantile(itl, 0.9),
                           planned_s=r.planned_s, lag_s=r.lag_s, tpot_s=open_loop.tpot_s(r) if arrivals else None)
                row["extra"] = {**(row.get("extra") or {}), "cell": {"wall_s": cell.wall_s, "client_cpu_s": cell.client_cpu_s,
                                                                      "requests": len(reqs), "concurrency": n,
                                                                      **({"open_loop": opened} if opened else {})}}
                self.check(m.pair, m.rt, row, inputs[i])
            if not spec:
                bases[(q.cell, q.gen.arrivals)] = row
            self.emit(row)
            self.advance(1)
        if cell is not None:
            agg = sum(len(r.tokens) for r in cell.requests) / cell.wall_s if cell.wall_s else 0.0
            log(fit(f"[{m.tag}] {cell_id.split('|', 1)[1].replace('|', ' ')}: {len(reqs)} requests, {agg:.1f} tok/s in all"
                    + (f"; {open_line(opened)}" if opened else "")))
            if cell.client_cpu_share > CLIENT_CPU_WARN:
                log(f"[{m.tag}] warning: the client took {100 * cell.client_cpu_share:.1f} % of a core over this cell "
                    f"(above {100 * CLIENT_CPU_WARN:.0f} %): it may be part of what was measured")


def batched_costs(cfg: RunConfig, pairs: list[PairSpec]) -> dict:
    """The batched cost model's inputs under load (reports/concurrency.py): per pair with GGUF
    files, llama.cpp's seconds for one pass of N sequences x k tokens, k = 1 and each gamma + 1,
    target and draft, at every N of the run (and 1; an open-loop load's slots too), before any runtime loads."""
    from spec_harness.runtimes.llama_common import batched_pass_s

    c = cfg
    ns = sorted({1, *c.concurrencies, *c.server_loads})
    ks = sorted({1, *(g + 1 for g in c.gammas)})
    out = {}
    for pair in pairs:
        if not (pair.target_gguf and pair.draft_gguf):
            continue
        log(f"measuring llama.cpp's batched passes of {pair.name} (N = {', '.join(map(str, ns))}; tokens {ks}) ...")
        try:
            out[pair.name] = {
                "target": {_at(n): {_at(k): batched_pass_s(pair.target_gguf, c.runtime, n, k) for k in ks} for n in ns},
                "draft": {_at(n): {_at(1): batched_pass_s(pair.draft_gguf, c.runtime, n, 1)} for n in ns},
                "depth": 64}
        except (RuntimeError, HarnessError, OSError) as e:
            out[pair.name] = {"unavailable": one_line(e)}
    return out


def load_level(gen: GenerationSettings) -> str:
    """A generation's load level as the flags that asked for it: `--concurrency 4`, or
    `--request-rate 2 (burstiness 1, 4 slots)`."""
    a = gen.arrivals
    if a is None:
        return f"--concurrency {gen.concurrency}"
    cap = f", at most {a.max_in_flight} in flight" if a.max_in_flight else ""
    return f"--request-rate {a.rate:g} (burstiness {a.burstiness:g}, {gen.concurrency} slots{cap})"


def open_line(s: dict) -> str:
    """An open-loop cell's summary (runtimes/open_loop.summary) in one progress line."""
    ms = lambda x: "-" if x is None else f"{1000 * x:.0f} ms"  # noqa: E731
    kept = "kept" if (s["lag_p99_s"] or 0) <= metrics.LAG_KEPT_S else "NOT kept (the client sent late)"
    good = f", goodput {s['goodput']:.2f} req/s" if "goodput" in s else ""
    return (f"{s['request_throughput']:.2f} req/s achieved, TTFT p90 {ms(s['ttft_p90_s'])}, TPOT p90 "
            f"{ms(s['tpot_p90_s'])}{good}; schedule {kept} (lag p99 {ms(s['lag_p99_s'])})")


def _at(x: int) -> str:
    """run.json's key of a load level N or a token count k in batched_costs ({"target": {N: {k:
    seconds}}, "draft": {N: {"1": seconds}}, "step": {N: seconds}}): JSON keys are text, N = 4 is "4"."""
    return str(x)
