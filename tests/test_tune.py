"""`harness tune`: the model that predicts each candidate from the probe, the recommendation rule,
the commands in each runtime's terms, and tune end to end on the tiny pair (real runtimes)."""

import json
from dataclasses import replace

import pytest

from spec_harness.core.config import PairSpec
from spec_harness.core.drafters import parse as parse_drafter
from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.harness import tune, tune_lines, tune_model
from spec_harness.harness.tune import Candidate
from spec_harness.harness.tune_model import Cell, Fit
from tests.test_cli import harness, invoke


def _cell(gamma, speedup, tau, positions=(), drafter="model", n=1, tps=None, runtime="torch"):
    return Cell(runtime, runtime, None, "p", drafter, gamma, n, tps, speedup, tau, list(positions), 1.0, None)


def test_tau_model_is_one_plus_the_products_of_the_conditionals():
    assert tune_model.tau_model([0.5, 0.5], 1.0, 2, None) == pytest.approx(1 + 0.5 + 0.25)
    assert tune_model.tau_model([1.0, None], 1.0, 3, None) == pytest.approx(4.0)  # a position never reached: the last p
    assert tune_model.tau_model([0.8], 0.5, 1, None) == pytest.approx(0.5 * 1.8 + 0.5)  # half the rounds drafted nothing
    assert tune_model.tau_model([], 1.0, 2, 0.5) == pytest.approx(1.75)  # no positions: alpha_hat


def test_the_prediction_is_the_measurement_at_the_probe_gammas_and_the_model_between():
    # every draft accepted; a round costs 1 + g/2 baseline token-times (linear): speedup (g + 1) / (1 + g / 2)
    fit = Fit({1: _cell(1, 2 / 1.5, 2.0, [1.0]), 5: _cell(5, 6 / 3.5, 6.0, [1.0] * 5)})
    assert fit.predict(1) == pytest.approx(2 / 1.5) and fit.predict(5) == pytest.approx(6 / 3.5)
    for g in (2, 3, 4):
        assert fit.predict(g) == pytest.approx((g + 1) / (1 + g / 2))
    # acceptance that halves at each position: the gain stops growing, the cost does not
    half = [0.5] * 5
    fit = Fit({1: _cell(1, 1.5 / 1.3, 1.5, half), 5: _cell(5, tune_model.tau_model(half, 1, 5, None) / 2.1,
                                                          tune_model.tau_model(half, 1, 5, None), half)})
    assert fit.predict(2) == pytest.approx(1.75 / 1.5)
    assert max(range(1, 6), key=fit.predict) == 2


def _stopping(rounds, extra, gamma=4, empty=1.0):
    """The probe's draft model stopping under STOPPING_P at `gamma`: `rounds` by tokens drafted,
    each costing R(d) = 1 + d/2 (`empty` at d = 0) and those that stopped (d < gamma) `extra` more."""
    spent = sum(k * (1 + d / 2 if d else empty) for d, k in rounds.items()) + extra * sum(k for d, k in rounds.items() if d < gamma)
    tau = 2.0
    c = _cell(gamma, tau * sum(rounds.values()) / spent, tau, [1.0] * gamma)
    c.policy, c.drafted = f"confidence:{tune_model.STOPPING_P}", [rounds.get(d, 0) for d in range(gamma + 1)]
    return c


def test_confidence_stopping_is_replayed_on_the_probes_rounds():
    # every draft accepted; a round costs 1 + g/2; at the third position the draft is unsure (p 0.2)
    top = _cell(4, 5 / 3, 5.0, [1.0] * 4)
    top.confidence_rounds = [(4, 4, [0.9, 0.9, 0.2, 0.9])] * 10
    fit = Fit({1: _cell(1, 2 / 1.5, 2.0, [1.0]), 4: top}, _stopping({0: 10, 2: 10, 4: 5}, 0.1))
    assert fit.stop_extra() == pytest.approx(0.1)  # what its 20 stopped rounds cost beyond R of their drafts
    assert fit.predict(4, 0.1) == pytest.approx(fit.predict(4)) == pytest.approx(5 / 3)  # never stops: fixed
    assert fit.predict(4, 0.5) == pytest.approx(3 / (2 + 0.1))  # drafts 2, pays what stopping costs
    assert fit.predict(2, 0.5) == pytest.approx(3 / 2)  # stops at gamma 2 before its confidence is read
    fit.stopping = _stopping({4: 10}, 0.0)
    assert fit.predict(4, 0.5) is None  # no round of the probe stopped: what stopping costs is unknown
    fit.stopping = None
    assert fit.predict(4, 0.5) is None
    top.keeps_stop = True  # transformers proposes the unsure token as the round's last draft
    assert fit.predict(4, 0.5) == pytest.approx(4 / 2.5)  # drafts 3, all accepted: 4 tokens for 1 + 3/2
    fit.stopping = _stopping({3: 10}, 0.2)
    assert fit.predict(4, 0.5) == pytest.approx(4 / 2.5)  # and nothing more: no stopping cell is read
    fit.stopping = _stopping({0: 10}, 0.1)
    top.confidence_rounds = []
    assert fit.predict(4, 0.5) is None  # nothing recorded: no prediction


