"""`harness tune`: what to run on this machine, predicted from measured costs, then confirmed.

Three steps, each a run folder under --out (resumable as a sweep):

    probe/        every runtime x drafter at gamma 1 (vLLM: 2, Runtime.tune_low_gamma) and at
                  gamma G (--max-gamma), the draft model also at MODEL_MID_GAMMA, fixed policy, at
                  each --concurrency N, with the baseline: what a round costs across the range
                  and the acceptance per draft position at G; where the runtime has confidence
                  stopping and drops the token it stopped at, the draft model at G stopping under
                  STOPPING_P: what stopping costs a round
    (prediction)  every candidate drafter x gamma 1..G x policy (fixed; confidence stopping at
                  CONFIDENCE_P where the runtime has it) per runtime, pair and N, from the probe alone
    confirm/NAME/ --confirm candidates of runtime NAME (the best of each drafter first: chosen) and
                  its baseline, measured side by side right after NAME's probe, while it is loaded;
                  none where every candidate is predicted below --rule-out (the probe rules
                  speculation out there)
    load/RUNTIME/ with --request-rate, the confirmed settings under it (harness/tune_load.py)
Both measure a server runtime's settings prompt by prompt where its servers fit in memory at once
(RunConfig.interleave), as the in-process runtimes are, so that a drift of the machine's speed
falls on every setting alike.

The model that predicts each candidate from the probe's cells is harness/tune_model.py; under load
each N has its own probe cells, so a choice at N rests on acceptance and costs measured at N.

The recommendation per runtime and N is the fastest *measured* setting of the confirm run, or
"do not speculate" (with explain's reason at the best candidate) when none beats the baseline
measured beside it or the probe ruled them all out; never a setting at an N where it was not
measured. tune.json holds every number; harness/tune_lines.py prints the recommendations in the
runtime's own terms (Runtime.library_command) and as the `harness run` line that reproduces it.

What it does not do: measure (harness/runner.py), decompose a cell (reports/explain.py) or lay
out the run reports (reports/).
"""

from __future__ import annotations

import itertools
import json
import textwrap
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from spec_harness.core import drafters, metrics
from spec_harness.core.config import DraftPolicy, DrafterSpec
from spec_harness.core.errors import HarnessError
from spec_harness.core.results import read_results
from spec_harness.harness import tune_load
from spec_harness.harness.open_load import OpenLoad
from spec_harness.harness.run_config import RunConfig, Setting
from spec_harness.harness.runner import run as run_grid
from spec_harness.harness.tune_model import STOPPING_P, Cell, fits
from spec_harness.reports import routing

DEFAULT_MAX_GAMMA = 6
DEFAULT_CONFIRM = 2  # candidates per runtime (and N) measured again beside the baseline
CONFIDENCE_P = (0.3, 0.5, 0.7)  # the confidence stopping thresholds tune predicts
PAYS = 1.0  # a measured speedup above this beats the baseline measured beside it
# a candidate predicted below this is not measured again: to pay it would need its prediction to be
# further off than a probe and a confirm run of one setting commonly differ (docs/findings.md)
RULED_OUT = 0.9
# the probe also measures the draft model at this gamma where it lies between the runtime's smaller
# gamma and G: the draft model's round is not a straight line in gamma there, so the line from
# gamma 1 to G alone prices it too cheap, where the EAGLE-3 head's and prompt lookup's rounds keep
# to the line (docs/findings.md)
MODEL_MID_GAMMA = 2
# a runtime whose baseline decoded one input (or one of about its length: SIMILAR_INPUT) this much
# faster in one run than in another during tune ran on a machine whose speed changed under it: a
# steady runtime's rate on one input varies less (docs/findings.md)
UNSTEADY = 1.4
# prompts whose inputs are within this ratio of each other in tokens decode at about one rate on a
# steady machine; further apart they are not compared (800 tokens decode 2-2.5x slower than 35)
SIMILAR_INPUT = 1.25


