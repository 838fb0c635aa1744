"""The report's tables: records (lists of dicts; frame() makes DataFrames) grouped with pandas.

A *cell* is one runtime under one set of settings (pair, device, dtype, temperature, top-p,
top-k, max_new_tokens) in one mode, speculative cells further split by gamma. Each speculative
cell is compared with the baseline rows of the same runtime and settings. Numbers come from
core.metrics (summarize, c_measured, per-position acceptance, ...) and core.theory;
this module only groups rows and lays the results out.

What it does not do: read files (load.py), draw (plots.py) or write text (markdown.py).
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import pandas as pd

from spec_harness.core import metrics, theory
from spec_harness.core.acceptance import pooled, pooled_outputs
from spec_harness.core.drafters import DrafterSpec
from spec_harness.core.results import rate_text
from spec_harness.core.timing import PHASE_FIELDS as PHASES  # prefill_s, draft_s, verify_s, sampling_s, unaccounted_s

SETTINGS = ["pair", "runtime", "device", "dtype", "temperature", "top_p", "top_k", "max_new_tokens", "concurrency",
            "input_len", "request_rate"]  # input_len: the length --input-len built the prompts to (None: as given);
# request_rate: an open-loop load's offered rate (None: closed loop)


def settings(row: dict) -> dict:
    """A record's settings columns, the pair's label for labels and plot titles, and the target's
    quantization (a variant's type, --target-quant; None for the target as given)."""
    return {**{k: row.get(k) for k in SETTINGS}, "pair_label": row.get("pair_label") or row.get("pair"),
            "target_quant": row.get("target_quant")}


def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r.get("error")]


def groups(rows: list[dict], keys: list[str]) -> list[list[dict]]:
    """Rows grouped by `keys` (None is a value like any other), in first-seen order."""
    if not rows:
        return []
    df = pd.DataFrame([{k: metrics.group_value(r, k) for k in keys} for r in rows]).astype(object)
    df = df.where(df.notna(), "\0none")  # group None/NaN together, never drop them
    idx = df.groupby(keys, sort=False, dropna=False).indices
    return [[rows[i] for i in sorted(ix)] for ix in idx.values()]


def _rounds(rows: list[dict]) -> list[dict]:
    return [rd for r in rows for rd in (r.get("rounds") or [])]


def _gammas(spec: list[dict]) -> list[int]:
    return sorted({r["gamma"] for r in spec})


def _phase_pcts(s: dict) -> dict:
    wall = s["wall_s"]
    return {f"{p[:-2]}_pct": (None if s[p] is None or not wall else 100 * s[p] / wall) for p in PHASES}


def cell_record(base: list[dict], spec: list[dict], gamma: Optional[int]) -> dict:
    """One table row: summarize() of the cell, its phase shares, and its measured cost ratios."""
    mode = "speculative" if spec else "baseline"
    s = next(x for x in metrics.summarize(base + spec) if x["mode"] == mode)
    first = (spec or base)[0]
    cell = settings(first)
    cell.update(mode=mode, gamma=gamma, n=s["n"], prompts=len({r["prompt_id"] for r in (spec or base)}),
                new_tokens=s["new_tokens"], wall_s=s["wall_s"])
    cell.update({p: s[p] for p in PHASES})
    cell.update(_phase_pcts(s))
    cell.update(tokens_per_s=s["tokens_per_s"], e2e_tokens_per_s=metrics.e2e_tokens_per_s(s["new_tokens"], s["wall_s"]))
    for k in ("speedup", "acceptance_rate", "alpha_hat", "mean_accepted_len", "mean_drafted", "greedy_match"):
        cell[k] = s.get(k)
    # SPEED-Bench's acceptance length per step (pooled over rounds: 1 + the sum of the marginals)
    # and per request (the mean of each generation's own)
    cell["acceptance_length"] = metrics.acceptance_length(_rounds(spec)) if spec else None
    per_request = [metrics.acceptance_length(r.get("rounds") or []) for r in spec]
    per_request = [x for x in per_request if x is not None]
    cell["acceptance_length_per_request"] = sum(per_request) / len(per_request) if per_request else None
    longest = metrics.positions(_rounds(spec), gamma)
    cell["drafted_histogram"] = metrics.drafted_histogram(_rounds(spec), longest) if spec and longest else None
    cell["drafted_text"] = " ".join(f"{d}:{n}" for d, n in reversed(list(enumerate(cell["drafted_histogram"]))) if n) \
        if cell["drafted_histogram"] else None  # "length:rounds", longest first
    # spread over generations (prompts x repeats): median and interquartile range
    for k in ("tokens_per_s", "speedup"):
        q1, med, q3 = metrics.quartiles(r.get(k) for r in (spec or base))
        cell[f"{k}_median"], cell[f"{k}_iqr"] = med, (None if med is None else q3 - q1)
    cell["c_measured"] = metrics.c_measured(_rounds(spec), _rounds(base)) if spec else None
    cell["verify_cost_ratio"] = metrics.verify_cost_ratio(_rounds(spec), _rounds(base)) if spec else None
    cell["costs_from"] = "round medians" if spec else None
    if spec and base and cell["c_measured"] is None:  # a runtime that times no round: the pooled phases
        k = metrics.step_costs(metrics.pooled(spec), metrics.pooled(base))
        if k["c"] is not None:
            cell.update(c_measured=k["c"], verify_cost_ratio=k["v"], costs_from="pooled phases")
    cell["pair_refs"] = first.get("pair_refs")
    cell["drafter"] = first.get("drafter") if spec else None  # whose c_flops (the draft model's, a head's)
    cell["draft_policy"] = first.get("draft_policy") if spec else None
    cell["torch_forward"] = first.get("torch_forward")
    cell["runtime_name"] = first.get("runtime_name") or first["runtime"]  # whose baseline (reports.runs.by_drafting)
    cell["acceptance_check"] = pooled_check(spec) if spec else None
    cell["output_check"] = pooled_outputs([r.get("output_check") for r in (spec or base)])
    return cell