def test_a_round_that_stops_before_its_first_draft_costs_what_the_probe_measured():
    # every draft accepted; a round costs 1 + g/2; the draft is unsure at once in every round
    top = _cell(4, 5 / 3, 5.0, [1.0] * 4)
    top.confidence_rounds = [(4, 4, [0.2, 0.9, 0.9, 0.9])] * 10
    fit = Fit({1: _cell(1, 2 / 1.5, 2.0, [1.0]), 4: top}, _stopping({0: 10}, 0.0, empty=1.3))
    assert fit.predict(4, 0.5) == pytest.approx(1 / 1.3)  # one token for the round the probe measured
    top.empty_round = 1.2  # explain's round without a draft: the rest of what the probe measured is stopping's
    assert fit.stop_extra() == pytest.approx(0.1)
    assert fit.predict(4, 0.5) == pytest.approx(1 / 1.3)
    assert fit.predict(1) == pytest.approx(2 / 1.5)  # a fixed length is the line between the probe gammas


def test_the_probe_measures_the_draft_model_stopping():
    from spec_harness.core.config import DraftPolicy

    stopping = _stopping({0: 10, 4: 2}, 0.1)
    cells = [_cell(1, 1.2, 1.5, [0.5]), _cell(4, 1.1, 2.0, [0.5] * 4), stopping, _cell(1, 1.1, 1.4, [0.4], "eagle3")]
    fit = tune_model.fits(cells)[("torch", "p", "model", "fixed", 1)]
    assert fit.cells == {1: cells[0], 4: cells[1]} and fit.stopping is stopping
    assert tune_model.fits(cells)[("torch", "p", "eagle3", "fixed", 1)].stopping is None
    assert DraftPolicy.parse(f"confidence:{tune_model.STOPPING_P}").confidence == tune_model.STOPPING_P


def test_the_probe_measures_stopping_only_where_a_runtime_has_it():
    from spec_harness.harness.prompts import Prompt
    from spec_harness.harness.run_config import RunConfig

    run = RunConfig(["torch", "vllm", "llamacpp-native", "hf"], [PairSpec("p")], [Prompt("a", "factual", "Hi")],
                    drafters=["model", "ngram"])
    probe = tune.TuneConfig(run, max_gamma=6).probe()
    said = {n: sorted((str(x.policy), x.gamma, str(x.drafter)) for x in probe.speculative_settings(n)) for n in run.runtimes}
    grid = sorted([("fixed", g, d) for g in (1, 6) for d in ("model", "ngram")] + [("fixed", tune.MODEL_MID_GAMMA, "model")])
    assert said["llamacpp-native"] == grid  # fixed only: the two ends, and the draft model between
    assert said["vllm"] == sorted(("fixed", g, d) for g in (2, 6) for d in ("model", "ngram"))  # its gamma 1 is off the line
    assert said["torch"] == sorted(grid + [(f"confidence:{tune_model.STOPPING_P}", 6, "model")])  # and stopping
    assert said["hf"] == grid  # it proposes the token it stops at: a stopped round is a fixed one
    assert probe.n_rows() == sum(probe.rows_per_pair(n) for n in run.runtimes) == 7 + 5 + 6 + 6
    no_model = tune.TuneConfig(replace(run, drafters=["ngram"]), max_gamma=6).probe()
    assert no_model.speculative_settings("torch") == no_model.speculative_settings("llamacpp-native")  # nothing to stop
    assert tune.TuneConfig(run, max_gamma=2).low_gamma("vllm") == 1  # below G
    short = tune.TuneConfig(run, max_gamma=2).probe()  # gamma 2 is G: the draft model measured there once
    assert sorted((str(x.policy), x.gamma, str(x.drafter)) for x in short.speculative_settings("torch")) == sorted(
        [("fixed", g, d) for g in (1, 2) for d in ("model", "ngram")] + [(f"confidence:{tune_model.STOPPING_P}", 2, "model")])
    assert tune.TuneConfig(run, max_gamma=6).low_gammas() == "1 (vllm: 2)"