@dataclass
class TuneConfig:
    """The grid tune searches: `run` holds everything a run needs (runtimes, pairs, prompts,
    drafters, concurrencies, sampling, machine); tune sets its gammas and folders."""

    run: RunConfig
    max_gamma: int = DEFAULT_MAX_GAMMA
    confirm: int = DEFAULT_CONFIRM
    rule_out: float = RULED_OUT
    open_load: OpenLoad = field(default_factory=OpenLoad)  # the run's --request-rate: step 4's, not the probe's

    def __post_init__(self):
        if self.run.open_load.rates:
            self.open_load, self.run = tune_load.split(self.run)
        if self.max_gamma < 2:
            raise HarnessError(f"--max-gamma {self.max_gamma}: tune measures a smaller gamma and --max-gamma, so it must be at least 2")
        if self.confirm < 1:
            raise HarnessError(f"--confirm {self.confirm}: at least one candidate per runtime must be measured")
        if self.rule_out < 0:
            raise HarnessError(f"--rule-out {self.rule_out:g}: a predicted speedup, 0 or more (0: confirm whatever is predicted)")
        for p in self.run.draft_policies:
            if p.kind != "fixed":
                raise HarnessError(f"--draft-policy {p}: tune searches fixed draft lengths 1..--max-gamma")

    @property
    def out(self) -> Path:
        return self.run.out

    def probe(self) -> RunConfig:
        """Each drafter fixed at G and at the runtime's smaller probe gamma (RunConfig.also: 1, vLLM 2),
        the draft model also at MODEL_MID_GAMMA where that lies between them; where the runtime drops
        the token its confidence stopping stopped at (its pass paid, not proposed), also the draft
        model at G stopping under STOPPING_P: what stopping costs beyond a fixed round. Where it
        proposes that token (transformers), a stopped round is a fixed round of what it proposed,
        and no cell is needed."""
        from spec_harness import runtimes

        fixed = DraftPolicy.parse("fixed")
        stopping = Setting.drafting(DraftPolicy.parse(f"confidence:{STOPPING_P}"), self.max_gamma, drafters.default())
        also = {}
        for n in self.run.runtimes:
            cls = runtimes.get(n)
            also[n] = [Setting.drafting(fixed, self.low_gamma(n), d) for d in self.run.drafters]
            if self.low_gamma(n) < MODEL_MID_GAMMA < self.max_gamma and drafters.default() in self.run.drafters:
                also[n].append(Setting.drafting(fixed, MODEL_MID_GAMMA, drafters.default()))
            if "confidence" in cls.policies and not cls.confidence_keeps_stop and drafters.default() in self.run.drafters:
                also[n].append(stopping)
        return replace(self.run, gammas=[self.max_gamma], draft_policies=[fixed], also=also,
                       out=self.out / "probe", interleave=True)

    def low_gamma(self, name: str) -> int:
        """The smaller gamma the probe measures runtime `name` at (Runtime.tune_low_gamma, below G)."""
        from spec_harness import runtimes

        return min(runtimes.get(name).tune_low_gamma, self.max_gamma - 1)

    def low_gammas(self) -> str:
        """The probe's smaller gamma, for its progress line: "1", or "1 (vllm: 2)"."""
        lows = {n: self.low_gamma(n) for n in self.run.runtimes}
        if len(set(lows.values())) == 1:
            return str(next(iter(lows.values())))
        return "1 (" + ", ".join(f"{n}: {g}" for n, g in lows.items() if g != 1) + ")"


# ---------------------------------------------------------------- measured cells


def _rows(folder: Path) -> list[dict]:
    from spec_harness.reports.runs import results_files

    return [r for f in results_files(folder) for r in read_results(f)]


def _tau(rows: list[dict]) -> Optional[float]:
    rounds = sum(r.get("n_rounds") or 0 for r in rows)
    return sum(r["new_tokens"] for r in rows) / rounds if rounds else None


def _share(rounds: list[dict]) -> Optional[float]:
    return sum(1 for rd in rounds if rd["drafted"] > 0) / len(rounds) if rounds else None


