"""`harness report`: read results, build the tables, draw the plots, write everything into one folder.

The report is a list of reports/sections.py's Section, made here in report order (`sections`):
each names its heading, text, table and the CSV its records go to; report.md is the list rendered,
the CSVs and report.json's tables are the records of the sections that name a CSV, so a new table
is one new Section in the list. A section report.md does not show (`when` false) still writes its
CSV (histogram.csv, drafted.csv; figures.csv with one run folder; output_thirds.csv with no
generation long enough, turns.csv with one turn, input_lengths.csv without --input-len).

Files written (all overwritten on each call): report.md (the verdict of reports/verdict.py and
verdict.png first, then the tables, the explain section, plots embedded), report.html (the same,
one self-contained page: reports/html.py), trace.json (the timeline of reports/trace.py), summary.csv,
categories.csv, positions.csv, histogram.csv (accepted per round), drafted.csv (drafted per round),
output_thirds.csv (acceptance in each third of long outputs, thirds.py), turns.csv (acceptance and
speedup per turn of a conversation, turns.py), input_lengths.csv (costs, acceptance and speedups
per --input-len length, and where speculation stops paying: input_tiers.py), routing.csv (the best
setting per category, turn or input length beside the one best: routing.py), acceptance.csv (each cell against what its models
predict), quantization.csv (per runtime and target variant, where a run has several:
quantization.py), figures.csv (each run folder's figures), mismatches.csv (greedy mismatches and
their evidence), agreement.csv (greedy baselines across runtimes), under_load.csv
(reports/concurrency.py), explain.csv, roofline.csv (each step against this machine's limits,
roofline.py), report.json (all tables, the verdict, headline, explanations, the roofline and notes)
and the PNG plots of plots.py, verdict.png and waterfall.png included.
`harness explain` writes explain.csv, explain.json and waterfall.png only (its text ends with the
roofline of the same cells). What it does not do: measure anything, or word a section (markdown.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from spec_harness.core.errors import HarnessError
from spec_harness.core.results import read_run_json
from spec_harness.reports import (concurrency, explain, input_tiers, markdown, mismatch, open_loop, plots, quantization,
                                  routing, tables, thirds, turns, verdict)
from spec_harness.reports.ceiling import CFlops
from spec_harness.reports.figures import run_figures
from spec_harness.reports.html import write_html
from spec_harness.reports.trace import write_trace
from spec_harness.reports.runs import REPORT_DIR, drafting, load
from spec_harness.reports.roofline import Roofline, limits_line, roofline
from spec_harness.reports.sections import Section, csv_tables, render

WATERFALL = "waterfall.png"
CONCURRENCY_PNG = "speedup_vs_concurrency.png"
OPEN_LOOP_PNG = "open_loop_vs_rate.png"


def _batched_costs(sources) -> dict:
    """run.json's batched pass costs (harness/runner.py) of every run folder, by pair; the engines'
    own prices (by_runtime) of every folder kept together."""
    out: dict = {}
    for s in sources:
        folder = Path(s) if Path(s).is_dir() else Path(s).parent
        for pair, costs in ((read_run_json(folder) or {}).get("batched_costs") or {}).items():
            by_runtime = {**out.get(pair, {}).get("by_runtime", {}), **costs.get("by_runtime", {})}
            out[pair] = {**out.get(pair, {}), **costs} | ({"by_runtime": by_runtime} if by_runtime else {})
    return out

PLOTTERS = [("phases.png", plots.phases, "cells"), ("speedup_vs_gamma.png", plots.speedup_vs_gamma, "cells"),
            ("acceptance_vs_gamma.png", plots.acceptance_vs_gamma, "categories"),
            ("per_position.png", plots.per_position, "positions")]


def _notes(rows: list[dict], cells: list[dict], cflops: CFlops) -> list[str]:
    notes = [f"c_flops for pair {name}: {c:.4f} (2 x matmul weights per token, no attention term)"
             for name, c in cflops.found.items()]
    notes += cflops.notes
    spec = [c for c in cells if c["mode"] == "speculative"]
    for c in spec:
        if c["greedy_match"] is False:
            same = [r for r in rows if all(str(r.get(k)) == str(c.get(k)) for k in tables.SETTINGS + ["gamma"])
                    and r["mode"] == "speculative"]
            notes += [f"{c['label']}: {line.removeprefix(c['runtime'] + ': ')}" for line in mismatch.runtime_lines(same, c["runtime"])]
    notes += [f"{c['label']}: no baseline rows with the same settings, so no speedup" for c in spec if c["speedup"] is None]
    notes += [f"{c['label']}: c measured unavailable (no draft or target step times)"
              for c in spec if c["c_measured"] is None]
    notes += [f"{c['label']}: c and verify cost from pooled phases (draft_s / drafted, verify_s / rounds over the "
              "baseline's verify_s / tokens), not round medians: this runtime times no round"
              for c in spec if c.get("costs_from") == "pooled phases"]
    notes += [f"error rows: {e}" for e in tables.errors(rows)]
    rules = tables.verify_rules(rows)
    if len(rules) > 1:
        notes.append(f"The runtimes accept drafts by different rules ({', '.join(rules)}; the rows' verify_rule): "
                     "greedy-match at temperature 0 is one rule for all, but at temperature > 0 Leviathan's ratio test "
                     "and sample-match accept at different rates, so their alpha_hat are not comparable.")
    if spec:
        notes.append("Ceilings assume i.i.d. acceptance and a verify pass costing one target step; real acceptance "
                     "varies by position and content, so a measured speedup can exceed the c-FLOPs ceiling.")
    if any(r.get("mode") == "speculative" and drafting(r) for r in rows):
        notes.append(VARIABLE_LENGTHS)
    return notes


VARIABLE_LENGTHS = (
    "Rounds of different lengths (the cells named RUNTIME [policy or drafter]): Leviathan's formula assumes every round "
    "drafts gamma tokens, each accepted i.i.d. with alpha. It still prices exactly what such rounds cost once the mean "
    "drafted length per round (drafted/round) replaces gamma, as the explain waterfall does, and Eq. 1 averaged over the "
    "rounds' lengths gives their tokens per round under i.i.d. acceptance. It cannot predict the lengths themselves, nor "
    "that they correlate with acceptance: confidence stopping cuts a round where the draft is unsure, which is also where "
    "it tends to be wrong, so alpha_hat over the positions drafted rises above the fixed-gamma one; the heuristic schedule "
    "follows recent acceptance; prompt lookup drafts only where the context repeats (c near 0, acceptance high or "
    "nothing). The ceiling columns of such cells evaluate the formula at gamma = the most drafts per round: an upper "
    "reference, not a prediction.")


def _json_safe(records: list[dict]) -> list[dict]:
    return [{k: tables.clean(v) for k, v in r.items() if k != "pair_refs"} for r in records]


@dataclass(frozen=True, kw_only=True)
class Parts:
    """What the report's sections are made of: the tables by report.json key (cells, categories,
    positions, histogram, drafted, output_thirds, turns, input_lengths, roofline, figures, mismatches, agreement,
    under_load, open_loop, acceptance, quantization), the plots drawn, and the text other modules wrote."""

    tables: dict
    plots: list[str]
    notes: list[str]
    sources: list[str]
    verdict: dict  # reports/verdict.build's
    explanations: list[dict]  # reports/explain.py's, and its comparisons
    comparisons: list[str]
    explain_lines: list[str]  # the explain section of report.md
    roofline: Roofline
    under_load_png: Optional[str]
    open_loop_png: Optional[str]
    tune: Optional[list[str]]  # what `harness tune` printed, where the first folder is a tune's
    turns: bool  # whether the rows hold more than one turn of a conversation (reports/turns.py)
    input_lengths: bool  # whether the rows were built to more than one --input-len (reports/input_tiers.py)
    routing: list[str]  # a sentence per runtime and grouping whose best setting differs (reports/routing.py)


def write_report(dirs: list, out: Optional[Path] = None) -> Path:
    """Report of the results under `dirs` into `out` (default: first dir/report). -> report.md."""
    loaded = load([Path(d) for d in dirs])
    out = _out_dir(dirs, out)
    p = _parts(loaded, out, _tune_lines(dirs))
    listed = sections(p)
    (out / "report.md").write_text(render(listed))
    kept = csv_tables(listed)
    for csv, records in kept.values():
        tables.frame(records).to_csv(out / csv, index=False)
    doc = {"verdict": verdict.record(p.verdict), "headline": markdown.headline(p.tables["cells"]), "notes": p.notes,
           "sources": p.sources, "plots": p.plots, **{k: _json_safe(records) for k, (_, records) in kept.items()},
           "explain": p.explanations, "explain_comparisons": p.comparisons, "roofline_notes": p.roofline.notes,
           "machine_limits": p.roofline.limits}
    (out / "report.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False))
    write_html(out / "report.md")
    write_trace(list(dirs), out / "trace.json")
    return out / "report.md"


def _parts(loaded, out: Path, tune: Optional[list[str]]) -> Parts:
    """The tables of `loaded` (reports.runs'), their plots drawn into `out`, explain.csv written."""
    rows = loaded.rows
    cflops = CFlops()
    data = {"cells": tables.cells(rows), "categories": tables.categories(rows),
            "positions": tables.positions(rows), "histogram": tables.histogram(rows), "drafted": tables.drafted(rows),
            "output_thirds": thirds.records(rows), "turns": turns.records(rows),
            "input_lengths": input_tiers.records(rows)}  # labelled there: its cells span the lengths
    routes = routing.routings(rows)
    data["routing"] = routing.records(routes)
    tables.add_theory(data["cells"], cflops)
    vary = tables.varying(data["cells"])
    for name in ("cells", "categories", "positions", "output_thirds", "turns"):
        for r in data[name]:
            r["label"] = tables.label({"mode": "speculative", **r}, vary)
    notes = loaded.notes + _notes(rows, data["cells"], cflops)
    written = [name for name, draw, src in PLOTTERS if draw(data[src], out / name) is not None]
    expls, comparisons, lines, _ = _explain(rows, out)
    roof = roofline(rows)
    data["roofline"] = roof.records
    data["figures"] = run_figures(rows)
    measured = [r for r in rows if "runtime_name" not in r]  # each row once (load.by_drafting adds views)
    data["mismatches"], data["agreement"] = mismatch.mismatch_table(measured), mismatch.agreement(measured)
    data["under_load"] = concurrency.cells(rows, _batched_costs(loaded.sources))
    data["acceptance"] = markdown.acceptance_records(data["cells"])
    data["quantization"] = quantization.records(rows)
    png = concurrency.plot(data["under_load"], out / CONCURRENCY_PNG)
    data["open_loop"] = open_loop.records(rows)
    open_loop.predict(data["open_loop"], rows, _batched_costs(loaded.sources))
    open_png = open_loop.plot(data["open_loop"], out / OPEN_LOOP_PNG)
    if open_png is None:
        (out / OPEN_LOOP_PNG).unlink(missing_ok=True)
    v = verdict.build(rows)
    if plots.verdict(v, out / markdown.VERDICT_PNG) is not None:
        written.append(markdown.VERDICT_PNG)
    else:
        (out / markdown.VERDICT_PNG).unlink(missing_ok=True)
    return Parts(tables=data, plots=written, notes=notes, sources=[str(s) for s in loaded.sources], verdict=v,
                 explanations=expls, comparisons=comparisons, explain_lines=lines, roofline=roof,
                 under_load_png=png and CONCURRENCY_PNG, open_loop_png=open_png and OPEN_LOOP_PNG, tune=tune, turns=turns.several(rows),
                 input_lengths=input_tiers.present(rows), routing=[routing.sentence(r) for r in routes if r.differs])


def sections(p: Parts) -> list[Section]:
    """report.md's sections in order, then the tables only the CSVs and report.json keep."""
    return _opening(p) + _cell_sections(p) + _other_sections(p) + _closing(p)


def _opening(p: Parts) -> list[Section]:
    """The title, the verdict, what `harness tune` printed."""
    v = verdict.markdown(p.verdict)
    return [Section(text=markdown.opening(p.tables["cells"])),
            Section("Verdict", text=markdown.verdict_text(v, p.plots), when=bool(v)),
            Section("Tune: what to run here", text=markdown.tune_text(p.tune or []), when=bool(p.tune))]


def _cell_sections(p: Parts) -> list[Section]:
    """Speed, target quantization, acceptance, ceiling and time of each cell."""
    t = p.tables
    cells, positions, checked = t["cells"], t["positions"], t["acceptance"]
    spec = [c for c in cells if c["mode"] == "speculative"]
    return [
        Section("Speed", text=markdown.bullets(markdown.headline(cells)), rows=markdown.against(cells),
                columns=markdown.SPEED_COLS, after=[markdown.SPEED_TEXT], records=cells, csv="summary.csv", key="cells"),
        Section(lines=quantization.markdown(t["quantization"]), records=t["quantization"], csv="quantization.csv"),
        Section("Acceptance", rows=spec, columns=markdown.ACCEPTANCE_COLS, after=[markdown.ACCEPTANCE_TEXT], when=bool(spec)),
        Section(rows=positions, columns=markdown.POSITION_COLS, csv="positions.csv", when=bool(spec and positions)),
        Section("Acceptance against the models", text=[markdown.MODELS_TEXT], rows=checked, columns=markdown.MODELS_COLS,
                csv="acceptance.csv", when=bool(spec and checked)),
        Section("Ceiling", rows=spec, columns=markdown.CEILING_COLS, after=[markdown.CEILING_TEXT], when=bool(spec)),
        Section("Where the time goes", rows=markdown.phase_texts(cells), columns=markdown.PHASE_COLS),
    ]


def _other_sections(p: Parts) -> list[Section]:
    """Under load, per category, along the output, per turn, per run folder, greedy outputs,
    explain, the machine's limits."""
    t = p.tables
    under_load, categories, figures, mismatches, agreement = (
        t[k] for k in ("under_load", "categories", "figures", "mismatches", "agreement"))
    return [
        Section(lines=concurrency.markdown(under_load, p.under_load_png), records=under_load, csv="under_load.csv"),
        Section(lines=open_loop.markdown(t["open_loop"], p.open_loop_png), records=t["open_loop"], csv="open_loop.csv"),
        Section("Acceptance per prompt category", rows=categories, columns=markdown.CATEGORY_COLS, csv="categories.csv",
                when=bool(categories)),
        Section("Acceptance along the output", text=[thirds.TEXT], rows=t["output_thirds"], columns=thirds.COLS,
                csv="output_thirds.csv", when=bool(t["output_thirds"])),
        Section("Acceptance and speedup per turn", text=[turns.TEXT], rows=t["turns"], columns=turns.COLS, csv="turns.csv",
                when=p.turns and bool(t["turns"])),
        Section("An answer per task", text=[routing.TEXT, *markdown.bullets(p.routing)], rows=t["routing"],
                columns=routing.COLS, csv="routing.csv", when=bool(p.routing)),
        Section("Input length", text=[input_tiers.TEXT], rows=t["input_lengths"], columns=input_tiers.COLS,
                after=input_tiers.lines(t["input_lengths"]), csv="input_lengths.csv",
                when=p.input_lengths and bool(t["input_lengths"])),
        Section("Each run folder", rows=figures, columns=markdown.FIGURE_COLS, csv="figures.csv",
                when=bool(figures) and len(p.sources) > 1),
        Section("Greedy mismatches", text=[markdown.MISMATCH_TEXT], rows=mismatches, columns=markdown.MISMATCH_COLS,
                csv="mismatches.csv", when=bool(mismatches)),
        Section("Greedy baselines across runtimes", text=markdown.bullets(mismatch.agreement_lines(agreement)),
                rows=agreement, columns=markdown.AGREEMENT_COLS, csv="agreement.csv", when=bool(agreement)),
        Section(lines=p.explain_lines),
        Section(lines=_roofline_lines(p.roofline), records=p.roofline.records, csv="roofline.csv"),
    ]


def _closing(p: Parts) -> list[Section]:
    """The plots, what was skipped, the notes and the sources; then histogram.csv and drafted.csv,
    which report.md does not show."""
    skipped = _skipped(p.verdict)
    return [Section("Plots", text=markdown.plot_text(p.plots)),
            Section("Skipped", rows=skipped, columns=markdown.SKIPPED_COLS, when=bool(skipped)),
            Section("Notes", text=markdown.bullets(p.notes), when=bool(p.notes)),
            Section(text=[markdown.sources_line(p.sources)]),
            Section(records=p.tables["histogram"], csv="histogram.csv", when=False),
            Section(records=p.tables["drafted"], csv="drafted.csv", when=False)]


def _tune_lines(dirs: list) -> Optional[list[str]]:
    """What `harness tune` printed, when the first folder is a tune's (its tune.json)."""
    f = Path(dirs[0]) / "tune.json"
    try:
        return json.loads(f.read_text()).get("console") if f.is_file() else None
    except (OSError, ValueError):
        return None


def _skipped(v: dict) -> list[dict]:
    """What did not run, for the report's "Skipped" section: skipped runtimes and draftings, and errors."""
    return [{"runtime": s["runtime"], "what": "skipped" if s["skipped"] else "error", "reason": s["reason"]} for s in v["skipped"]]


def _roofline_lines(roof) -> list[str]:
    """The markdown section of a reports.roofline.Roofline."""
    return markdown.roofline_section(roof.records, roof.notes, [limits_line(s, x) for s, x in roof.limits.items()])


def _out_dir(dirs: list, out: Optional[Path]) -> Path:
    first = Path(dirs[0])
    out = Path(out) if out else (first.parent if first.is_file() else first) / REPORT_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HarnessError(f"cannot create report folder {out}: {e.strerror}") from None
    return out


def _explain(rows: list[dict], out: Path) -> tuple[list[dict], list[str], list[str], Optional[Path]]:
    """Explanations, comparisons, the markdown section and the waterfall PNG (None when no cell
    could be decomposed; a stale one is removed); writes explain.csv."""
    expls = explain.explain(rows)
    comparisons = explain.compare(expls)
    png = plots.waterfall(expls, out / WATERFALL)
    if png is None:
        (out / WATERFALL).unlink(missing_ok=True)
    lines = markdown.explain_section(expls, comparisons, png and png.name) if expls else []
    tables.frame([_flat(e) for e in expls], drop=()).to_csv(out / "explain.csv", index=False)
    return expls, comparisons, lines, png


def _flat(e: dict) -> dict:
    """One CSV row: inputs, each factor and level, what-if."""
    row = {k: v for k, v in e.items() if k not in ("factors", "residual_parts", "what_if", "v_points")}
    for f in e["factors"]:
        row[f"factor_{f['key']}"], row[f"level_{f['key']}"] = f["factor"], f["level"]
    row.update({f"residual_{k}": v for k, v in (e["residual_parts"] or {}).items()})
    row.update(e["what_if"] or {})
    return row


def write_calibration(run_dir: Path, pair_run: Optional[Path] = None) -> tuple[Path, list[str]]:
    """`harness calibrate`'s report of the forced-acceptance rows in run_dir (reports/calibration.py):
    calibration.md, calibration.csv and a PNG per runtime in run_dir/report; pair_run: a normal run
    folder whose alpha_hat places the pair on the curves. -> (calibration.md, the verdicts)."""
    from spec_harness.reports import calibration

    rows = load([Path(run_dir)], forced=True).rows
    pair_rows = load([Path(pair_run)]).rows if pair_run else None
    es = calibration.entries(rows, CFlops(), pair_rows)
    if not es:
        raise HarnessError(f"no forced-acceptance rows with a baseline in {run_dir}: nothing to calibrate")
    out = _out_dir([run_dir], None)
    pngs = []
    for runtime in dict.fromkeys(e["runtime"] for e in es):
        name = "calibration-" + re.sub(r"[^\w.,:+-]+", "_", runtime).strip("_") + ".png"
        if calibration.plot([e for e in es if e["runtime"] == runtime], out / name):
            pngs.append(name)
    (out / "calibration.md").write_text(calibration.markdown(es, pngs))
    flat = [{k: (v if k != "points" else " ".join(f"{a:g}:{s:.3f}" for a, s in v)) for k, v in e.items() if k != "costs"}
            for e in es]
    tables.frame(flat, drop=()).to_csv(out / "calibration.csv", index=False)
    return out / "calibration.md", [calibration.verdict(e) for e in es]


def write_explain(dirs: list, out: Optional[Path] = None) -> tuple[str, Optional[Path]]:
    """`harness explain`: the explain section as text, and the waterfall PNG (in `out`, default
    first dir/report, with explain.csv and explain.json)."""
    rows = load([Path(d) for d in dirs]).rows
    if not any(r["mode"] == "speculative" and not r.get("error") for r in rows):
        raise HarnessError("no successful speculative rows to explain: explain needs speculative and baseline rows of a runtime")
    out = _out_dir(dirs, out)
    expls, comparisons, lines, png = _explain(rows, out)
    roof = roofline(rows)
    loaded_sources = [Path(d) for d in dirs]
    lines += concurrency.regime_lines(concurrency.cells(rows, _batched_costs(loaded_sources)))
    (out / "explain.json").write_text(json.dumps({"explain": expls, "comparisons": comparisons, "roofline": _json_safe(roof.records),
                                                 "roofline_notes": roof.notes}, indent=2, ensure_ascii=False, allow_nan=False))
    return "\n".join(lines + _roofline_lines(roof)), png