def test_confidence_is_read_as_the_runtime_reads_it():
    row = {"rounds": [{"drafted": 3, "accepted": 1, "emitted": 2}, {"drafted": 3, "accepted": 3, "emitted": 4}],
           "expected_acceptance": {"confidence": [[0, 1, 0.4, 0.8], [0, 2, 0.1, 0.3], [2, 1, 0.9, 0.95],
                                                  [2, 2, 0.7, 0.9], [2, 3, 0.6, 0.9]]}}
    assert tune._confidence_rounds([row]) == [(3, 1, [0.4, 0.1]), (3, 3, [0.9, 0.7, 0.6])]
    assert tune._confidence_rounds([row], top_k=10) == [(3, 1, [0.8, 0.3]), (3, 3, [0.95, 0.9, 0.9])]
    assert tune._confidence_rounds([row, {"rounds": row["rounds"]}]) == []  # a row without: no replay
    assert tune._confidence_reading("llama-server") == (10, False)
    assert tune._confidence_reading("torch") == (0, False) and tune._confidence_reading("hf") == (0, True)


def _cand(drafter, gamma, n, measured, tps, runtime="llama-server"):
    return Candidate(runtime, runtime, None, "p", drafter, gamma, n, measured, None, measured, tps, "verify costs")


def test_the_confirm_takes_each_drafters_best_first():
    """A drafter's candidates share its two probe cells and their error: the second confirmed is
    the next drafter's best, not the best drafter's next gamma; candidates below rule-out never."""
    cands = [_cand("model", 2, 1, 1.3, None), _cand("model", 3, 1, 1.25, None), _cand("ngram", 1, 1, 1.1, None),
             _cand("eagle3", 1, 1, 0.8, None), _cand("model", 1, 4, 0.95, None)]
    label = lambda ps: [(c.drafter, c.gamma, c.n) for c in ps]  # noqa: E731
    assert label(tune.chosen(cands, 2)["llama-server"]) == [("model", 2, 1), ("ngram", 1, 1), ("model", 1, 4)]
    assert label(tune.chosen(cands, 3)["llama-server"]) == [("model", 2, 1), ("model", 3, 1), ("ngram", 1, 1), ("model", 1, 4)]
    assert label(tune.chosen(cands, 1)["llama-server"]) == [("model", 2, 1), ("model", 1, 4)]
    assert label(tune.chosen(cands, 3, rule_out=1.2)["llama-server"]) == [("model", 2, 1), ("model", 3, 1)]
    assert tune.chosen(cands, 2, rule_out=2.0) == {}
    losing = [_cand("model", 2, 1, 0.97, None), _cand("ngram", 1, 1, 0.95, None)]
    assert label(tune.chosen(losing, 2)["llama-server"]) == [("model", 2, 1)]  # none predicted to pay: the best alone


