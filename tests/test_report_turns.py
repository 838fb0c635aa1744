"""The report's sections on real traffic: acceptance in each third of long outputs
(reports/thirds.py, output_thirds.csv) and acceptance and speedup per turn of a conversation
(reports/turns.py, turns.csv). Every number is set against arithmetic written out here on the
synthetic rows' round records (tests/synthetic.py), never against the code under test; each section
is absent from report.md where it says nothing; the turns of one prompt are never set against each
other (a turn's speedup, greedy baselines across runtimes)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from spec_harness.reports import mismatch, thirds, turns, write_report
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


def two_turns() -> list[dict]:
    """Turn 1 (rows written before `turn` existed: no field) accepts as FADE; turn 2 accepts as the
    default synthetic rounds, on a runtime twice as slow, its baselines too."""
    first = [{k: v for k, v in r.items() if k != "turn"} for r in synthetic.rows_for("fast", (4,), rounds=FADE)]
    return first + [dict(r, turn=2) for r in synthetic.rows_for("fast", (4,), scale=2.0)]


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


def test_per_turn_numbers_are_each_turns_own_rows():
    rows = two_turns()
    recs = turns.records(rows[4:] + rows[:4])  # turn 2's rows first: the table still reads turn 1, then 2
    assert [r["turn"] for r in recs] == [1, 2]
    for rec in recs:
        mine = [r for r in rows if r.get("turn", 1) == rec["turn"]]
        base = [r for r in mine if r["mode"] == "baseline"]
        spec = [r for r in mine if r["mode"] == "speculative"]
        per_token = [sum(r["wall_s"] for r in side) / sum(r["new_tokens"] for r in side) for side in (base, spec)]
        assert rec["speedup"] == pytest.approx(per_token[0] / per_token[1])
        assert rec["n"] == len(spec) == 2
        for k, v in rates([rd for r in spec for rd in r["rounds"]]).items():
            assert rec[k] == pytest.approx(v), (rec["turn"], k)
    assert recs[0]["alpha_hat"] > recs[1]["alpha_hat"] + 0.2
    # against turn 1's faster baselines too, turn 2 would read otherwise: the turns are set apart
    everything = [r for r in rows if r["mode"] == "baseline"]
    spec2 = [r for r in rows if r.get("turn") == 2 and r["mode"] == "speculative"]
    pooled = (sum(r["wall_s"] for r in everything) / sum(r["new_tokens"] for r in everything)) / (
        sum(r["wall_s"] for r in spec2) / sum(r["new_tokens"] for r in spec2))
    assert recs[1]["speedup"] != pytest.approx(pooled, rel=0.05)


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


def test_sections_absent_where_they_say_nothing(tmp_path):
    md = write_report([synthetic.write_run(tmp_path / "plain", synthetic.rows_for("fast", (4,)))]).read_text()
    assert "## Acceptance along the output" not in md and "## Acceptance and speedup per turn" not in md
    out = tmp_path / "plain" / "report"
    assert (out / "output_thirds.csv").exists()
    assert pd.read_csv(out / "turns.csv").turn.tolist() == [1]  # the CSV is written all the same
    long = synthetic.rows_for("fast", (4,), rounds=FADE)  # long outputs, one turn
    md = write_report([synthetic.write_run(tmp_path / "long", long)]).read_text()
    assert "## Acceptance along the output" in md and "## Acceptance and speedup per turn" not in md
    doc = json.loads((tmp_path / "long" / "report" / "report.json").read_text())
    assert [r["third"] for r in doc["output_thirds"]] == list(THIRD)


def test_report_md_csv_json_and_html_carry_both_sections(tmp_path):
    rows = two_turns()
    eagle = [dict(r, drafter="eagle3") for r in rows if r["mode"] == "speculative" and "turn" not in r]
    d = synthetic.write_run(tmp_path / "run", rows + eagle)
    md = write_report([d]).read_text()
    out = d / "report"
    at = md.index("## Acceptance along the output")
    assert md.index("## Acceptance per prompt category") < at < md.index("## Acceptance and speedup per turn")
    # thirds over turn 1's long generations only (turn 2's have 3 and 10 rounds), each drafter its own cell,
    # labelled as in the Acceptance table
    labels = set(pd.read_csv(out / "summary.csv").label)
    csv = pd.read_csv(out / "output_thirds.csv")
    assert list(dict.fromkeys(csv.label)) == ["fast · spec γ=4", "fast [eagle3] · spec γ=4"] and set(csv.label) <= labels
    for label in ("fast · spec γ=4", "fast [eagle3] · spec γ=4"):
        for (_, rec), rounds in zip(csv[csv.label == label].iterrows(), by_hand(rows)):
            r = rates(rounds)
            line = (f"| {label} | {rec.third} | 2 | {len(rounds)} | {r['acceptance_rate']:.3f} | {r['alpha_hat']:.3f} | "
                    f"{r['mean_accepted_len']:.2f} | {alpha(rounds) - alpha(by_hand(rows)[0]):+.3f} |")
            assert line in md
    table = pd.read_csv(out / "turns.csv")
    model = table[table.label == "fast · spec γ=4"]
    assert model.turn.tolist() == [1, 2] and model.speedup.iloc[1] == pytest.approx((0.28 / 20) / (0.44 / 20))
    spec2 = [r for r in rows if r.get("turn") == 2 and r["mode"] == "speculative"]
    r = rates([rd for s in spec2 for rd in s["rounds"]])
    assert (f"| fast · spec γ=4 | 2 | 2 | {r['acceptance_rate']:.3f} | {r['alpha_hat']:.3f} | {r['mean_accepted_len']:.2f} "
            f"| {model.speedup.iloc[1]:.2f}x |") in md
    doc = json.loads((out / "report.json").read_text())
    assert len(doc["output_thirds"]) == 6 and [r["turn"] for r in doc["turns"]] == [1, 2, 1]
    html = (out / "report.html").read_text()
    for anchor in ("acceptance-along-the-output", "acceptance-and-speedup-per-turn"):
        assert f'href="#{anchor}"' in html and f'id="{anchor}"' in html
