"""reports/routing.py: the best setting per category, turn and input length, and what routing
gains over the one best setting, from measured rows."""

from __future__ import annotations

import pytest

from spec_harness.reports import routing

# per category: (baseline wall, ngram g4 wall, eagle3 g2 wall), 10 tokens each
WALLS = {"summarization": (1.0, 0.5, 0.8), "qa": (1.0, 1.2, 0.7)}


def _rows(walls=WALLS, by="category"):
    rows = []
    for i, (group, (base, ngram, head)) in enumerate(walls.items()):
        cell = {"runtime": "torch", "torch_forward": "kernels", "pair": "p", "prompt_id": f"q{i}", "repeat": 0,
                "temperature": 0.0, "max_new_tokens": 32, "new_tokens": 10, "error": None, "category": "x"}
        cell[by] = group
        rows.append({**cell, "mode": "baseline", "wall_s": base})
        rows.append({**cell, "mode": "speculative", "drafter": "ngram", "gamma": 4, "wall_s": ngram})
        rows.append({**cell, "mode": "speculative", "drafter": "eagle3", "gamma": 2, "wall_s": head})
    return rows


def test_each_category_gets_its_best_setting_and_routing_is_measured_against_the_single_best():
    (r,) = routing.routings(_rows())
    assert r.runtime == "torch [kernels]" and r.by == "category" and r.differs
    assert r.best == {"summarization": "ngram g4", "qa": "eagle3 g2"}
    assert r.single == "eagle3 g2" and r.single_speedup == pytest.approx(2.0 / 1.5)
    assert r.routed_speedup == pytest.approx(2.0 / 1.2) and r.routed_speedup >= r.single_speedup
    text = routing.sentence(r)
    assert text.startswith("Per category in torch [kernels]: ") and "ngram g4 for summarization" in text
    assert "routed 1.67x over every prompt against 1.33x for eagle3 g2 alone" in text


def test_a_group_where_nothing_pays_routes_to_no_speculation():
    walls = {512: (1.0, 0.8, 0.9), 1024: (1.0, 1.1, 0.95), 2048: (1.0, 1.3, 1.2)}
    (r,) = routing.routings(_rows(walls, by="input_len"))
    assert r.best == {512: "ngram g4", 1024: "eagle3 g2", 2048: routing.OFF}
    assert r.routed_speedup == pytest.approx(3.0 / (0.8 + 0.95 + 1.0))
    assert "speculation off from 2048 input tokens on" in routing.sentence(r)


def test_one_group_or_an_incomplete_cell_gives_no_answer_per_task():
    assert routing.routings(_rows({"qa": (1.0, 1.2, 0.7)})) == []
    rows = _rows()
    rows[1]["error"] = "boom"  # summarization's ngram row failed: that cell leaves the comparison
    assert routing.routings(rows) == []