def test_recommend_takes_the_fastest_measured_and_never_an_unmeasured_load():
    picks = {"llama-server": [_cand("model", 2, 1, 1.2, 60.0), _cand("ngram", 4, 1, 1.1, 55.0),
                              _cand("model", 2, 4, 0.8, 80.0), _cand("model", 1, 8, None, None)]}
    confirmed = [_cell(None, 1.0, None, drafter=None, n=1, tps=50.0, runtime="llama-server"),
                 _cell(None, 1.0, None, drafter=None, n=4, tps=100.0, runtime="llama-server")]
    # hf: every candidate predicted below RULED_OUT, so nothing was confirmed: the probe's baseline
    ruled = [_cand("ngram", 1, 1, 0.85, None, "hf"), _cand("model", 2, 1, 0.8, None, "hf")]
    probe = [_cell(None, 1.0, None, drafter=None, tps=15.0, runtime="hf"), _cell(1, 0.8, 1.4, tps=12.0, runtime="hf"),
             _cell(1, 0.84, 1.05, drafter="ngram", tps=12.6, runtime="hf")]
    probe[2].reason = "the loop costs"
    recs = tune.recommend(picks["llama-server"] + ruled, picks, confirmed, probe)
    hf = next(r for r in recs if r["runtime"] == "hf")
    assert hf["speculate"] is False and hf["base"]["tokens_per_s"] == 15.0 and hf["best"]["drafter"] == "ngram"
    assert hf["why"].startswith(f"Every candidate is predicted below {tune.RULED_OUT:g}x") and "the loop costs" in hf["why"]
    # a variant whose candidates were all ruled out still competes with its probe's baseline
    q8 = _cell(None, 1.0, None, drafter=None, tps=18.0, runtime="hf")
    q8.pair = "p@Q8_0"
    confirmed_hf = [_cell(None, 1.0, None, drafter=None, tps=14.0, runtime="hf")]
    shown = replace(ruled[0], pair="p", measured=0.9, tokens_per_s=12.6)
    got = tune.recommend([shown, replace(ruled[1], pair="p@Q8_0")], {"hf": [shown]}, confirmed_hf, probe + [q8])
    assert got[0]["speculate"] is False and got[0]["base"]["pair"] == "p@Q8_0" and got[0]["base"]["tokens_per_s"] == 18.0
    # ruled out on every variant: the best candidate over all of them (cands are sorted per variant)
    over = tune._ruled_out([replace(ruled[1], pair="p"), replace(ruled[0], pair="p@Q8_0")], probe, tune.RULED_OUT)
    assert over["best"]["drafter"] == "ngram" and over["best"]["pair"] == "p@Q8_0"
    recs = {r["n"]: r for r in recs if r["runtime"] == "llama-server"}
    assert recs[1]["speculate"] and recs[1]["best"]["drafter"] == "model" and recs[1]["best"]["gamma"] == 2
    assert recs[4]["speculate"] is False and recs[4]["why"] == "verify costs"  # slower than its baseline
    assert recs[8]["speculate"] is None  # nothing measured at N = 8: no setting recommended there
    line = tune_lines.harness_line(recs[1], "tiny")
    assert line == "harness run --runtime llama-server --pair tiny --drafter model --gamma 2"
    assert "--drafter" not in tune_lines.harness_line(recs[4], None) and "--concurrency 4" in tune_lines.harness_line(recs[4], None)


def _base_row(rate, runtime="torch", fwd="kernels", n=1, error=None, mode="baseline", *, prompt="a", tokens=35, turn=1):
    """A baseline row of tune's probe or confirm run: its decode rate on a prompt of `tokens` input tokens."""
    return {"runtime": runtime, "torch_forward": fwd, "pair": "p", "mode": mode, "concurrency": n, "tokens_per_s": rate,
            "error": error, "prompt_id": prompt, "turn": turn, "prompt_tokens": tokens}


def test_a_baseline_whose_speed_moved_during_tune_is_said():
    row = _base_row
    rows = [row(97.0), row(60.0), row(61.0), row(80.0, "llama-server", None), row(100.0, "llama-server", None),
            row(10.0, "vllm", None, n=4), row(40.0, "vllm", None), row(5.0, "vllm", None, error="skipped: x"),
            row(10.0, "vllm", None, mode="speculative")]
    got = tune.unsteady(rows)  # llama-server within 1.25x, vLLM's slow rows are under load, failed or speculative
    assert got == [{"runtime": "torch [kernels]", "pair": "p", "low": 60.0, "high": 97.0, "prompts": ["a", "a"],
                    "prompt_tokens": [35, 35]}]
    result = {"confirmed": [], "baselines": [], "recommendations": [], "unsteady": got}
    said = " ".join(" ".join(tune_lines.lines(result, {}, None)).split())
    assert "torch [kernels]: its baseline decoded prompt a at 60.0 and 97.0 tok/s (1.62x): this machine's speed" in said
    assert "speed changed" not in " ".join(tune_lines.lines({**result, "unsteady": []}, {}, None))
    # a prediction just under --rule-out never reads as --rule-out itself
    probe = [_cell(None, 1.0, None, drafter=None, tps=15.0, runtime="hf"), _cell(2, 0.9, 1.1, drafter="ngram", tps=13.5, runtime="hf")]
    rec = tune.recommend([replace(_cand("ngram", 2, 1, None, None, "hf"), predicted=0.8996)], {}, [], probe)
    said = " ".join(" ".join(tune_lines.lines({**result, "recommendations": rec}, {}, None)).split())
    assert "ngram g=2, predicted 0.89x). Every candidate is predicted below 0.9x" in said


