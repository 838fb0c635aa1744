"""`harness report`: read results, build the tables, draw the plots, write everything into one folder.

Files written (all overwritten on each call): report.md (headline, tables, plots embedded),
summary.csv, categories.csv, positions.csv, histogram.csv, report.json (all tables, headline and
notes) and the PNG plots of plots.py. What it does not do: measure anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from harness.errors import HarnessError
from reports import markdown, plots, tables
from reports.ceiling import CFlops
from reports.load import REPORT_DIR, load

PLOTTERS = [("phases.png", plots.phases, "cells"), ("speedup_vs_gamma.png", plots.speedup_vs_gamma, "cells"),
            ("acceptance_vs_gamma.png", plots.acceptance_vs_gamma, "categories"),
            ("per_position.png", plots.per_position, "positions")]


def _notes(rows: list[dict], cells: list[dict], cflops: CFlops) -> list[str]:
    notes = [f"c_flops for pair {name}: {c:.4f} (2 x matmul weights per token, no attention term)"
             for name, c in cflops.found.items()]
    notes += cflops.notes
    spec = [c for c in cells if c["mode"] == "speculative"]
    notes += [f"{c['label']}: greedy speculative output differs from the baseline's (a correctness bug)"
              for c in spec if c["greedy_match"] is False]
    notes += [f"{c['label']}: no baseline rows with the same settings, so no speedup" for c in spec if c["speedup"] is None]
    notes += [f"{c['label']}: c measured unavailable (no per-round draft or target step times)"
              for c in spec if c["c_measured"] is None]
    notes += [f"error rows: {e}" for e in tables.errors(rows)]
    if spec:
        notes.append("Ceilings assume i.i.d. acceptance and a verify pass costing one target step; real acceptance "
                     "varies by position and content, so a measured speedup can exceed the c-FLOPs ceiling.")
    return notes


def _json_safe(records: list[dict]) -> list[dict]:
    return [{k: tables.clean(v) for k, v in r.items() if k != "pair_refs"} for r in records]


def write_report(dirs: list, out: Optional[Path] = None) -> Path:
    """Report of the results under `dirs` into `out` (default: first dir/report). -> report.md."""
    loaded = load([Path(d) for d in dirs])
    first = Path(dirs[0])
    out = Path(out) if out else (first.parent if first.is_file() else first) / REPORT_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HarnessError(f"cannot create report folder {out}: {e.strerror}") from None
    rows = loaded.rows
    cflops = CFlops()
    data = {"cells": tables.cells(rows), "categories": tables.categories(rows),
            "positions": tables.positions(rows), "histogram": tables.histogram(rows)}
    tables.add_theory(data["cells"], cflops)
    vary = tables.varying(data["cells"])
    for name in ("cells", "categories", "positions"):
        for r in data[name]:
            r["label"] = tables.label({"mode": "speculative", **r}, vary)
    notes = loaded.notes + _notes(rows, data["cells"], cflops)
    written = [name for name, draw, src in PLOTTERS if draw(data[src], out / name) is not None]
    sources = [str(s) for s in loaded.sources]
    (out / "report.md").write_text(markdown.document(data["cells"], data["categories"], written, notes, sources))
    for name, csv in (("cells", "summary.csv"), ("categories", "categories.csv"),
                      ("positions", "positions.csv"), ("histogram", "histogram.csv")):
        tables.frame(data[name]).to_csv(out / csv, index=False)
    doc = {"headline": markdown.headline(data["cells"]), "notes": notes, "sources": sources, "plots": written,
           **{k: _json_safe(v) for k, v in data.items()}}
    (out / "report.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False))
    return out / "report.md"
