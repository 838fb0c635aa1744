"""The verdict (reports/verdict.py): built from synthetic rows whose costs are known (tests/synthetic.py),
it names the fastest setting, where speculation pays and where it loses with the one reason, the
setting the cost model expects to do better, and what did not run, in lines of at most 100 columns."""

from __future__ import annotations

import pytest

from spec_harness.reports import verdict
from spec_harness.reports.runs import by_drafting
from tests import synthetic

ALL_ACCEPTED = {("f1", 4): [(4, 4, 5)] * 2, ("o1", 4): [(4, 4, 5)] * 2}  # 10 tokens in two rounds
HALF = {("f1", 4): [(4, 2, 3)] * 3 + [(4, 0, 1)], ("o1", 4): [(4, 2, 3)] * 3 + [(4, 0, 1)]}  # 10 tokens in four rounds


def _rows() -> list[dict]:
    """'paying' accepts every draft (about 2x); 'verifier' and 'verifier2' accept half, their verify pass
    costs 4 and 5 one-token steps; 'picky' has the default rows (low acceptance, a cheap verify)."""
    rows = synthetic.rows_for("paying", rounds=ALL_ACCEPTED)
    head = [dict(r, drafter="eagle3", wall_s=r["wall_s"] * 0.9) for r in rows if r["mode"] == "speculative"]
    rows += head  # a second drafting of the same runtime: the view "paying [eagle3]"
    rows += synthetic.rows_for("verifier", verify_ms=40.0, rounds=HALF)
    rows += synthetic.rows_for("verifier2", verify_ms=50.0, rounds=HALF)
    rows += synthetic.rows_for("picky")
    rows.append(dict(rows[0], runtime="hf", mode="speculative", drafter="eagle3",
                     error="skipped: transformers has no EAGLE-3 drafting"))
    return rows


def test_the_verdict_names_the_fastest_setting_where_it_pays_and_why_it_loses():
    v = verdict.build(by_drafting(_rows()))
    text = verdict.text(v)
    assert max(len(line) for line in text) <= 100
    # prefill is a seventh of each wall here: the decode speedup stands beside the end-to-end one, each named
    assert text[0].split() == ["base", "spec", "speedup", "speedup"]
    assert text[1].split() == ["runtime", "device", "g", "tok/s", "tok/s", "e2e", "decode", "alpha", "tau", "largest",
                               "cost"]
    table = {line.split()[0] + (" [eagle3]" if "[eagle3]" in line else ""): line.split() for line in text[2:7]}
    assert list(table) == ["paying", "paying [eagle3]", "verifier", "verifier2", "picky"]
    # paying: baseline 10 tokens per (0.14 s wall - 0.02 s prefill); the drafting view shows no baseline of its own
    assert table["paying"][1:3] == ["cpu", "4"] and float(table["paying"][3]) == pytest.approx(83.3, abs=0.05)
    assert table["paying [eagle3]"][2:4] == ["cpu", "4"]  # device, gamma, then the speculative tok/s (no baseline)
    assert float(table["paying"][8]) == pytest.approx(5.0)  # tau: every draft accepted, 5 tokens a round
    e2e, decode = (float(x.rstrip("x")) for x in table["paying"][5:7])
    assert decode == pytest.approx(float(table["paying"][4]) / float(table["paying"][3]), rel=1e-2) and decode != e2e
    assert " ".join(table["verifier"]).endswith("verify = 4.0 steps x0.38")  # (0.8 + 1) / (0.8 + 4)
    assert " ".join(table["verifier2"]).endswith("verify = 5.0 steps x0.31")
    # picky's acceptance is low, but tau 1.57 > 1: what makes it lose is a cost (4 draft tokens of 0.2 steps)
    assert " ".join(table["picky"]).endswith("draft = 0.20 steps/tok x0.56")
    first = next(i for i, line in enumerate(text) if line.startswith("Fastest here:"))  # the sentences come last
    assert first > 7 and not any(line.startswith(("Greedy", "Skipped")) for line in text[first:])
    said = "\n".join(verdict.sentences(v) + verdict.notes(v))
    assert "Fastest here: paying [eagle3] at gamma 4" in said
    assert "Speculation pays in paying [eagle3] (" in said and "paying (" in said
    # both verify-bound runtimes lose for the same reason, with the range of their verify cost
    assert "It loses in verifier2, verifier (0.49-0.57x end to end): a verify pass of 5 tokens costs 4.0-5.0 target steps" in said
    assert "; picky (0.64x): a draft token costs 0.20 target steps" in said and "greedy" not in said.split("Greedy baselines")[0]
    assert "Skipped: hf [eagle3]" in said and "Greedy baselines: all 4 runtimes give the same tokens on 2 prompts." in said