def test_prompts_of_different_input_lengths_decode_at_their_own_rates_on_a_steady_machine():
    """A 35-token prompt decodes 2.3x faster than an 800-token one (each step attends over the
    input): on a steady machine each keeps its rate from the probe to the confirm run, and tune says
    nothing of the machine's speed."""
    row = _base_row
    rows = [row(92.0, prompt="short", tokens=35), row(40.0, prompt="long", tokens=800),  # probe
            row(91.0, prompt="short", tokens=35), row(40.5, prompt="long", tokens=800),  # confirm
            row(90.0, prompt="chat", tokens=40), row(41.0, prompt="chat", tokens=780, turn=2)]  # turn 2 reads turn 1
    assert tune.unsteady(rows) == []
    result = {"confirmed": [], "baselines": [], "recommendations": [], "unsteady": tune.unsteady(rows)}
    assert "speed changed" not in " ".join(tune_lines.lines(result, {}, None))


def test_the_same_prompt_or_one_of_about_its_length_decoding_at_another_speed_is_said():
    row = _base_row
    steady = [row(92.0, prompt="short", tokens=35), row(40.0, prompt="long", tokens=800)]
    moved = steady + [row(91.0, prompt="short", tokens=35), row(20.0, prompt="long", tokens=800)]  # confirm: half
    (u,) = tune.unsteady(moved)
    assert (u["low"], u["high"], u["prompts"], u["prompt_tokens"]) == (20.0, 40.0, ["long", "long"], [800, 800])
    result = {"confirmed": [], "baselines": [], "recommendations": [], "unsteady": [u]}
    said = " ".join(" ".join(tune_lines.lines(result, {}, None)).split())
    assert "torch [kernels]: its baseline decoded prompt long at 20.0 and 40.0 tok/s (2.00x): this machine's speed " \
           "changed during tune" in said
    # two prompts whose inputs are within a quarter of each other decode at one rate on a steady machine
    (u,) = tune.unsteady(steady + [row(25.0, prompt="long2", tokens=900)])
    assert u["prompts"] == ["long2", "long"] and u["prompt_tokens"] == [900, 800]
    said = tune_lines.unsteady_line(u)
    assert "prompts long2 and long (900 and 800 input tokens) at 25.0 and 40.0 tok/s (1.60x)" in said
    assert tune.unsteady(steady + [row(25.0, prompt="longer", tokens=1100)]) == []  # 1.4x the input: its own rate
    # rows written before `prompt_tokens` existed compare by prompt alone
    assert tune.unsteady([dict(r, prompt_tokens=None) for r in steady + [row(25.0, prompt="long2", tokens=900)]]) == []
    # one prompt built to two lengths (--input-len) is two inputs
    tiers = [dict(row(rate, prompt="f1", tokens=n), input_len=n) for rate, n in ((92.0, 64), (40.0, 1024), (20.0, 1024))]
    assert tune.unsteady(tiers[:2]) == [] and tune.unsteady(tiers)[0]["prompts"] == ["f1 at 1024", "f1 at 1024"]
    old = {"runtime": "torch", "low": 60.0, "high": 97.0}  # an older tune.json's entry
    assert "97.0 tok/s (1.62x) from prompt to prompt" in tune_lines.unsteady_line(old)


