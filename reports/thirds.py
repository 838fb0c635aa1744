"""The report's "Acceptance along the output" section and output_thirds.csv: for every speculative
cell (the Acceptance table's: runtime as reports.runs.by_drafting names it, settings and gamma),
acceptance in the first, middle and last third of each generation's output, to show whether a
draft model or an EAGLE-3 head fades late in long answers.

A round belongs to the third of the output where its first emitted token falls: its start is the
tokens the rounds before it emitted, its third floor(3 x start / new_tokens). Only generations of
at least MIN_ROUNDS rounds count: in a shorter one a third holds a round or two, and its rate says
little. The rates over a third's rounds are core.metrics' (acceptance_rate, alpha_hat,
mean_accepted_len), pooled over the cell's counted generations.

Not to be confused with the per-position table (tables.positions): that is acceptance by draft
position inside a round; this is by where the round falls in the output.
What it does not do: define a rate (core/metrics.py), label a cell (build.py, tables.label) or
lay out the report (sections.py, markdown.py).
"""

from __future__ import annotations

from spec_harness.core import metrics
from spec_harness.reports import tables

MIN_ROUNDS = 12  # the fewest rounds a generation needs to count: four a third
THIRDS = ("first", "middle", "last")

COLS = [("label", "cell", "s"), ("third", "third of the output", "s"), ("gens", "gens", ""), ("rounds", "rounds", ""),
        ("acceptance_rate", "accepted/drafted", ".3f"), ("alpha_hat", "alpha_hat", ".3f"),
        ("mean_accepted_len", "tokens/round", ".2f"), ("alpha_change", "alpha_hat vs first third", "+.3f")]
TEXT = (
    "Acceptance by where in the output a round falls: each generation's rounds split into the first, middle and last "
    "third of its generated tokens, a round by the position of its first emitted token (not the per-position table "
    f"under Acceptance, which is by draft position inside a round). Only generations of at least {MIN_ROUNDS} rounds "
    "count (gens): with fewer, a third holds a round or two and its rate is noise. The rates pool the counted "
    "generations' rounds of each third; an alpha_hat lower in the last third than in the first means the drafter "
    "(a draft model, an EAGLE-3 head) fades late in long answers.")


def round_starts(rounds: list[dict]) -> list[int]:
    """Each round's first output position (0-based): the tokens the rounds before it emitted."""
    starts, at = [], 0
    for rd in rounds:
        starts.append(at)
        at += rd["emitted"]
    return starts


def third_of(start: int, new_tokens: int) -> int:
    """The third (0, 1, 2) of an output of new_tokens where a round starting at `start` falls."""
    return min(2, 3 * start // new_tokens)


def split(row: dict) -> list[list[dict]]:
    """A speculative row's rounds in the first, middle and last third of its output."""
    out: list[list[dict]] = [[], [], []]
    rounds = row.get("rounds") or []
    for rd, start in zip(rounds, round_starts(rounds)):
        out[third_of(start, row["new_tokens"])].append(rd)
    return out


def counted(row: dict) -> bool:
    """Whether a row's thirds count: a measured, non-synthetic speculative generation of at least
    MIN_ROUNDS rounds and some output."""
    return (row.get("mode") == "speculative" and not row.get("error") and not row.get("synthetic")
            and bool(row.get("new_tokens")) and len(row.get("rounds") or []) >= MIN_ROUNDS)


def records(rows: list[dict]) -> list[dict]:
    """Three records (first, middle, last third) per speculative cell with a counted generation, in
    table order; [] where no generation has MIN_ROUNDS rounds."""
    out = []
    for cell in tables.spec_cells(rows):
        mine = [r for r in cell if counted(r)]
        if not mine:
            continue
        parts = [[rd for r in mine for rd in split(r)[i]] for i in range(3)]
        first = metrics.alpha_hat(parts[0])
        for name, rounds in zip(THIRDS, parts):
            alpha = metrics.alpha_hat(rounds)
            out.append({**tables.settings(cell[0]), "gamma": cell[0]["gamma"], "third": name, "gens": len(mine),
                        "rounds": len(rounds), "drafted": sum(rd["drafted"] for rd in rounds),
                        "accepted": sum(rd["accepted"] for rd in rounds),
                        "acceptance_rate": metrics.acceptance_rate(rounds), "alpha_hat": alpha,
                        "mean_accepted_len": metrics.mean_accepted_len(rounds),
                        "alpha_change": None if alpha is None or first is None else alpha - first})
    return out