def measured_cells(rows: list[dict]) -> list[Cell]:
    """Every cell of `rows`, baselines included: tokens/s (aggregate under load), the speedup
    over the same runtime's baseline at the same N, tau and the acceptance per position."""
    from spec_harness.reports.concurrency import cells as load_cells
    from spec_harness.reports.runs import by_drafting

    ok = by_drafting([{**r, "registry_name": r["runtime"]} for r in rows if not r.get("error")])
    view = {r["runtime"]: r for r in ok}  # a row of each view: its base label, registry name, forward
    out = []
    for rec in load_cells(ok, every_run=True):
        first = view[rec["runtime"]]
        base_label = first.get("runtime_name") or first["runtime"]
        speculative = rec["mode"] == "speculative"
        if not speculative and base_label != rec["runtime"]:
            continue  # a drafting view's copy of its runtime's baseline
        c = Cell(base_label, first["registry_name"], first.get("torch_forward"), rec["pair"], None, None, rec["concurrency"],
                 rec["aggregate_tps"], rec.get("speedup_aggregate") if speculative else 1.0)
        if speculative:
            spec = [r for r in ok if r["runtime"] == rec["runtime"] and r["mode"] == "speculative" and r["pair"] == rec["pair"]
                    and (r.get("concurrency") or 1) == rec["concurrency"] and r.get("gamma") == rec["gamma"]]
            rounds = [rd for r in spec for rd in (r.get("rounds") or [])]
            row = spec[0]  # the cell's drafter and policy are each of its rows'
            c.drafter = drafters.of(row["drafter"])  # the row's text parsed, once
            c.gamma, c.policy, c.view = rec["gamma"], row.get("draft_policy") or "fixed", rec["runtime"]
            top_k, c.keeps_stop = _confidence_reading(first["registry_name"])
            c.confidence_rounds = _confidence_rounds(spec, top_k)
            c.tau, c.alpha, c.share = _tau(spec), rec.get("alpha_hat"), _share(rounds)
            c.drafted = metrics.drafted_histogram(rounds, rec["gamma"])
            c.positions = metrics.per_position_acceptance(rounds, rec["gamma"])
        out.append(c)
    _reasons(ok, out)
    return out


def _reasons(rows: list[dict], cells: list[Cell]) -> None:
    """explain's sentence for every speculative cell at N = 1 (what costs it speed)."""
    from spec_harness.reports import explain

    by = {(e["runtime"], e["pair"], e["gamma"]): e for e in explain.explain([r for r in rows if metrics.one_at_a_time(r)])}
    for c in cells:
        e = by.get((c.view, c.pair, c.gamma)) if c.drafter and c.n == 1 else None
        if e:
            c.reason = e["verdict"]
            if e["o_base"] is not None and e["o"] is not None:
                c.empty_round = (1 + e["o"]) / (1 + e["o_base"])


def _confidence_reading(name: str) -> tuple[int, bool]:
    """How a runtime's confidence stopping reads the draft: over its top k (0: the whole
    vocabulary), and whether it proposes the token it stopped at."""
    from spec_harness import runtimes

    cls = runtimes.get(name) if name in runtimes.names() else None
    return (cls.confidence_top_k, cls.confidence_keeps_stop) if cls else (0, False)


def _confidence_rounds(spec: list[dict], top_k: int = 0) -> list[tuple[int, int, list[float]]]:
    """Each round's (drafted, accepted, top-1 probabilities at its tested positions) of the rows
    whose acceptance check recorded them, as the runtime reads them (over the whole vocabulary, or
    over the draft sampler's top_k); [] when some row has none."""
    out = []
    for r in spec:
        rec = (r.get("expected_acceptance") or {}).get("confidence")
        if not rec:
            return []
        at = {(x[0], x[1]): x[3] if top_k and len(x) > 3 else x[2] for x in rec}
        start = 0
        for rd in r.get("rounds") or []:
            confs = []
            while (start, len(confs) + 1) in at:
                confs.append(at[(start, len(confs) + 1)])
            out.append((rd["drafted"], rd["accepted"], confs))
            start += rd["emitted"]
    return out


