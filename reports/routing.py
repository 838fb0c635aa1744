"""An answer per task: where the best setting differs between prompt categories, conversation
turns or input lengths, which setting for which, and what routing each request to its group's
best setting gains over the one best setting for all of them.

For each runtime (its forward named, as the report's rows) and each grouping whose values vary
(`BY`: category, turn, input_len), over the cells (prompt, turn, input length, repeat, sampling,
length) where the baseline and every speculative setting were measured without error: each
setting's speedup per group (pooled wall per token, core.metrics.speedup, the definition of every
table); the best setting per group, "off" (the baseline) where no setting beats it; the single
best setting over every cell; and the routed speedup: the baseline's wall per token over the
routed choice's, pooled over every cell. The choice and its measure come from the same rows (in
sample): `harness tune` measures a routing again before it recommends it.
What it does not do: measure (harness/runner.py), word the verdict (verdict.py) or tune.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spec_harness.core import metrics

BY = ("category", "turn", "input_len")  # the groupings an answer per task may split by
OFF = "off"  # the baseline: no speculation
NAMED_GROUPS = 3  # up to this many groups each is named; above, the most common choice is "for the rest"


@dataclass(frozen=True)
class Routing:
    """One runtime's answer along one grouping."""

    runtime: str
    by: str  # a BY field
    best: dict  # group value -> its best setting (OFF for the baseline)
    speedups: dict  # group value -> {setting: speedup}
    single: str  # the best setting over every cell (OFF where none pays)
    single_speedup: float
    routed_speedup: float

    @property
    def differs(self) -> bool:
        """Whether groups have different best settings."""
        return len(set(self.best.values())) > 1


def setting_of(row: dict) -> str:
    """A speculative row's setting as the console names it: `eagle3 g2`, `ngram:3 g4`, `model g4 confidence:0.5`."""
    policy = row.get("draft_policy") or "fixed"
    return f"{row.get('drafter') or 'model'} g{row.get('gamma')}" + ("" if policy == "fixed" else f" {policy}")


def runtime_of(row: dict) -> str:
    """The runtime as the report names it without its drafter (reports.runs names a drafter's view
    of it `torch [kernels, ngram]` and keeps the name in `runtime_name`), its forward named."""
    name = row.get("runtime_name") or row["runtime"]
    return f"{name} [{row['torch_forward']}]" if row.get("torch_forward") and "[" not in name else name


def _cell(row: dict) -> tuple:
    return (row.get("pair"), row["prompt_id"], row.get("turn") or 1, row.get("input_len"), row.get("repeat"),
            row.get("temperature"), row.get("top_p"), row.get("max_new_tokens"), row.get("concurrency") or 1)


def _group(row: dict, by: str):
    return (row.get(by) or 1) if by == "turn" else row.get(by)


def routings(rows: list[dict]) -> list[Routing]:
    """A Routing per runtime and grouping whose values vary among that runtime's complete cells."""
    measured = [r for r in rows if not r.get("error") and not r.get("synthetic")
                and not (r.get("runtime_name") and r["mode"] == "baseline")]  # a drafter's view repeats its baselines
    out = []
    for name in dict.fromkeys(runtime_of(r) for r in measured):
        cells = _complete_cells([r for r in measured if runtime_of(r) == name])
        for by in BY:
            if len({_group(c[None], by) for c in cells.values()}) > 1:
                out.append(_routing(name, by, cells))
    return out


def _complete_cells(rows: list[dict]) -> dict[tuple, dict]:
    """Cell -> {None: its baseline row, setting: its speculative row}, only cells that hold the
    baseline and every setting measured anywhere for this runtime."""
    cells: dict[tuple, dict] = {}
    for r in rows:
        cells.setdefault(_cell(r), {})[None if r["mode"] == "baseline" else setting_of(r)] = r
    settings = {k for c in cells.values() for k in c if k is not None}
    return {k: c for k, c in cells.items() if None in c and settings <= set(c)}


