"""The report's "Acceptance and speedup per turn" section and turns.csv: for every speculative cell
(the Acceptance table's: runtime as reports.runs.by_drafting names it, settings and gamma), its
acceptance and speedup in each turn of multi-turn conversations (the rows' `turn`, 1-based, e.g.
MT-Bench's two; tables.turn counts a row without it as turn 1).

A turn's speedup sets the cell's speculative rows of that turn against its baseline rows of that
turn, as the per-category table does per category (tables.split_by, the same definition as every
cell's speedup), so turn 1 and turn 2 of one prompt are never set against each other. report.md
shows the section only where the rows hold more than one turn; turns.csv is written always.
What it does not do: define a rate (core/metrics.py), label a cell (build.py, tables.label) or
lay out the report (sections.py, markdown.py).
"""

from __future__ import annotations

from spec_harness.reports import tables

COLS = [("label", "cell", "s"), ("turn", "turn", ""), ("n", "gens", ""), ("acceptance_rate", "accepted/drafted", ".3f"),
        ("alpha_hat", "alpha_hat", ".3f"), ("mean_accepted_len", "tokens/round", ".2f"), ("speedup", "speedup", ".2fx")]
TEXT = (
    "Each turn of the multi-turn prompts apart (turn 2 answers with turn 1's exchange in its context): a turn's "
    "speedup is the baseline wall per token over its speculative wall per token, both over that turn's rows of the "
    "cell, as in the Speed table.")


def with_turns(rows: list[dict]) -> list[dict]:
    """The rows, each with its `turn` (1 where the row has none)."""
    return [{**r, "turn": tables.turn(r)} for r in rows]


def several(rows: list[dict]) -> bool:
    """Whether the measured rows hold more than one turn."""
    return len({tables.turn(r) for r in rows if not r.get("error")}) > 1


def records(rows: list[dict]) -> list[dict]:
    """A record per speculative cell and turn: cells in table order, each one's turns ascending."""
    out = tables.split_by(with_turns(rows), "turn")
    first: dict[tuple, int] = {}
    for i, r in enumerate(out):
        first.setdefault(_cell(r), i)
    return sorted(out, key=lambda r: (first[_cell(r)], r["turn"]))


def _cell(rec: dict) -> tuple:
    """A record's cell: its settings and gamma."""
    return tuple(str(rec.get(k)) for k in tables.SETTINGS + ["gamma"])