# ---------------------------------------------------------------- the candidates


@dataclass
class Candidate:
    runtime: str
    name: str
    forward: Optional[str]
    pair: str
    drafter: DrafterSpec
    gamma: int
    n: int
    predicted: float  # speedup
    base_tps: Optional[float]
    measured: Optional[float] = None
    tokens_per_s: Optional[float] = None
    reason: Optional[str] = None
    policy: str = "fixed"

    def label(self) -> str:
        stop = DraftPolicy.parse(self.policy).confidence
        return f"{self.drafter} g={self.gamma}" + (f" p>={stop:g}" if stop is not None else "")


def candidates(cells: list[Cell], max_gamma: int) -> list[Candidate]:
    """Every drafter x gamma 1..max_gamma x policy (fixed; confidence stopping at CONFIDENCE_P
    where the runtime has it and the probe recorded the draft model's confidences) of every
    runtime and N, predicted, best first per runtime."""
    from spec_harness import runtimes

    base = {(c.runtime, c.pair, c.n): c.tokens_per_s for c in cells if c.drafter is None}
    out = []
    for (runtime, pair, drafter, _, n), fit in fits(cells).items():
        t = fit.top
        stops = [None] + (list(CONFIDENCE_P) if "confidence" in runtimes.get(t.name).policies else [])
        for g, p_min in itertools.product(range(1, max_gamma + 1), stops):
            s = fit.predict(g, p_min)
            if s is not None:
                out.append(Candidate(runtime, t.name, t.forward, pair, drafter, g, n, s, base.get((runtime, pair, n)),
                                     policy="fixed" if p_min is None else f"confidence:{p_min:g}"))
    return sorted(out, key=lambda c: (c.runtime, c.pair, c.n, -c.predicted))


def chosen(cands: list[Candidate], k: int, rule_out: float = RULED_OUT) -> dict[str, list[Candidate]]:
    """k candidates of each runtime, pair and N that the probe does not rule out (predicted at
    rule_out or above), grouped by runtime: the best of each drafter first, best drafter first, then
    the next best predicted. The candidates of one drafter rest on the same probe cells and
    share their error; another drafter's best is the hedge against a probe cell measured off.
    Where none is predicted to pay (below 1x), the best alone: whether speculation pays after all."""
    at: dict[tuple, list[Candidate]] = {}
    for c in cands:
        if c.predicted >= rule_out:
            at.setdefault((c.runtime, c.pair, c.n), []).append(c)
    out: dict[str, list[Candidate]] = {}
    for ok in at.values():
        ok.sort(key=lambda c: -c.predicted)
        firsts = [c for i, c in enumerate(ok) if all(d.drafter != c.drafter for d in ok[:i])]
        picked = (firsts + [c for c in ok if c not in firsts])[:k if ok[0].predicted >= 1.0 else 1]
        out.setdefault(ok[0].runtime, []).extend(sorted(picked, key=lambda c: -c.predicted))
    return out


# ---------------------------------------------------------------- the three steps


def _confirm_config(tc: TuneConfig, runtime: str, picks: list[Candidate]) -> RunConfig:
    """The confirm run of one runtime and pair (a --target-quant variant on its own): exactly the
    picked settings (RunConfig.only) and the baseline, into confirm/RUNTIME[ QUANT]/."""
    first = picks[0]
    only = sorted({Setting.drafting(c.policy, c.gamma, c.drafter) for c in picks},
                  key=lambda x: (str(x.drafter), x.gamma, str(x.policy)))
    quant = quant_of(first.pair)
    pairs = [p for p in tc.run.pairs if p.name == (first.pair.rpartition("@")[0] if quant else first.pair)]
    return replace(tc.run, runtimes=[first.name], pairs=pairs, target_quants=[quant] if quant else [],
                   gammas=sorted({c.gamma for c in picks}), drafters=sorted({c.drafter for c in picks}, key=str), only=only,
                   torch_forwards=[first.forward] if first.forward else tc.run.torch_forwards, interleave=True,
                   out=tc.out / "confirm" / _folder(runtime + (f" {quant}" if quant else "")))