def test_each_runtime_says_the_setting_in_its_own_terms():
    from spec_harness import runtimes

    pair = PairSpec("p", "org/target", "org/draft", "/m/t.gguf", "/m/d.gguf", eagle3="/m/head")
    server = runtimes.get("llama-server").library_command(pair, DraftModelSpec(), 3).split()
    assert server[:3] == ["llama-server", "-m", "/m/t.gguf"] and server[server.index("-md") + 1] == "/m/d.gguf"
    assert server[server.index("--spec-draft-n-max") + 1] == "3"
    assert "--spec-type" not in runtimes.get("llama-server").library_command(pair, None, None)
    vllm = runtimes.get("vllm").library_command(pair, Eagle3Spec(), 2)
    cfg = json.loads(vllm.split("--speculative-config ")[1].strip("'"))
    assert cfg == {"method": "eagle3", "model": "/m/head", "num_speculative_tokens": 2}
    assert "prompt_lookup_num_tokens=5" in runtimes.get("hf").library_command(pair, parse_drafter("ngram:3"), 5)
    assert "num_assistant_tokens=4" in runtimes.get("hf").library_command(pair, DraftModelSpec(), 4)
    assert runtimes.get("torch").library_command(pair, DraftModelSpec(), 4) is None  # our loop: the harness line says it


@pytest.mark.parametrize("args, says", [
    (["--max-gamma", "1"], "--max-gamma 1"),
    (["--confirm", "0"], "--confirm 0"),
    (["--rule-out", "-1"], "--rule-out -1"),
    (["--runtime", "nope"], "nope"),
])
def test_bad_settings_are_one_line(tmp_path, args, says):
    r = invoke("tune", "--pair", "tiny", "--out", tmp_path / "t", *args)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_tune_on_the_tiny_pair_predicts_confirms_and_recommends(tmp_path):
    out = tmp_path / "tune"
    args = ["tune", "--runtime", "torch,llamacpp", "--pair", "tiny", "--max-gamma", "3", "--drafter", "model,ngram",
            "--prompts", "factual", "--max-new-tokens", "16", "--out", str(out)]
    r = harness(*args, "--rule-out", "0")  # the best of each runtime confirmed, whatever their prediction
    assert r.returncode == 0, r.stderr
    result = json.loads((out / "tune.json").read_text())
    runtimes = {c["runtime"] for c in result["candidates"]}
    assert runtimes == {"torch [kernels]", "llamacpp"}
    assert all(s.startswith("Per category in ") for s in result["per_task"])  # one category: none expected
    assert result["per_task"] == []
    for rt in runtimes:  # every drafter x gamma 1..3, and the draft model's confidence stopping, predicted
        got = sorted((c["drafter"], c["policy"], c["gamma"]) for c in result["candidates"] if c["runtime"] == rt)
        assert got == sorted((d, p, g) for g in (1, 2, 3) for d, p in [("ngram", "fixed"), ("model", "fixed")]
                             + [("model", f"confidence:{x:g}") for x in tune.CONFIDENCE_P])
    probe = {(c["runtime"], c["drafter"], c["gamma"]): c["speedup"] for c in result["probe"]
             if c["drafter"] and c["policy"] == "fixed"}
    stopping = [c for c in result["probe"] if c["policy"] == f"confidence:{tune_model.STOPPING_P}"]
    assert sorted((c["runtime"], c["drafter"], c["gamma"]) for c in stopping) == [(rt, "model", 3) for rt in sorted(runtimes)]
    for c in stopping:  # rounds by what they drafted: every round, and what a stopped round costs from them
        assert sum(c["drafted"]) > 0 and len(c["drafted"]) == 3 + 1  # rounds that drafted 0..3
    for c in result["candidates"]:  # at the probe's gammas the prediction is the measurement
        if c["gamma"] in (1, 3) and c["policy"] == "fixed":
            assert c["predicted"] == pytest.approx(probe[(c["runtime"], c["drafter"], c["gamma"])])
    for rt in runtimes:  # two of each runtime, one where none is predicted to pay
        best = max(c["predicted"] for c in result["candidates"] if c["runtime"] == rt)
        assert sum(c["runtime"] == rt for c in result["confirmed"]) == (2 if best >= 1.0 else 1)
    assert all(c["measured"] is not None for c in result["confirmed"])
    # each runtime loaded once: its confirm run follows its probe and borrows it
    assert r.stderr.count("[llamacpp] loading tiny") == 1 and r.stderr.count("[torch [kernels]] loading tiny") == 1
    recs = result["recommendations"]
    assert {r["runtime"] for r in recs} == runtimes
    for rec in recs:  # never slower than the baseline measured beside it
        assert rec["speculate"] is not None
        assert rec["best"]["tokens_per_s"] > rec["base"]["tokens_per_s"] or not rec["speculate"]
        assert f"{rec['runtime']}: " + ("speculate" if rec["speculate"] else "do not speculate") in r.stdout
    assert "harness run --runtime llamacpp --pair tiny" in r.stdout
    commands = [line for line in r.stdout.splitlines() if line.startswith("    ")]
    assert sum(c.startswith("    harness run --runtime ") for c in commands) == len(recs)  # one whole line each
    assert max(len(line.replace(str(out), "OUT")) for line in r.stdout.splitlines() if line not in commands) <= 100
    assert (out / "probe" / "results.jsonl").is_file() and (out / "report" / "report.html").is_file()
    # --resume measures nothing again
    n_rows = len((out / "probe" / "results.jsonl").read_text().splitlines())
    confirmed = sorted((out / "confirm").rglob("results.jsonl"))
    n_confirmed = [len(f.read_text().splitlines()) for f in confirmed]
    again = harness(*args, "--rule-out", "0", "--resume")
    assert again.returncode == 0, again.stderr
    assert len((out / "probe" / "results.jsonl").read_text().splitlines()) == n_rows
    assert [len(f.read_text().splitlines()) for f in confirmed] == n_confirmed
    # every candidate ruled out: nothing measured again, "do not speculate" from the probe's baseline
    ruled = harness(*args, "--rule-out", "100", "--resume")
    assert ruled.returncode == 0, ruled.stderr
    result = json.loads((out / "tune.json").read_text())
    assert result["confirmed"] == [] and [len(f.read_text().splitlines()) for f in confirmed] == n_confirmed
    assert all(rec["speculate"] is False and "predicted below 100x" in rec["why"] for rec in result["recommendations"])
    assert "none measured again" in ruled.stdout and "do not speculate" in ruled.stdout


