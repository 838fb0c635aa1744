"""The report's sections on real traffic: acceptance in each third of long outputs
(reports/thirds.py, output_thirds.csv). Every number is set against arithmetic written out here on
the synthetic rows' round records (tests/synthetic.py), never against the code under test; the
section is absent from report.md where it says nothing; the turns of one prompt are never set
against each other (greedy baselines across runtimes)."""

from __future__ import annotations

import json

import pytest

from spec_harness.reports import mismatch, thirds, write_report
from tests import synthetic

# (drafted, accepted, emitted) per round. f1: 15 rounds, 45 tokens, every draft accepted early and
# none late; o1: 12 rounds of one accepted draft each (just enough rounds to count).
FADE = {("f1", 4): [(4, 4, 5)] * 5 + [(4, 2, 3)] * 5 + [(4, 0, 1)] * 5, ("o1", 4): [(4, 1, 2)] * 12}
THIRD = ("first", "middle", "last")


def by_hand(rows: list[dict], min_rounds: int = 12) -> list[list[dict]]:
    """The rounds of each third, written out: a round starts where the earlier rounds' emitted
    tokens end, and falls in the first third while 3 x start < new_tokens, then the middle while
    3 x start < 2 x new_tokens."""
    out: list[list[dict]] = [[], [], []]
    for r in rows:
        if r["mode"] != "speculative" or len(r["rounds"]) < min_rounds:
            continue
        n, start = r["new_tokens"], 0
        for rd in r["rounds"]:
            out[0 if 3 * start < n else 1 if 3 * start < 2 * n else 2].append(rd)
            start += rd["emitted"]
    return out


def alpha(rounds: list[dict]) -> float:
    """Leviathan's alpha over rounds that drafted: accepted / (accepted + rejections)."""
    drafting = [rd for rd in rounds if rd["drafted"]]
    accepted = sum(rd["accepted"] for rd in drafting)
    return accepted / (accepted + sum(rd["accepted"] < rd["drafted"] for rd in drafting))


def rates(rounds: list[dict]) -> dict:
    """accepted/drafted, alpha_hat and tokens per round, written out."""
    return {"acceptance_rate": sum(rd["accepted"] for rd in rounds) / sum(rd["drafted"] for rd in rounds),
            "alpha_hat": alpha(rounds), "mean_accepted_len": sum(rd["emitted"] for rd in rounds) / len(rounds)}


def test_late_rounds_that_accept_less_show_a_lower_last_third():
    rows = synthetic.rows_for("fast", (4,), rounds=FADE)
    recs = thirds.records(rows)
    assert [r["third"] for r in recs] == list(THIRD) and {r["gens"] for r in recs} == {2}
    for rec, rounds in zip(recs, by_hand(rows)):
        assert rec["rounds"] == len(rounds) and rec["drafted"] == 4 * len(rounds)
        for k, v in rates(rounds).items():
            assert rec[k] == pytest.approx(v), (rec["third"], k)
        assert rec["alpha_change"] == pytest.approx(alpha(rounds) - alpha(by_hand(rows)[0]))
    assert recs[2]["alpha_hat"] < recs[0]["alpha_hat"] - 0.3 and recs[2]["mean_accepted_len"] < recs[0]["mean_accepted_len"]
    # f1's round starting at token 15 of 45 opens the middle third (the position of its first token, not its index)
    f1 = next(r for r in rows if r["mode"] == "speculative" and r["prompt_id"] == "f1")
    assert [len(part) for part in thirds.split(f1)] == [3, 4, 8]


def test_short_error_and_synthetic_generations_do_not_count():
    assert thirds.records(synthetic.rows_for("fast", (4,))) == []  # 3 and 10 rounds: no third says anything
    short = {**FADE, ("o1", 4): [(4, 1, 2)] * 11}  # o1 one round short of MIN_ROUNDS
    rows = synthetic.rows_for("fast", (4,), rounds=short)
    spec = [r for r in rows if r["mode"] == "speculative"]
    rows += [dict(spec[0], synthetic=True, rounds=[{**rd, "accepted": 0} for rd in spec[0]["rounds"]]),
             dict(spec[0], error="boom")]
    recs = thirds.records(rows)
    assert {r["gens"] for r in recs} == {1}
    for rec, rounds in zip(recs, by_hand(rows[:4])):
        assert rec["alpha_hat"] == pytest.approx(alpha(rounds)) and rec["rounds"] == len(rounds)


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


def test_the_section_is_absent_where_it_says_nothing(tmp_path):
    md = write_report([synthetic.write_run(tmp_path / "plain", synthetic.rows_for("fast", (4,)))]).read_text()
    assert "## Acceptance along the output" not in md
    assert (tmp_path / "plain" / "report" / "output_thirds.csv").exists()  # the CSV is written all the same
    long = synthetic.rows_for("fast", (4,), rounds=FADE)
    md = write_report([synthetic.write_run(tmp_path / "long", long)]).read_text()
    assert md.index("## Acceptance per prompt category") < md.index("## Acceptance along the output")
    doc = json.loads((tmp_path / "long" / "report" / "report.json").read_text())
    assert [r["third"] for r in doc["output_thirds"]] == list(THIRD)
