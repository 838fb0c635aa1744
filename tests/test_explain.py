"""`harness explain`: the speedup decomposition on round records with known alpha, c, v, o and
o_base (every factor and the product by hand), the residual and its parts, hidden phases, the
what-if numbers, cross-runtime comparison, the report section and PNG, the CLI, and a real run of
the tiny pair whose factors must multiply back to its measured speedup."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from spec_harness.core import theory
from spec_harness.harness.cli import main
from spec_harness.core.config import GenerationSettings, SamplingParams
from spec_harness.harness.rows import generation_row
from spec_harness.reports import explain, verdict
from spec_harness.reports.runs import by_drafting
from spec_harness.core.config import PairSpec
from spec_harness.core.records import Generation, Phases, RoundRecord
from tests import synthetic

T = 0.010  # target one-token step (baseline verify), seconds
# gamma 4 at alpha 1/2: accepted counts in the geometric proportions 8:4:2:1:1, so alpha_hat is
# exactly 1/2 and the rounds' tokens per round equal Eq. 1's (31/16): the residual is exactly 1.
GEOMETRIC = [0] * 8 + [1] * 4 + [2] * 2 + [3, 4]


def leviathan_tau(a, g):  # written out here on purpose: the test must not reuse the code it checks
    return (1 - a ** (g + 1)) / (1 - a)


def gen(rounds: list[RoundRecord], prefill: float) -> Generation:
    tot = {k: sum(getattr(r, k) for r in rounds) for k in ("draft_s", "verify_s", "sampling_s", "unaccounted_s", "wall_s")}
    phases = Phases(prefill_s=prefill, **{**tot, "wall_s": tot["wall_s"] + prefill})
    return Generation(list(range(sum(r.emitted for r in rounds))), phases, rounds)


def spec_rounds(accepted: list[int], gamma=4, c=0.25, v=2.0, sampling=0.3, unacc=0.2, last_drafted=None):
    """Rounds drafting gamma tokens at c target steps each, verifying in v steps, with sampling
    and unaccounted time in steps; the last round may draft fewer (a generation's cut end)."""
    out = []
    for i, k in enumerate(accepted):
        d = last_drafted if (last_drafted is not None and i == len(accepted) - 1) else gamma
        k = min(k, d)
        times = (d * c * T, v * T, sampling * T, unacc * T)
        out.append(RoundRecord(d, k, k + 1, *times, sum(times)))
    return out


def base_rounds(n: int, sampling=0.1, unacc=0.1):
    times = (0.0, T, sampling * T, unacc * T)
    return [RoundRecord(0, 0, 1, *times, sum(times)) for _ in range(n)]


def rows(runtime="fast", accepted=GEOMETRIC, gamma=4, base_prefill=0.0, spec_prefill=0.0, n_base=31, base_o=(0.1, 0.1),
         **kw):
    """A baseline of n_base steps (base_o: its sampling and unaccounted time in steps) and a
    speculative generation of spec_rounds(accepted, gamma, **kw)."""
    g = GenerationSettings(SamplingParams(0.0), gamma, 64, 0)
    pair = PairSpec("p")
    b = generation_row(pair, synthetic.FakeRuntime(), runtime, "baseline", synthetic.FACTUAL, 0, g,
                       gen(base_rounds(n_base, *base_o), base_prefill))
    s = generation_row(pair, synthetic.FakeRuntime(), runtime, "speculative", synthetic.FACTUAL, 0, g,
                 gen(spec_rounds(accepted, gamma, **kw), spec_prefill), baseline=b)
    return [b, s]


def factors(e) -> dict:
    return {f["key"]: f["factor"] for f in e["factors"]}


def test_known_alpha_c_v_o_reproduce_each_factor_and_the_product():
    (e,) = explain.explain(rows())
    assert e["alpha_hat"] == pytest.approx(0.5) and e["tau"] == pytest.approx(31 / 16)
    assert (e["c"], e["v"], e["o"], e["o_base"]) == pytest.approx((0.25, 2.0, 0.5, 0.2))
    f = factors(e)
    assert f["tau"] == pytest.approx(leviathan_tau(0.5, 4)) == pytest.approx(31 / 16)
    assert f["draft"] == pytest.approx(1 / (4 * 0.25 + 1))
    assert f["verify"] == pytest.approx((4 * 0.25 + 1) / (4 * 0.25 + 2.0))
    assert f["overhead"] == pytest.approx((4 * 0.25 + 2.0) / (4 * 0.25 + 2.0 + 0.5))
    assert f["baseline"] == pytest.approx(1.2) and f["prefill"] == pytest.approx(1.0)
    # measured: baseline 12 ms per token; speculative 16 rounds x 35 ms for 31 tokens
    measured = 0.012 / (16 * 0.035 / 31)
    assert e["measured"] == pytest.approx(measured)
    assert e["product"] == pytest.approx(31 / 16 * 1.2 / 3.5) == pytest.approx(measured)
    assert e["residual"] == pytest.approx(1.0)
    assert list(f) == ["tau", "draft", "verify", "overhead", "baseline", "prefill", "residual"]
    levels = [x["level"] for x in e["factors"]]
    assert levels[-1] == pytest.approx(measured) and levels[0] == pytest.approx(31 / 16)


def test_prefill_is_its_own_factor():
    (e,) = explain.explain(rows(base_prefill=0.020, spec_prefill=0.025))
    base_wall, spec_wall = 0.020 + 31 * 0.012, 0.025 + 16 * 0.035
    assert factors(e)["prefill"] == pytest.approx((base_wall / (31 * 0.012)) / (spec_wall / (16 * 0.035)))
    assert e["measured"] == pytest.approx(base_wall / spec_wall)
    assert e["residual"] == pytest.approx(1.0)


def test_residual_is_reported_and_split_into_its_known_parts():
    # every round accepts exactly 2 of 4: alpha_hat 2/3, but 3 tokens per round where Eq. 1 says
    # 2.605 (acceptance is not i.i.d.); the last round drafts only 1 token (cut at the end)
    (e,) = explain.explain(rows(accepted=[2] * 10, last_drafted=1, n_base=29))
    a = 19 / (19 + 9)  # 9 x 2 accepted + 1; 9 rejections (the short round accepts its one draft)
    assert e["alpha_hat"] == pytest.approx(a)
    tau_rounds = 29 / 10
    tau_model = (9 * leviathan_tau(a, 4) + leviathan_tau(a, 1)) / 10  # Eq. 1 at each round's drafted length
    assert e["tau_model"] == pytest.approx(tau_model)
    g_eff = (9 * 4 + 1) / 10  # the draft factor prices the tokens drafted, not gamma x rounds
    assert e["gamma_eff"] == pytest.approx(g_eff) and factors(e)["draft"] == pytest.approx(1 / (g_eff * 0.25 + 1))
    p = e["residual_parts"]
    assert p["acceptance"] == pytest.approx(tau_rounds / tau_model)
    assert p["other"] == pytest.approx(1.0)
    assert e["residual"] == pytest.approx(p["acceptance"])
    assert e["product"] * e["residual"] == pytest.approx(e["measured"])
    assert abs(e["residual"] - 1) > explain.RESIDUAL_TOLERANCE
    assert e["residual_text"].startswith(f"Residual x{e['residual']:.3f} (measured / product, outside 5%)")


def test_rounds_of_different_lengths_keep_the_waterfall_exact():
    """Confidence stopping, a heuristic schedule or prompt lookup: rounds draft 0..6 tokens. The
    draft factor prices the tokens drafted (not gamma x rounds), tau is Eq. 1 at each round's
    length, so with acceptance in Eq. 1's proportions per length nothing is left unexplained."""
    lengths = [6, 2, 0, 3, 6, 1]
    rounds = []
    for d in lengths:  # every round accepts all but its last draft: alpha_hat < 1, no i.i.d. claim
        k = max(d - 1, 0)
        times = (d * 0.25 * T, 2.0 * T, 0.3 * T, 0.2 * T)
        rounds.append(RoundRecord(d, k, k + 1, *times, sum(times)))
    g = GenerationSettings(SamplingParams(0.0), 6, 64, 0, draft_policy="confidence:0.5")
    pair = PairSpec("p")
    n = sum(r.emitted for r in rounds)
    b = generation_row(pair, synthetic.FakeRuntime(), "fast", "baseline", synthetic.FACTUAL, 0, g, gen(base_rounds(n), 0.0))
    sp = generation_row(pair, synthetic.FakeRuntime(), "fast", "speculative", synthetic.FACTUAL, 0, g, gen(rounds, 0.0), baseline=b)
    assert sp["mean_drafted"] == pytest.approx(18 / 6) and sp["drafted_histogram"] == [1, 1, 1, 1, 0, 0, 2]
    (e,) = explain.explain([b, sp])
    a = e["alpha_hat"]
    assert a == pytest.approx(13 / (13 + 5))
    assert e["gamma"] == 6 and e["gamma_eff"] == pytest.approx(3.0)
    assert factors(e)["draft"] == pytest.approx(1 / (3.0 * 0.25 + 1))
    assert e["tau_model"] == pytest.approx(sum(leviathan_tau(a, d) for d in lengths) / 6)
    assert e["product"] * e["residual"] == pytest.approx(e["measured"])
    assert e["residual_parts"]["acceptance"] == pytest.approx(e["tau"] / e["tau_model"])
    assert e["residual_parts"]["other"] == pytest.approx(1.0)
    assert e["what_if"]["model_speedup"] == pytest.approx(e["tau_model"] * 1.2 / (3.0 * 0.25 + 2.0 + 0.5))


def test_a_runtime_that_hides_its_draft_phase_gets_one_cost_factor():
    rs = rows()
    rs[1] = dict(rs[1], draft_s=None, rounds=[dict(r, draft_s=None) for r in rs[1]["rounds"]])
    (e,) = explain.explain(rs)
    f = factors(e)
    assert "draft" not in f and f["costs"] == pytest.approx(1 / (1.0 + 2.0 + 0.5))
    assert e["residual"] == pytest.approx(1.0) and e["what_if"] is None
    assert "does not split" in e["verdict"]


def test_no_baseline_or_no_rounds_is_unavailable_with_a_reason():
    (e,) = explain.explain(rows()[1:])
    assert e["unavailable"] == "no baseline rows with the same settings" and e["factors"] == []
    assert e["verdict"] == "No decomposition: no baseline rows with the same settings."
    rs = [dict(r, rounds=[]) for r in rows()]
    assert explain.explain(rs)[0]["unavailable"].startswith("no per-round acceptance records")


def test_what_if_breakeven_and_best_gamma_by_hand():
    (e,) = explain.explain(rows())
    # v linear from 1 at gamma 0 to 2.0 measured at gamma 4: v(g) = 1 + g/4; o 0.5 per round,
    # c 0.25, o_base 0.2: S(g) = tau(0.5, g) * 1.2 / (0.25 g + 1 + g/4 + 0.5)
    def s(g, a=0.5):
        return leviathan_tau(a, g) * 1.2 / (0.5 * g + 1.5)

    w = e["what_if"]
    assert w["model_speedup"] == pytest.approx(s(4))
    assert w["best_gamma"] == max(range(1, 33), key=s) == 1
    assert w["model_speedup_best"] == pytest.approx(s(1))
    assert w["run_speedup_best"] == pytest.approx(e["measured"] * s(1) / s(4))
    assert s(4, w["breakeven_alpha"]) == pytest.approx(1.0)
    assert w["breakeven_alpha_any_gamma"] <= w["breakeven_alpha"]
    assert e["what_if_text"] == (f"What-if: breaking even at gamma 4 needs alpha_hat {w['breakeven_alpha']:.2f} (now 0.50); "
                                 f"gamma 1 is best at these costs: the run would have had about {w['run_speedup_best']:.2f}x.")


def test_the_run_at_the_best_gamma_is_what_a_run_there_measures_with_its_prefill():
    """A long prompt's prefill dilutes a slow decode toward 1x; the what-if holds that prefill as
    time, not as the factor it was at gamma 4, so it predicts exactly what rows at gamma 1 with the
    same costs (v on the model's line: 1 + 1/4) and the same prompt measure."""
    at4 = rows(accepted=GEOMETRIC * 30, n_base=930, base_prefill=10.0, spec_prefill=10.5)  # 930 tokens
    at1 = rows(accepted=[1, 0] * 310, gamma=1, v=1.25, n_base=930, base_prefill=10.0, spec_prefill=10.5)
    (e,), (there,) = explain.explain(at4), explain.explain(at1)
    assert factors(e)["prefill"] > 1.1 and e["residual"] == pytest.approx(1.0)
    assert there["alpha_hat"] == pytest.approx(0.5) and there["residual"] == pytest.approx(1.0)
    w = e["what_if"]
    assert w["best_gamma"] == 1
    assert w["model_speedup_best"] == pytest.approx(there["product"] / factors(there)["prefill"])
    assert w["run_speedup_best"] == pytest.approx(there["measured"])
    assert w["run_speedup_best"] < leviathan_tau(0.5, 1) - 0.1  # the ceiling guard plays no part


@pytest.mark.parametrize("prefill", [0.0, 0.3])  # seconds before decoding: none, or about as long as the decode
@pytest.mark.parametrize("accepted", [[0] * 23 + [1] * 2, GEOMETRIC, [4, 4, 3, 4, 2, 4, 4, 4, 1, 4], [2] * 10],
                         ids=["alpha 0.08", "alpha 0.5", "alpha 0.9", "rounds above Eq. 1"])
def test_no_what_if_exceeds_the_tokens_a_round_can_yield(accepted, prefill):
    """Over c, v (one below the one-token step it is measured in, as timing noise leaves it) and a
    baseline whose own overhead per step exceeds a round's (one slow step in its sum): neither the
    model's speedup at the best gamma nor the run's, in explain and in the verdict's cost-model
    line, exceeds tau(alpha_hat, gamma) = (1 - a^(g+1)) / (1 - a) there. Rounds that each accept 2
    of 4 yield more than Eq. 1 at their alpha_hat: that residual, held, is what the guard caps."""
    n = sum(k + 1 for k in accepted)
    for c in (0.02, 0.3, 0.8):
        for v in (0.7, 1.0, 2.5):
            for base_o in ((0.1, 0.1), (0.5, 1.5)):
                rs = rows("r", accepted=accepted, n_base=n, c=c, v=v, sampling=0.05, unacc=0.05, base_o=base_o,
                          base_prefill=prefill, spec_prefill=prefill * 1.05)
                (e,) = explain.explain(rs)
                w, a = e["what_if"], e["alpha_hat"]
                ceiling = leviathan_tau(a, w["best_gamma"])
                assert w["model_speedup_best"] <= ceiling + 1e-9, (c, v, base_o)
                assert w["run_speedup_best"] <= ceiling + 1e-9, (c, v, base_o)
                t = verdict.build(by_drafting(rs))["try"]
                if t and "predicted" in t:
                    assert t["predicted"] <= leviathan_tau(a, t["best_gamma"]) + 1e-9, (c, v, base_o)


def test_a_round_costs_at_least_a_baseline_step_in_the_what_if():
    """A verify pass measured under the one-token step (v 0.7) and a round's overhead under the
    baseline step's (o 0.1, o_base 2.0): the what-if prices v at 1 and o at o_base, the floors of
    the work they stand for, so at alpha 0 a round is no cheaper than a baseline step."""
    (e,) = explain.explain(rows(c=0.1, v=0.7, sampling=0.05, unacc=0.05, base_o=(1.0, 1.0)))
    assert (e["v"], e["o"], e["o_base"]) == pytest.approx((0.7, 0.1, 2.0))

    def s(g, a=0.5):  # a round of g drafts at 0.1 steps each, v 1 and o 2: never under the step's 1 + 2
        return leviathan_tau(a, g) * 3.0 / (0.1 * g + 1.0 + 2.0)

    w = e["what_if"]
    assert w["model_speedup"] == pytest.approx(31 / 16 * 3.0 / (0.4 + 0.7 + 0.1))  # the rounds as they ran
    assert w["best_gamma"] == max(range(1, 33), key=s)
    assert w["model_speedup_best"] == pytest.approx(s(w["best_gamma"]))
    assert w["model_speedup_best"] < leviathan_tau(0.5, w["best_gamma"])
    assert w["breakeven_alpha_any_gamma"] > 0  # drafts never accepted do not pay at any gamma


def test_costed_speedup_reduces_to_leviathan_and_piecewise_linear_costs():
    assert theory.costed_speedup(0.7, 4, theory.RoundCosts(0.1)) == pytest.approx(theory.expected_speedup(0.7, 4, 0.1))
    costs = theory.RoundCosts(0.1, v=2.0, o=0.5, o_base=0.2)
    assert theory.costed_speedup(0.7, 4, costs) == pytest.approx(leviathan_tau(0.7, 4) * 1.2 / (0.4 + 2.5))
    assert theory.breakeven_alpha(4, 0.1) == theory.breakeven_alpha(4, theory.RoundCosts(0.1))
    assert theory.optimal_gamma(0.8, 0.1) == theory.optimal_gamma(0.8, theory.RoundCosts(0.1))
    v = theory.piecewise_linear({4: 2.0}, anchor=1.0)
    assert [v(g) for g in (0, 2, 4, 8)] == pytest.approx([1.0, 1.5, 2.0, 3.0])
    v = theory.piecewise_linear({2: 1.5, 4: 1.4}, anchor=1.0)
    assert [v(3), v(10)] == pytest.approx([1.45, 1.4])  # never cheaper beyond the last point
    assert theory.piecewise_linear({4: 0.5})(12) == 0.5
    # a verify pass that grows with gamma moves the best gamma down
    assert theory.optimal_gamma(0.8, theory.RoundCosts(0.05, v=lambda g: 1 + g / 2)) < theory.optimal_gamma(0.8, 0.05)


def test_verdict_names_the_largest_factor():
    # acceptance rounds at alpha ~0.5 lose more than cheap costs
    (e,) = explain.explain(rows(c=0.01, v=1.0, sampling=0.0, unacc=0.01))
    assert e["verdict"].startswith("Acceptance is the largest factor (x0.39)")
    (e,) = explain.explain(rows(accepted=[4] * 10, c=0.01, v=1.0, sampling=2.0, unacc=1.0))
    assert e["verdict"].startswith("Sampling and orchestration are the largest factor")
    (e,) = explain.explain(rows(accepted=[4] * 10, c=0.01, v=4.0, sampling=0.0, unacc=0.01))
    assert e["verdict"].startswith("Verification is the largest factor") and "v = 4.00" in e["verdict"]
    (e,) = explain.explain(rows(accepted=[4] * 10, c=0.5, v=1.0, sampling=0.0, unacc=0.01))
    assert e["verdict"].startswith("The draft's cost is the largest factor")


def test_a_few_long_rounds_are_flagged_as_timing_noise():
    (e,) = explain.explain(rows())
    assert e["noise_text"] is None and e["v_median"] == pytest.approx(2.0)
    rs = rows()
    long = dict(rs[1]["rounds"][0], verify_s=42 * T)  # one verify pass hit by contention
    rs[1] = dict(rs[1], rounds=[long] + rs[1]["rounds"][1:], verify_s=rs[1]["verify_s"] + 40 * T,
                 wall_s=rs[1]["wall_s"] + 40 * T)
    (e,) = explain.explain(rs)
    assert e["v"] == pytest.approx(2.0 + 40 / 16) and e["v_median"] == pytest.approx(2.0)
    assert e["noise_text"].startswith("Timing noise: v 4.50 pooled vs 2.00 median")
    assert e["residual"] == pytest.approx(1.0)  # the pooled split still multiplies back


def test_compare_across_runtimes_names_what_differs():
    rs = rows("lean", sampling=0.1, unacc=0.1) + rows("heavy", sampling=1.0, unacc=1.0)
    lines = explain.compare(explain.explain(rs))
    assert len(lines) == 1
    assert lines[0].startswith("Across runtimes (pair p, gamma 4")
    assert "alpha_hat, c, v, o_base agree" in lines[0]
    assert "o differs (lean 0.20, heavy 2.00): the runtime's loop" in lines[0]
    same = explain.compare(explain.explain(rows("a") + rows("b")))
    assert "every factor agrees" in same[0]


def test_report_has_the_explain_section_and_waterfall(tmp_path):
    from PIL import Image

    from spec_harness.reports import write_report

    d = synthetic.write_run(tmp_path / "run", rows("lean") + rows("heavy", sampling=1.0, unacc=1.0))
    text = write_report([d]).read_text()
    assert "## Why this speedup: factors from tau to measured" in text and "![Speedup waterfall](waterfall.png)" in text
    assert "| lean · spec γ=4 | 1.94x | 0.500 | 0.667 | 0.857 | 1.200 | 1.000 | 1.000 | 0.66x |" in text
    assert "o differs (lean 0.50, heavy 2.00)" in text
    with Image.open(d / "report" / "waterfall.png") as im:
        assert im.format == "PNG" and im.size[0] > 600
    doc = json.loads((d / "report" / "report.json").read_text())
    assert doc["explain"][0]["factors"][0]["key"] == "tau" and doc["explain_comparisons"]


def test_explain_command(tmp_path):
    d = synthetic.write_run(tmp_path / "run", rows())
    res = CliRunner().invoke(main, ["explain", str(d)])
    assert res.exit_code == 0, res.output
    assert f"waterfall: {d / 'report' / 'waterfall.png'}" in res.output
    # the report's tables, fitted to a terminal 100 columns wide: each cell's factors, every one said
    lines = res.output.splitlines()
    assert all(len(line) <= 100 for line in lines if not line.startswith("waterfall: "))
    assert any(line.startswith("fast · spec γ=4") and "tau" in line for line in lines)
    assert (d / "report" / "explain.csv").is_file() and json.loads((d / "report" / "explain.json").read_text())["explain"]
    only_base = synthetic.write_run(tmp_path / "base", rows()[:1])
    res = CliRunner().invoke(main, ["explain", str(only_base)])
    assert res.exit_code == 2 and res.output.strip().splitlines() == [
        "error: no successful speculative rows to explain: explain needs speculative and baseline rows of a runtime"]
    res = CliRunner().invoke(main, ["explain", str(tmp_path / "nope")])
    assert res.exit_code == 2 and res.output.startswith("error: no such results folder")


@pytest.mark.slow
def test_real_run_of_the_tiny_pair_multiplies_back_to_its_speedup(tmp_path, tiny_pair):
    """The torch runtime on the tiny pair: the factors times the residual are the measured
    speedup, and the residual is either within 5 % or fully accounted for by its known parts."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "p1", "category": "factual", "prompt": "The water cycle"}) + "\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--runtime", "torch", "--pair", "tiny", "--max-new-tokens", "24", "--warmup", "1",
                                    "--prompts", str(prompts), "--device", "cpu", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["explain", str(out)])
    assert res.exit_code == 0, res.output
    (e,) = json.loads((out / "report" / "explain.json").read_text())["explain"]
    assert e["unavailable"] is None
    product = 1.0
    for f in e["factors"][:-1]:
        product *= f["factor"]
        assert f["level"] == pytest.approx(product)
    assert product == pytest.approx(e["product"])
    assert e["product"] * e["residual"] == pytest.approx(e["measured"], rel=1e-9)  # the identity
    p = e["residual_parts"]
    assert p["acceptance"] * p["other"] == pytest.approx(e["residual"])
    assert abs(e["residual"] - 1) <= 0.05 or abs(p["other"] - 1) < 1e-6  # within 5 %, or explained
    assert p["other"] == pytest.approx(1.0, abs=1e-6)  # every phase is visible in the torch runtime
    assert f"Residual x{e['residual']:.3f}" in res.output and "largest factor" in res.output
    assert (out / "report" / "waterfall.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Why this speedup" in (out / "report" / "report.md").read_text()


def test_a_report_section_fits_a_100_column_terminal_without_losing_a_cell():
    from spec_harness.harness.console import fit

    narrow = "## T\n\n| cell | a | b |\n|---|---|---|\n| x | 1.0 | 2 |\n| longer name | 3 | - |"
    assert fit(narrow).splitlines()[2:] == ["cell           a  b", "x            1.0  2", "longer name    3  -"]  # numbers right
    wide = "| cell | " + " | ".join(f"factor {k}" for k in range(12)) + " |\n|" + "---|" * 13 + "\n| x · γ=4 | " + \
        " | ".join(f"{k}.25" for k in range(12)) + " |"
    got = fit(wide).splitlines()
    assert len(got) > 1 and all(len(line) <= 100 for line in got) and got[1].startswith("  ")
    assert " ".join(line.strip() for line in got) == "x · γ=4: " + "; ".join(f"factor {k} {k}.25" for k in range(12))
    bullet = "- " + " ".join(["word"] * 40)
    got = fit(bullet).splitlines()
    assert len(got) == 3 and all(len(line) <= 100 for line in got) and all(line.startswith("  ") for line in got[1:])
    assert " ".join(line.strip() for line in got) == bullet