def _folder(runtime: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in runtime).strip("_")


def _confirm(tc: TuneConfig, runtime: str, picks: list[Candidate], log: Callable[[str], None], lent=None,
             checkers=None) -> None:
    said = ", ".join(f"{c.label()}" + (f" N={c.n}" if c.n > 1 else "") + f" ({c.predicted:.2f}x)" for c in picks)
    log(textwrap.fill(f"tune 3/3: confirm {runtime} (predicted): {said}", 100, subsequent_indent="  "))
    run_grid(_confirm_config(tc, runtime, picks), lent=lent, checkers=checkers)


def tune(tc: TuneConfig, log: Callable[[str], None] = print) -> dict:
    """Probe, predict, confirm, recommend; writes tune.json into tc.out and returns its content.
    Each runtime's confirm run follows its probe while it is still loaded (its model, a server's
    engine process), the other runtimes' servers held paused as in any measurement."""
    t0 = time.perf_counter()
    mid = f", the draft model also at {MODEL_MID_GAMMA}" if any(tc.low_gamma(n) < MODEL_MID_GAMMA < tc.max_gamma for n in tc.run.runtimes) else ""
    log(textwrap.fill(f"tune 1/3: probe: gamma {tc.low_gammas()} and {tc.max_gamma} of each drafter{mid}, with the baseline"
                      f" -> {tc.out / 'probe'}", 100, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False))
    predicted: set[tuple[str, str]] = set()  # (runtime, pair) predicted (and confirmed) right after its probe
    confirm_s = 0.0

    def predict_and_confirm(cands: list[Candidate], lent=None, checkers=None) -> None:
        picks = chosen(cands, tc.confirm, tc.rule_out)
        log(f"tune 2/3: {_said(cands, picks)}")
        for runtime, ps in picks.items():
            _confirm(tc, runtime, ps, log, lent, checkers)
        predicted.update((c.runtime, c.pair) for c in cands)

    def confirm_now(runner, name, pair, rt) -> None:
        nonlocal confirm_s
        t = time.perf_counter()
        rows = [r for r in runner.rows if r["runtime"] == name and r["pair"] == pair.name
                and r.get("torch_forward") == runner.forward]
        predict_and_confirm(candidates(measured_cells(rows), tc.max_gamma), {(name, pair.name, runner.forward): rt},
                            runner.checkers)
        confirm_s += time.perf_counter() - t

    run_grid(tc.probe(), then=confirm_now)
    probe_rows = _rows(tc.out / "probe")
    probe = measured_cells(probe_rows)
    cands = candidates(probe, tc.max_gamma)
    if not cands:
        raise HarnessError(f"tune: the probe measured no speculative setting (see {tc.out / 'probe'}); nothing to predict from")
    for at in sorted({(c.runtime, c.pair) for c in cands} - predicted):  # a probe with nothing left to measure (--resume)
        predict_and_confirm([c for c in cands if (c.runtime, c.pair) == at])
    picks = chosen(cands, tc.confirm, tc.rule_out)
    confirm_rows = _rows(tc.out / "confirm") if picks else []
    confirmed = measured_cells(confirm_rows)
    _measure(picks, confirmed)
    recs = recommend(cands, picks, confirmed, probe, tc.rule_out)
    probe_s = time.perf_counter() - t0 - confirm_s
    load = tune_load.step(tc, recs, picks, _confirm_config, log) if tc.open_load.rates else []
    result = {"max_gamma": tc.max_gamma, "probe_s": probe_s, "total_s": time.perf_counter() - t0,
              "probe": [vars(c) for c in probe], "candidates": [vars(c) for c in cands],
              "confirmed": [vars(c) for ps in picks.values() for c in ps],
              "baselines": [vars(c) for c in confirmed if c.drafter is None],
              "recommendations": recs, "load": load,
              "unsteady": unsteady(probe_rows + confirm_rows),
              "per_task": [routing.sentence(r) for r in routing.routings(confirm_rows) if r.differs]}
    save(tc.out, result)
    return result


