"""Acceptance checked against the models (core/acceptance.py, runtimes/expected.py): each rule's
acceptance probability by hand, the tested positions of a round, the interval's arithmetic, and on
real rows of the torch runtime (tiny pair) that an honest run lands inside while a runtime that
accepts otherwise than its rule (rows made to accept less, or more) is flagged in the rows, the
report, explain and the verdict."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from spec_harness.core import acceptance as acc
from spec_harness.core.acceptance import TIE, Z, Tally, acceptance, pooled, pooled_outputs
from spec_harness.core.config import SamplingParams
from spec_harness.harness.prompts import load_prompts
from spec_harness.harness.run_config import RunConfig
from spec_harness.harness.runner import Runner
from spec_harness.models.presets import resolve_pair
from spec_harness.runtimes.expected import Checker
from tests.numerics import U32


# Each float32 probability below: its decimal's rounding and its log's (3.3 u in the logit), twice
# that through the softmax, then float32's (u): 7.6 u; a product of two and a sum of three add 3 u.
RULE_RTOL = 20 * U32


def test_each_rule_accepts_with_its_probability():
    p_raw = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    q_raw = torch.log(torch.tensor([0.2, 0.7, 0.1]))
    s = SamplingParams(1.0)

    def approx(x):
        return pytest.approx(x, rel=RULE_RTOL)

    a, tie = acceptance("leviathan", p_raw, q_raw, 1, s, False)
    assert a == approx(0.2 + 0.3 + 0.1) and not tie  # sum min(p, q)
    assert acceptance("sample-match", p_raw, q_raw, 1, s, False)[0] == approx(0.3)  # p of the draft's argmax
    assert acceptance("sample-match", p_raw, q_raw, 1, s, True)[0] == approx(0.5 * 0.2 + 0.3 * 0.7 + 0.2 * 0.1)
    assert acceptance("leviathan", p_raw, None, 2, s, False)[0] == approx(0.2)  # prompt lookup: a point mass
    g = SamplingParams(0.0)
    assert acceptance("greedy-match", p_raw, q_raw, 1, g, False) == (0.0, False)  # argmaxes 0 and 1
    assert acceptance("greedy-match", p_raw, p_raw, 0, g, False) == (1.0, False)
    near = torch.tensor([1.0, 1.0 - TIE / 2, -3.0])
    assert acceptance("greedy-match", near, near, 0, g, False) == (1.0, True)  # a near tie may go either way elsewhere


def test_tested_positions_are_the_accepted_drafts_and_the_first_rejected_one():
    rounds = [{"drafted": 0, "accepted": 0, "emitted": 1}, {"drafted": 4, "accepted": 4, "emitted": 5},
              {"drafted": 4, "accepted": 1, "emitted": 2}, {"drafted": 3, "accepted": 0, "emitted": 1}]
    got = list(acc.tested_positions(rounds, known=100))
    assert got == [(1, 4, 1, True), (1, 4, 2, True), (1, 4, 3, True), (1, 4, 4, True),
                   (6, 4, 1, True), (6, 4, 2, False), (8, 3, 1, False)]
    assert len(list(acc.tested_positions(rounds, known=7))) == 5  # ids held back: their positions are not tested


def test_interval_is_the_expected_count_within_z_deviations_and_the_ties():
    t = Tally()
    for a, ok in ((0.5, True), (0.5, False), (0.9, True), (1.0, True)):
        t.add(a, ok, tie=False)
    t.add(1.0, False, tie=True)
    half = Z * math.sqrt(0.25 + 0.25 + 0.09 + 0.25) + 0.5  # the tie counts as a fair coin
    assert t.bounds == (pytest.approx(max(0.0, 3.9 - half)), pytest.approx(min(5.0, 3.9 + half)))
    rec = t.record("leviathan", "the draft model")
    assert rec["verdict"] == "within" and rec["alpha"] == pytest.approx(3 / 5)
    both = pooled([rec, rec, {"verdict": "unchecked"}, None])
    assert both["tested"] == 10 and both["expected"] == pytest.approx(7.8) and both["variance"] == pytest.approx(1.18)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """The torch runtime on the tiny pair, greedy and at temperature 0.7, draft model and prompt lookup."""
    cfg = RunConfig(["torch"], [resolve_pair("tiny")], load_prompts("factual")[:3], gammas=[4],
                    samplings=[SamplingParams(0.0), SamplingParams(0.7)], max_new_tokens=[32], drafters=["model", "ngram"], warmup=0,
                    out=tmp_path_factory.mktemp("run"))
    return Runner(cfg).run()


def test_an_honest_run_is_within_what_its_models_predict(rows):
    spec = [r for r in rows if r["mode"] == "speculative"]
    assert spec and all(r["expected_acceptance"]["verdict"] == "within" for r in spec if r["temperature"] == 0)
    for t in (0.0, 0.7):
        for drafter in ("model", "ngram"):
            cell = pooled([r["expected_acceptance"] for r in spec if r["temperature"] == t and r["drafter"] == drafter])
            assert cell["verdict"] == "within", cell
            assert cell["rule"] == ("greedy-match" if t == 0 else "leviathan")
    greedy = [r["expected_acceptance"] for r in spec if r["temperature"] == 0]
    assert all(e["expected"] == e["accepted"] for e in greedy)  # the same numerics: the argmaxes agree exactly


def _accepting(row: dict, change) -> dict:
    """The row as a runtime that accepted otherwise would have written it: each round's accepted count
    changed by `change` (its tokens, and so the models' prediction, unchanged)."""
    out = copy.deepcopy(row)
    for rd in out["rounds"]:
        rd["accepted"] = change(rd)
    return out


@pytest.mark.slow
def test_a_runtime_that_accepts_otherwise_than_its_rule_is_flagged_everywhere(rows, torch_rt, tmp_path):
    from spec_harness.reports import verdict, write_report
    from spec_harness.reports.build import write_explain
    from spec_harness.reports.runs import load
    from tests import synthetic

    ids = {p.id: torch_rt.encode(p.text) for p in load_prompts("factual")[:3]}
    checker = Checker(resolve_pair("tiny"))
    sampled = [r for r in rows if r["mode"] == "speculative" and r["temperature"] == 0.7 and r["drafter"] == "model"]
    for change, side in ((lambda rd: 0, "below"), (lambda rd: rd["drafted"], "above")):
        checks = [checker.check(_accepting(r, change), ids[r["prompt_id"]]) for r in sampled]
        assert pooled(checks)["verdict"] == side
    # the rows of a runtime that accepts nothing: the row, the report, explain and the verdict say so
    broken = []
    for r in rows:
        if r["mode"] == "speculative" and r["temperature"] == 0.7 and r["drafter"] == "model":
            r = _accepting(r, lambda rd: 0)
            r["expected_acceptance"] = checker.check(r, ids[r["prompt_id"]])
        broken.append(r)
    run = synthetic.write_run(tmp_path / "run", broken, name="tiny")
    md = write_report([run]).read_text()
    section = md[md.index("## Acceptance against the models"):]
    assert "| below |" in section.split("\n## ")[0] and "| within |" in section.split("\n## ")[0]
    said = "\n".join(verdict.notes(verdict.build(load([run]).rows)))
    assert "ACCEPTANCE NOT THE MODELS' in torch [kernels] · T=0.7 at gamma 4: alpha_hat 0.00" in said
    text, _ = write_explain([run])
    assert "Acceptance is not the models': measured 0.00, expected" in text and "(leviathan)" in text


def test_sampled_tokens_are_set_against_the_targets_own_samples(rows, torch_rt):
    """An honest sampler's outputs (baseline and speculative) sit within the target's own samples; an
    output drawn from another distribution (here uniform over the vocabulary) is far below them."""
    ids = {p.id: torch_rt.encode(p.text) for p in load_prompts("factual")[:3]}
    checker = Checker(resolve_pair("tiny"))
    sampled = [r for r in rows if r["temperature"] == 0.7]
    for mode in ("baseline", "speculative"):
        honest = pooled_outputs([r["output_check"] for r in sampled if r["mode"] == mode])
        assert honest["verdict"] == "within" and honest["tokens"] >= 3 * 32, honest
    assert all(r.get("output_check") is None for r in rows if r["temperature"] == 0)  # greedy: token for token instead
    gen = torch.Generator().manual_seed(0)
    noise = [copy.deepcopy(r) for r in sampled if r["mode"] == "baseline"]
    for r in noise:
        r["token_ids"] = torch.randint(0, 256, (len(r["token_ids"]),), generator=gen).tolist()
    broken = pooled_outputs([checker.output(r, ids[r["prompt_id"]]) for r in noise])
    assert broken["verdict"] == "unlikely" and broken["z"] < -10, broken