def pooled_check(spec: list[dict]) -> Optional[dict]:
    """The cell's acceptance against what its models predict: its rows' `expected_acceptance`
    (runtimes/expected.py) pooled; None where no row was checked."""
    return pooled([r.get("expected_acceptance") for r in spec])


def cell_groups(rows: list[dict]) -> list[tuple[list[dict], list[dict], Optional[int]]]:
    """(baseline rows, speculative rows, gamma) of every cell, in table order; a baseline cell
    has no speculative rows and gamma None, a speculative cell carries its baseline's rows."""
    out = []
    for group in groups(_ok(rows), SETTINGS):
        base = [r for r in group if r["mode"] == "baseline"]
        spec = [r for r in group if r["mode"] == "speculative"]
        if base:
            out.append((base, [], None))
        out += [(base, [r for r in spec if r["gamma"] == g], g) for g in _gammas(spec)]
    return out


def cells(rows: list[dict]) -> list[dict]:
    """Baseline and speculative (per gamma) cells of every runtime and settings, each once: a view
    (reports.runs.by_drafting, e.g. "torch [eagle3]") has no baseline cell of its own, its
    speculative cells name the runtime whose baseline they use in `runtime_name`."""
    return [cell_record(base, spec, g) for base, spec, g in cell_groups(rows)
            if spec or not any("runtime_name" in r for r in base)]


def add_theory(cells_: list[dict], c_flops_for: Callable[[Optional[dict]], Optional[float]]) -> None:
    """Leviathan's ceiling per speculative cell, with c from FLOPs and with c measured.

    alpha is alpha_hat (Leviathan's alpha, unbiased by rounds that stop early). The gap is the
    measured-c ceiling minus the measured speedup: what the formula does not model (verify
    batches costing more than one step, sampling, orchestration).
    """
    for c in cells_:
        c["c_flops"] = c_flops_for(c["pair_refs"], c.get("drafter")) if c["mode"] == "speculative" else None
        a, g = c["alpha_hat"], c["gamma"]
        ready = c["mode"] == "speculative" and a is not None
        for col, cost in (("theory_speedup_flops", c["c_flops"]), ("theory_speedup_measured", c["c_measured"])):
            c[col] = theory.expected_speedup(a, g, cost) if ready and cost is not None else None
        ceiling, got = c["theory_speedup_measured"], c["speedup"]
        c["ceiling_gap"] = ceiling - got if ceiling is not None and got is not None else None
        c["ceiling_fraction"] = got / ceiling if ceiling and got is not None else None
        c["best_gamma_measured"] = theory.optimal_gamma(a, c["c_measured"]) if ready and c["c_measured"] is not None else None


def categories(rows: list[dict]) -> list[dict]:
    """Acceptance and speedup per prompt category, for every speculative cell (cell by cell)."""
    return split_by(rows, "category")


def split_by(rows: list[dict], key: str) -> list[dict]:
    """Acceptance and speedup of every speculative cell split by a row field (`category`, `turn`):
    per value, the cell's speculative rows of that value against its baseline rows of that value,
    pooled by core.metrics.summarize (the speedup: baseline wall per token / speculative wall per
    token over those rows, as every cell's). A value with no baseline rows has no speedup."""
    out = []
    for group in groups(_ok(rows), SETTINGS):
        spec = [r for r in group if r["mode"] == "speculative"]
        for g in _gammas(spec):
            for part in groups([r for r in group if r["mode"] == "baseline" or r["gamma"] == g], [key]):
                if not any(r["mode"] == "speculative" for r in part):
                    continue
                s = next(x for x in metrics.summarize(part) if x["mode"] == "speculative")
                row = settings(part[0])
                row.update({key: part[0][key]}, gamma=g, n=s["n"], acceptance_rate=s["acceptance_rate"],
                           alpha_hat=s["alpha_hat"], mean_accepted_len=s["mean_accepted_len"], speedup=s["speedup"])
                out.append(row)
    return out


def turn(row: dict) -> int:
    """A row's turn of a multi-turn conversation (1-based); rows written before the field existed,
    and single-turn prompts, are turn 1."""
    return row.get("turn") or 1


