"""Finding and reading results: every results.jsonl under the folders given (a run folder, or a
sweep folder holding run folders), each with the pair references of its run.json.

Each row gains `source` (its folder) and `pair_refs` (the target/draft paths or ids that
run.json names, or None), and its `drafter` text becomes the registered kind's value
(core/drafters/), parsed here once for every report. Rows are later pooled by pair *name*; when folders use one name for
different models (e.g. two "custom" pairs), the name gets "@folder" so they stay apart.
Forced-acceptance rows (`synthetic`: the rounds follow the theory, the tokens are not the
target's) are left out, with a note: they measure the machine, not the pair.
What it does not do: aggregate or compute anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from spec_harness.core import drafters
from spec_harness.core.errors import HarnessError
from spec_harness.core.results import RESULTS, RUN, read_results, read_run_json

REPORT_DIR = "report"


@dataclass
class Loaded:
    rows: list[dict]
    sources: list[Path]
    notes: list[str] = field(default_factory=list)


def results_files(folder: Path) -> list[Path]:
    """folder/results.jsonl, else every results.jsonl below it (report folders excluded).
    A results.jsonl file itself is accepted too."""
    folder = Path(folder)
    if folder.is_file() and folder.name == RESULTS:
        return [folder]
    if not folder.is_dir():
        raise HarnessError(f"no such results folder: {folder}")
    if (folder / RESULTS).is_file():
        return [folder / RESULTS]
    found = sorted(p for p in folder.rglob(RESULTS) if REPORT_DIR not in p.relative_to(folder).parts[:-1])
    if not found:
        raise HarnessError(f"no {RESULTS} in {folder} or below it: point at a folder written by `harness run --out`")
    return found


def pair_refs(run_dir: Path) -> Optional[dict[str, dict]]:
    """Pair name -> its refs ({name, target, draft, target_gguf, draft_gguf}) from run.json's
    configuration (a sweep may hold several pairs), or None when run.json is unreadable."""
    info = read_run_json(run_dir)
    if info is None:
        return None
    config = info.get("config") or {}
    if not isinstance(config, dict):
        return None
    pairs = config.get("pairs") or [config.get("pair")]
    return {p["name"]: p for p in pairs if isinstance(p, dict) and "name" in p} or None


def load(folders: list[Path], forced: bool = False) -> Loaded:
    """The rows of every results file under `folders`; forced-acceptance rows only when `forced`
    (harness calibrate), otherwise left out with a note."""
    rows, sources, notes = [], [], []
    for folder in folders:
        for f in results_files(folder):
            got = read_results(f)
            refs = pair_refs(f.parent)
            if refs is None:
                notes.append(f"{f.parent}: no readable {RUN}; c_flops cannot be computed for its rows")
            synthetic = [r for r in got if r.get("synthetic")]
            if synthetic and not forced:  # forced acceptance: rounds follow the theory, the tokens are not the target's
                notes.append(f"{f.parent}: {len(synthetic)} forced-acceptance rows (synthetic) left out")
                got = [r for r in got if not r.get("synthetic")]
            for r in got:
                r["source"] = str(f.parent)
                r["pair_refs"] = (refs or {}).get(r["pair"])
                r["drafter"] = drafters.of(r["drafter"]) if r.get("drafter") else None  # its text parsed, once
            rows += got
            sources.append(f.parent)
    if not rows:
        raise HarnessError(f"no result rows in {', '.join(map(str, sources))}")
    _separate_pair_names(rows)
    return Loaded(by_drafting(rows), sources, notes)


def drafting(row: dict) -> Optional[str]:
    """How a speculative row drafted, when not the default (fixed gamma, the draft model):
    e.g. `library-default`, `ngram:2,4`, `eagle3` (the pair's head; another head by its folder's
    name, `eagle3:NAME`: DrafterSpec.label); None otherwise."""
    drafter = drafters.of(row.get("drafter"))
    parts = [x for x, default in ((row.get("draft_policy"), "fixed"), (drafter.label(), str(drafters.default())))
             if x and x != default]
    return ", ".join(parts) or None


def by_drafting(rows: list[dict]) -> list[dict]:
    """Rows as the reports name their runtime: a runtime whose forward was a choice as
    "RUNTIME [FORWARD]" (torch [kernels]); speculative rows that drafted otherwise than by default
    (a draft policy other than `fixed`, a drafter other than the draft model) as a runtime of their
    own, "RUNTIME [HOW]" (torch [kernels, ngram]), with copies of that runtime's baseline rows, so
    every table, plot and explanation sets e.g. untuned llama-server, or prompt lookup, beside the
    same runtime at fixed gamma (under `library-default` its `gamma` is the draft length the library
    used at most). `runtime_name` is the runtime a view was made from, as run.json names it."""
    rows = [{**r, "runtime": f"{r['runtime']} [{r['torch_forward']}]"} if r.get("torch_forward") else r for r in rows]
    out, extra = [], []
    ways: dict[tuple, set] = {}
    for r in rows:
        how = drafting(r) if r.get("mode") == "speculative" else None
        if how:
            ways.setdefault((r["runtime"], r.get("source")), set()).add(how)
            r = {**r, "runtime": _view(r["runtime"], how), "runtime_name": r["runtime"]}
        out.append(r)
    for r in rows:
        if r.get("mode") == "baseline":
            for how in sorted(ways.get((r["runtime"], r.get("source")), ())):
                extra.append({**r, "runtime": _view(r["runtime"], how), "runtime_name": r["runtime"]})
    return out + extra


def _view(runtime: str, how: str) -> str:
    """`torch` + `ngram` -> `torch [ngram]`; `torch [kernels]` + `ngram` -> `torch [kernels, ngram]`."""
    return f"{runtime[:-1]}, {how}]" if runtime.endswith("]") else f"{runtime} [{how}]"


def _models(refs: Optional[dict]) -> tuple:
    return tuple((refs or {}).get(k) for k in ("target", "draft", "target_gguf", "draft_gguf"))


def _separate_pair_names(rows: list[dict]) -> None:
    models: dict[str, set] = {}
    for r in rows:
        models.setdefault(r["pair"], set()).add(_models(r["pair_refs"]))
    for r in rows:
        if len(models[r["pair"]]) > 1:
            at = f"@{Path(r['source']).name}"
            r["pair"], r["pair_label"] = r["pair"] + at, (r.get("pair_label") or r["pair"]) + at