@pytest.mark.slow
def test_tune_under_load_chooses_per_n_from_cells_measured_there(tmp_path):
    out = tmp_path / "tune"
    r = harness("tune", "--runtime", "llama-server", "--pair", "tiny", "--max-gamma", "2", "--drafter", "model",
                "--concurrency", "1,2", "--prompts", "factual", "--max-new-tokens", "12", "--confirm", "1", "--rule-out", "0",
                "--out", str(out))
    assert r.returncode == 0, r.stderr
    result = json.loads((out / "tune.json").read_text())
    assert sorted(rec["n"] for rec in result["recommendations"]) == [1, 2]
    confirmed = {(c["n"], c["gamma"]) for c in result["confirmed"] if c["measured"] is not None}
    for rec in result["recommendations"]:
        if rec["speculate"]:
            assert (rec["n"], rec["best"]["gamma"]) in confirmed  # measured at that N
    assert "at N=2" in r.stdout
    assert r.stderr.count("[llama-server] servers started: ") == 1  # by the probe, which lent them to the confirm


def test_tune_names_a_setting_per_task_from_its_confirm_rows():
    """The confirm run measures each candidate beside the baseline on every prompt: where the
    categories' best settings differ, tune says which for which, and the routed speedup."""
    from spec_harness.reports import routing

    rows = []
    for prompt, category, walls in (("s1", "summarization", (1.0, 0.5, 0.8)), ("q1", "qa", (1.0, 1.2, 0.7))):
        cell = {"runtime": "torch", "torch_forward": "kernels", "pair": "p", "prompt_id": prompt, "category": category,
                "repeat": 0, "temperature": 0.0, "max_new_tokens": 32, "new_tokens": 10, "error": None}
        rows += [{**cell, "mode": "baseline", "wall_s": walls[0]},
                 {**cell, "mode": "speculative", "drafter": "ngram", "gamma": 4, "wall_s": walls[1]},
                 {**cell, "mode": "speculative", "drafter": "eagle3", "gamma": 2, "wall_s": walls[2]}]
    per_task = [routing.sentence(r) for r in routing.routings(rows) if r.differs]
    result = {"confirmed": [], "baselines": [], "recommendations": [], "unsteady": [], "per_task": per_task}
    said = " ".join(" ".join(tune_lines.lines(result, {}, None)).split())
    assert "Per category in torch [kernels]: ngram g4 for summarization; eagle3 g2 for qa" in said
    assert "routed 1.67x over every prompt against 1.33x for eagle3 g2 alone" in said
