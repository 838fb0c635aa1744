"""Greedy outputs across runtimes and within one (reports/mismatch.py) with multi-turn rows: the
turns of one prompt are never set against each other."""

from __future__ import annotations

from spec_harness.reports import mismatch
from tests import synthetic


def test_turns_of_one_prompt_are_never_set_against_each_other_across_runtimes():
    """Greedy baselines across runtimes (mismatch.agreement) pair on prompt and turn: the two
    runtimes agree on each turn, and turn 2's ids are not turn 1's."""
    def baselines(runtime: str, turn: int) -> list[dict]:
        rows = [r for r in synthetic.rows_for(runtime, (4,)) if r["mode"] == "baseline"]
        return [dict(r, turn=turn, token_ids=r["token_ids"][::-1]) for r in rows] if turn == 2 else rows

    rows = baselines("a", 1) + baselines("a", 2) + baselines("b", 2) + baselines("b", 1)  # b's turns in the other order
    recs = mismatch.agreement(rows)
    assert sorted((r["prompt"], r["turn"], r["agree"]) for r in recs) == [
        ("f1", 1, True), ("f1 turn 2", 2, True), ("o1", 1, True), ("o1 turn 2", 2, True)]
    spec = dict(next(r for r in synthetic.rows_for("a", (4,)) if r["mode"] == "speculative"), turn=2, greedy_match=False,
                mismatch={"position": 3, "baseline_token": 1, "speculative_token": 2, "baseline_text": "a",
                          "speculative_text": "b", "margin_one_token": 2.0, "margin_batched": 2.0, "max_abs_diff": 0.0,
                          "verdict": mismatch.SUSPECTED_BUG})
    assert [(m["prompt"], m["turn"]) for m in mismatch.mismatch_table([spec])] == [("f1 turn 2", 2)]
    assert "(f1 turn 2 token 3: margin 2.000" in mismatch.runtime_lines([spec], "a")[0]