def positions(rows: list[dict]) -> list[dict]:
    """Per-position acceptance both ways, long form: one row per (speculative cell, draft
    position): conditional (`acceptance`: accepted at i given 1..i-1 accepted) and marginal
    (accepted at i over every drafting round)."""
    out = []
    for group, g, rounds in _spec_rounds(rows):
        both = zip(metrics.per_position_acceptance(rounds, g), metrics.per_position_marginal(rounds, g))
        for i, (rate, marginal) in enumerate(both, start=1):
            out.append({**settings(group[0]), "gamma": g, "position": i, "acceptance": rate, "marginal": marginal})
    return out


def histogram(rows: list[dict]) -> list[dict]:
    """Rounds that accepted 0..gamma drafts, long form: one row per (speculative cell, count)."""
    out = []
    for group, g, rounds in _spec_rounds(rows):
        for k, n in enumerate(metrics.accept_histogram(rounds, g)):
            out.append({**settings(group[0]), "gamma": g, "accepted": k, "rounds": n})
    return out


def drafted(rows: list[dict]) -> list[dict]:
    """Rounds that drafted 0..gamma tokens, long form: one row per (speculative cell, length)."""
    out = []
    for group, g, rounds in _spec_rounds(rows):
        for k, n in enumerate(metrics.drafted_histogram(rounds, metrics.positions(rounds, g))):
            out.append({**settings(group[0]), "gamma": g, "drafted": k, "rounds": n})
    return out


def spec_cells(rows: list[dict]) -> list[list[dict]]:
    """The measured speculative rows of each speculative cell (runtime as reports.runs.by_drafting
    names it, settings and gamma: the Acceptance table's cells), in table order."""
    return groups([r for r in _ok(rows) if r["mode"] == "speculative"], SETTINGS + ["gamma"])


def _spec_rounds(rows: list[dict]):
    for group in spec_cells(rows):
        yield group, group[0]["gamma"], _rounds(group)


def verify_rules(rows: list[dict]) -> list[str]:
    """The acceptance tests (verify_rule) of the measured speculative rows, sorted."""
    return sorted({r.get("verify_rule") for r in rows if r.get("mode") == "speculative" and not r.get("error")} - {None})


def errors(rows: list[dict]) -> list[str]:
    """Distinct error lines, one per runtime and message."""
    seen = dict.fromkeys(f"{r['runtime']} ({r['mode']}): {r['error']}" for r in rows if r.get("error"))
    return list(seen)


def frame(records: list[dict], drop: tuple = ("pair_refs",)) -> pd.DataFrame:
    """Records -> DataFrame for CSV/JSON, without the internal columns."""
    df = pd.DataFrame(records)
    return df.drop(columns=[c for c in drop if c in df.columns])


def clean(v):
    """NaN -> None, a drafter -> its text (the rows' own), for JSON."""
    if isinstance(v, DrafterSpec):
        return str(v)
    return None if isinstance(v, float) and math.isnan(v) else v


_SHOW = {"temperature": "T={}", "top_p": "top-p {}", "top_k": "top-k {}", "max_new_tokens": "{} tok", "concurrency": "N={}",
         "input_len": "input {}"}


def _base_pair(rec: dict) -> str:
    """The pair a record's target variant was made of ("tiny@Q8_0" -> "tiny")."""
    quant, pair = rec.get("target_quant"), str(rec.get("pair"))
    return pair.replace(f"@{quant}", "", 1) if quant else pair


def varying(records: list[dict]) -> list[str]:
    """Settings (other than runtime) that differ between records: the ones labels must name; where
    the pairs differ only by their target's quantization (--target-quant), that quantization."""
    out = [k for k in SETTINGS if k != "runtime" and len({str(r.get(k)) for r in records}) > 1]
    if "pair" in out and len({_base_pair(r) for r in records}) == 1:
        out[out.index("pair")] = "target_quant"
    return out


def settings_label(rec: dict, vary: list[str]) -> str:
    """The varying settings of a record, e.g. "T=0.7 · top-p 0.9" ("" when nothing varies); a pair
    by its label (models.info.pair_label) where the rows carry one."""
    return " · ".join(_show(rec, k) for k in vary)


def _show(rec: dict, k: str) -> str:
    if k == "pair":
        return str(rec.get("pair_label") or rec.get(k))
    if k == "request_rate":
        return "closed loop" if rec.get(k) is None else f"{rate_text(rec[k])} req/s"
    if k == "target_quant":
        return f"@{rec[k]}" if rec.get(k) else "target as given"
    return _SHOW.get(k, "{}").format(rec.get(k))


def label(rec: dict, vary: list[str], mode: bool = True) -> str:
    """A short human label: runtime, mode and gamma, and whatever settings vary."""
    parts = [str(rec["runtime"])]
    if mode:
        parts.append("baseline" if rec.get("mode") == "baseline" else f"spec γ={rec.get('gamma')}")
    rest = settings_label(rec, vary)
    return " · ".join(parts + ([rest] if rest else []))