def _said(cands: list[Candidate], picks: dict[str, list[Candidate]]) -> str:
    """One runtime's predictions in a line: how many, and how many are confirmed or why none is."""
    if not cands:
        return "the probe measured no speculative setting here; nothing to predict from"
    n, best = sum(len(v) for v in picks.values()), max(cands, key=lambda c: c.predicted)
    return f"{best.runtime}: predicted {len(cands)} settings; " + (
        f"confirming {n}" if n else f"none measured again: the best, {best.label()}, is predicted at {best.predicted:.2f}x")


def save(out: Path, result: dict) -> None:
    (out / "tune.json").write_text(json.dumps(result, indent=1, default=str))


def _measure(picks: dict[str, list[Candidate]], confirmed: list[Cell]) -> None:
    by = {(c.runtime, c.pair, c.drafter, c.policy, c.gamma, c.n): c for c in confirmed}
    for ps in picks.values():
        for c in ps:
            m = by.get((c.runtime, c.pair, c.drafter, c.policy, c.gamma, c.n))
            if m is not None:
                c.measured, c.tokens_per_s, c.reason = m.speedup, m.tokens_per_s, m.reason


def unsteady(rows: list[dict]) -> list[dict]:
    """Each runtime (and pair) whose baseline decoded UNSTEADY times faster in one row than in
    another of the same input at N = 1, over the probe and confirm runs: the same prompt, turn and
    --input-len (the probe's and the confirm run's, or repeats) or prompts of about the same length
    (SIMILAR_INPUT). The machine's speed changed during tune, so a prediction made at one speed
    misses a measurement made at the other. Prompts of different lengths are not compared: a longer
    input decodes slower on a steady machine. -> [{"runtime", "pair", "low", "high", "prompts",
    "prompt_tokens"}], the two rows furthest apart (slower first)."""
    from spec_harness.reports.runs import by_drafting

    by: dict[tuple[str, str], list[dict]] = {}
    for r in by_drafting([r for r in rows if r["mode"] == "baseline" and not r.get("error") and r.get("tokens_per_s")
                          and metrics.one_at_a_time(r)]):  # named as the reports name it (torch [kernels])
        by.setdefault((r["runtime"], r["pair"]), []).append(r)
    out = []
    for (rt, pair), rs in sorted(by.items()):
        apart = _furthest_alike(rs)
        if apart and apart[1]["tokens_per_s"] >= UNSTEADY * apart[0]["tokens_per_s"]:
            slow, fast = apart
            out.append({"runtime": rt, "pair": pair, "low": slow["tokens_per_s"], "high": fast["tokens_per_s"],
                        "prompts": [_prompt_name(slow), _prompt_name(fast)],
                        "prompt_tokens": [slow.get("prompt_tokens"), fast.get("prompt_tokens")]})
    return out


def _furthest_alike(rows: list[dict]) -> Optional[tuple[dict, dict]]:
    """(slower, faster): the two baseline rows of one input (_alike) whose rates differ the most;
    None where no two rows are alike."""
    pairs = [sorted(ab, key=lambda r: r["tokens_per_s"]) for ab in itertools.combinations(rows, 2) if _alike(*ab)]
    return tuple(max(pairs, key=lambda ab: ab[1]["tokens_per_s"] / ab[0]["tokens_per_s"])) if pairs else None


def _input(row: dict) -> tuple:
    """The input a row answers: its prompt, turn (1 where not given) and --input-len (None: as given)."""
    return row.get("prompt_id"), row.get("turn") or 1, row.get("input_len")


def _alike(a: dict, b: dict) -> bool:
    """Two rows of the same input (_input), or of inputs within SIMILAR_INPUT of each other in
    tokens (rows written before `prompt_tokens` existed compare by input alone)."""
    if _input(a) == _input(b):
        return True
    na, nb = a.get("prompt_tokens"), b.get("prompt_tokens")
    return bool(na and nb) and max(na, nb) <= SIMILAR_INPUT * min(na, nb)