def test_the_cost_model_names_a_better_gamma_with_the_command_that_runs_it():
    v = verdict.build(by_drafting(synthetic.rows_for("verifier", verify_ms=40.0, rounds=HALF)))
    t = v["try"]
    assert t is not None and t["best_gamma"] < 4 and t["predicted"] > t["measured"]
    assert t["command"] == f"harness run --runtime verifier --gamma {t['best_gamma']}"
    assert any(s.startswith("Cost model: verifier at gamma ") for s in verdict.sentences(v))


def test_the_cost_model_never_promises_more_tokens_than_a_round_yields():
    """Acceptance 0.1 at gamma 4 (each prompt: 8 rounds rejecting the first draft, one accepting one)
    after a long prompt: 0.5 s of prefill on every row, longer than the decode, dilutes the loss
    toward 1x. At gamma 1 a round yields at most tau = 1 + 0.1 tokens and costs at least a target
    step, so no line may promise more, however long the prompt."""
    low = {(p, 4): [(4, 0, 1)] * 8 + [(4, 1, 2)] for p in ("f1", "o1")}
    for prefill in (0.0, 0.1, 0.5):
        rows = [dict(r, prefill_s=r["prefill_s"] + prefill, wall_s=r["wall_s"] + prefill)
                for r in synthetic.rows_for("llamacpp", rounds=low)]
        v = verdict.build(by_drafting(rows))
        assert v["lines"][0]["alpha_hat"] == pytest.approx(0.1)
        t = v["try"]
        assert t and t["best_gamma"] == 1 and t["predicted"] <= 1.1, (prefill, t)
        said = next(x for x in verdict.sentences(v) if x.startswith("Cost model:"))
        assert float(said.split("would give about ")[1].split("x")[0]) <= 1.1


def test_baselines_that_part_are_grouped_and_a_suspected_bug_is_said():
    rows = synthetic.rows_for("a") + synthetic.rows_for("b") + synthetic.rows_for("c")
    for r in rows:
        if r["runtime"] == "c" and r["mode"] == "baseline":
            r["token_ids"] = r["token_ids"][:3] + [77] + r["token_ids"][4:]
    spec = next(r for r in rows if r["runtime"] == "b" and r["mode"] == "speculative")
    spec.update(greedy_match=False, mismatch={"verdict": "suspected bug", "position": 2})
    v = verdict.build(by_drafting(rows))
    said = "\n".join(verdict.notes(v))
    assert "Same greedy tokens on all 2 prompts: a, b (the others part at token 3)." in said
    assert "Greedy tokens of their own: c" in said
    assert "SUSPECTED BUG in b: 1 greedy output(s)" in said


def test_long_labels_and_nothing_measured():
    rows = synthetic.rows_for("a-runtime-with-a-very-long-registry-name-indeed")
    text = verdict.text(verdict.build(by_drafting(rows)))
    assert max(len(line) for line in text) <= 100
    assert text[2] == "a-runtime-with-a-very-long-registry-name-indeed" and text[3].split()[0] == "cpu"  # its numbers below
    failed = [dict(r, error="skipped: needs foo") for r in rows]
    assert verdict.sentences(verdict.build(by_drafting(failed))) == ["Nothing was measured successfully."]


def test_acceptance_is_the_reason_where_tau_keeps_speculation_near_one():
    """One draft accepted in five rounds at gamma 4: tau 1.2 tokens a round. A verify pass of 4 steps is the
    largest cost, but free drafting and verifying would still gain only 20 %: the verdict names acceptance."""
    low = {(p, 4): [(4, 0, 1)] * 4 + [(4, 1, 2)] for p in ("f1", "o1")}
    v = verdict.build(by_drafting(synthetic.rows_for("verifier", verify_ms=40.0, rounds=low)))
    (line,) = [x for x in v["lines"] if x["mode"] == "speculative"]
    assert line["expl"]["tau_model"] == pytest.approx(1.2, abs=0.01)
    assert line["loss"].startswith("acceptance: 1.20 tok/round")
    assert "too few drafts are accepted (alpha_hat 0.17, 1.20 tokens a round" in " ".join(verdict.sentences(v))


def test_the_verdict_names_a_setting_per_category_where_the_best_differs():
    rows = synthetic.rows_for("torch", rounds=ALL_ACCEPTED)  # f1 and o1: every draft accepted, about 2x
    for r in rows:
        r["category"] = "factual" if r["prompt_id"] == "f1" else "open-ended"
        if r["mode"] == "speculative" and r["prompt_id"] == "o1":
            r["wall_s"] *= 4  # speculation loses on the open-ended prompt
    notes = verdict.notes(verdict.build(by_drafting(rows)))
    assert any(n.startswith("Per category in torch: ") and "speculation off for open-ended" in n for n in notes), notes