def _speedup(cells: list[dict], choice: dict) -> Optional[float]:
    """Baseline wall per token over the chosen rows' (choice: group value -> setting or OFF), pooled."""
    chosen = [c[None] if choice[k] == OFF else c[choice[k]] for k, c in cells]
    base = [c[None] for _, c in cells]
    return metrics.speedup(sum(r["wall_s"] for r in base), sum(r["new_tokens"] for r in base),
                           sum(r["wall_s"] for r in chosen), sum(r["new_tokens"] for r in chosen))


def _routing(name: str, by: str, cells: dict[tuple, dict]) -> Routing:
    keyed = [(_group(c[None], by), c) for c in cells.values()]
    groups = list(dict.fromkeys(k for k, _ in keyed))
    settings = sorted({s for _, c in keyed for s in c if s is not None})
    speedups = {g: {s: _speedup([(k, c) for k, c in keyed if k == g], {g: s}) for s in settings} for g in groups}
    best = {g: _best(speedups[g]) for g in groups}
    overall = {s: _speedup(keyed, dict.fromkeys(groups, s)) for s in settings}
    single = _best(overall)
    return Routing(name, by, best, speedups, single, 1.0 if single == OFF else overall[single],
                   _speedup(keyed, best) or 1.0)


def _best(speedups: dict) -> str:
    """The setting of the highest speedup, OFF where none is above 1."""
    top = max(speedups, key=lambda s: speedups[s] or 0.0, default=None)
    return top if top is not None and (speedups[top] or 0.0) > 1 else OFF


COLS = [("runtime", "runtime", "s"), ("by", "by", "s"), ("group", "group", "s"), ("best", "best setting", "s"),
        ("best_speedup", "its speedup", ".2fx"), ("single", "one setting for all", "s"),
        ("single_speedup", "its speedup here", ".2fx")]
TEXT = ("Where the best setting differs between prompt categories, conversation turns or input lengths: each group's "
        "best setting (speculation off where none beats the baseline) beside the one best setting for every prompt, "
        "over the cells where the baseline and every setting were measured.")


def records(rs: list[Routing]) -> list[dict]:
    """A record per runtime, grouping and group of the routings that differ."""
    return [{"runtime": r.runtime, "by": r.by, "group": str(g), "best": s,
             "best_speedup": 1.0 if s == OFF else r.speedups[g][s], "single": r.single,
             "single_speedup": 1.0 if r.single == OFF else r.speedups[g][r.single]}
            for r in rs if r.differs for g, s in r.best.items()]


def sentence(r: Routing) -> str:
    """`Per category in torch [kernels]: ngram g4 for rag, summarization; eagle3 g2 for the rest; routed
    1.12x over every prompt against 1.04x for eagle3 g2 alone (in sample: ...)`; along the input
    length, speculation off from the first length where no setting pays on is said so."""
    name = {"category": "category", "turn": "turn", "input_len": "input length"}[r.by]
    return (f"Per {name} in {r.runtime}: {_choices(r)}; routed {r.routed_speedup:.2f}x over every prompt against "
            f"{r.single_speedup:.2f}x for {'no speculation' if r.single == OFF else r.single + ' alone'} "
            "(in sample: the same rows chose and measured it).")


def _choices(r: Routing) -> str:
    if r.by == "input_len":
        lengths = sorted(r.best)
        off_from = next((n for i, n in enumerate(lengths) if all(r.best[m] == OFF for m in lengths[i:])), None)
        if off_from is not None and off_from != lengths[0]:
            below = [f"{r.best[n]} at {n}" for n in lengths if n < off_from]
            return f"{', '.join(below)} input tokens; speculation off from {off_from} input tokens on"
    by_setting: dict[str, list] = {}
    for g, s in r.best.items():
        by_setting.setdefault(s, []).append(g)
    most = max(by_setting, key=lambda s: len(by_setting[s])) if len(r.best) > NAMED_GROUPS else None
    named = lambda s: "speculation off" if s == OFF else s  # noqa: E731
    parts = [f"{named(s)} for {', '.join(str(g) for g in sorted(gs, key=str))}" for s, gs in by_setting.items() if s != most]
    return "; ".join(parts + ([f"{named(most)} for the rest"] if most else []))