def _prompt_name(row: dict) -> str:
    """A row's input in words: its prompt id, its turn past the first, its --input-len ("f1 turn 2 at 1024")."""
    prompt, turn, length = _input(row)
    return f"{prompt}" + (f" turn {turn}" if turn > 1 else "") + (f" at {length}" if length else "")


def recommend(cands: list[Candidate], picks: dict[str, list[Candidate]], confirmed: list[Cell], probe: list[Cell],
              rule_out: float = RULED_OUT) -> list[dict]:
    """Per runtime and N: the fastest measured setting of the confirm run, a candidate or a
    baseline (of any target variant; the probe's baseline for a variant whose candidates were all
    ruled out); "do not speculate", with what cost the best candidate its speed, when a baseline is
    fastest, or when the probe ruled every candidate out (none is measured again)."""
    out = []
    for runtime, n in sorted({(c.runtime, c.n) for c in cands}):
        ps = [c for c in picks.get(runtime, []) if c.n == n]
        if not ps:
            out.append(_ruled_out([c for c in cands if c.runtime == runtime and c.n == n], probe, rule_out))
            continue
        ruled = {c.pair for c in cands if c.runtime == runtime and c.n == n} - {c.pair for c in ps}  # variants
        bases = [b for b in confirmed if b.runtime == runtime and b.n == n and b.drafter is None and b.tokens_per_s] + \
                [b for b in probe if b.runtime == runtime and b.n == n and b.drafter is None and b.tokens_per_s and b.pair in ruled]
        at = [c for c in ps if c.tokens_per_s is not None]
        if not at or not bases:
            out.append({"runtime": runtime, "name": ps[0].name, "forward": ps[0].forward, "n": n, "speculate": None,
                        "why": "the confirm run measured nothing here (its rows say why)"})
            continue
        best, base = max(at, key=lambda c: c.tokens_per_s), max(bases, key=lambda b: b.tokens_per_s)
        rec = {"runtime": runtime, "name": best.name, "forward": best.forward, "n": n, "base": vars(base),
               "best": vars(best), "speculate": best.tokens_per_s > base.tokens_per_s * PAYS}
        if not rec["speculate"]:
            rec["why"] = best.reason or f"its best candidate measured {best.measured:.2f}x its baseline"
        out.append(rec)
    return out


def _ruled_out(cands: list[Candidate], probe: list[Cell], rule_out: float) -> dict:
    """"Do not speculate" where no candidate is predicted at rule_out or above: the probe's
    baseline (the fastest variant's) and its best candidate, with explain's reason at the probe
    cell of the same drafter that measured fastest."""
    best = max(cands, key=lambda c: c.predicted)  # over every variant of the target
    at = [c for c in probe if c.runtime == best.runtime and c.n == best.n]
    base = max((c for c in at if c.drafter is None and c.tokens_per_s), key=lambda c: c.tokens_per_s, default=None)
    if base is None:
        return {"runtime": best.runtime, "name": best.name, "forward": best.forward, "n": best.n, "speculate": None,
                "why": "the probe measured no baseline here (its rows say why)"}
    cell = max((c for c in at if c.drafter == best.drafter and c.policy == "fixed" and c.speedup), key=lambda c: c.speedup,
               default=None)
    why = f"Every candidate is predicted below {rule_out:g}x, so none was measured again."
    return {"runtime": best.runtime, "name": best.name, "forward": best.forward, "n": best.n, "base": vars(base),
            "best": vars(best), "speculate": False, "why": why + (f" {cell.reason}" if cell and cell.reason else "")}


def quant_of(pair_name: str) -> Optional[str]:
    """The target quantization of a --target-quant variant ("PAIR@Q8_0" -> "Q8_0"), else None."""
    return pair_name.rpartition("@")[2] if "@" in pair_name else None
