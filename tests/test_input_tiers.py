"""reports/input_tiers.py: where speculation stops paying along the input length, measured between
two lengths and predicted from the cost model's inputs as lines in the length."""

from __future__ import annotations

import pytest

from spec_harness.core import theory
from spec_harness.reports import input_tiers


def _tier(n, speedup=None, **costs):
    return {"label": "torch · spec γ=3", "gamma": 3, "input_len": n, "decode_speedup": speedup, **costs}


def test_measured_breakeven_is_where_the_decode_speedup_crosses_one():
    tiers = [_tier(512, 1.3), _tier(1024, 1.1), _tier(2048, 0.9)]
    assert input_tiers.measured_breakeven(tiers) == pytest.approx(1024 + 0.5 * 1024)
    assert input_tiers.measured_breakeven([_tier(512, 1.2), _tier(1024, 1.05)]) is None  # pays throughout
    assert input_tiers.measured_breakeven([_tier(512, 0.8), _tier(1024, 0.7)]) == 512  # never paid


def test_predicted_breakeven_extrapolates_the_costs_growth_with_the_input():
    """v grows by 1 target step per 1000 input tokens; the model says where tau no longer covers
    the round: (1 - 0.6^4) / 0.4 = 3 c + v, i.e. v = 1.876 at 876 tokens, past both measured lengths."""
    alpha, c = 0.6, 0.1
    tau = theory.expected_tokens(alpha, 3)
    tiers = []
    for n in (256, 512):
        v = 1 + n / 1000
        tiers.append(_tier(n, tau / (3 * c + v), v=v, c=c, o=0.0, o_base=0.0, alpha_hat=alpha))
    assert input_tiers.measured_breakeven(tiers) is None
    expected = (tau - 3 * c - 1) * 1000
    assert input_tiers.predicted_breakeven(tiers) == pytest.approx(expected, abs=0.5)
    lines = input_tiers.lines(tiers)
    assert "pays at every measured length (measured)" in lines[0] and f"about {expected:.0f} tokens" in lines[0]


def test_no_prediction_without_two_lengths_to_fit():
    assert input_tiers.predicted_breakeven([_tier(512, 1.1, v=1.2, c=0.1, o=0.0, o_base=0.0, alpha_hat=0.5)]) is None


def test_no_predicted_speedup_passes_tau():
    from itertools import product

    for alpha, c, v, o, o_base in product((0.05, 0.5, 0.95), (0.0, 0.2), (0.5, 1.0, 2.0), (0.0, 0.3), (0.0, 0.5)):
        at = {"alpha_hat": alpha, "c": c, "v": v, "o": o, "o_base": o_base}
        for gamma in (1, 3, 6):
            assert input_tiers.predicted_speedup(at, gamma) <= theory.expected_tokens(alpha, gamma) + 1e-12


def test_where_drafting_and_verifying_are_one_phase_the_rounds_cost_predicts():
    """vLLM's rounds: no c or o, the round's whole cost in target steps grows by 0.5 per 1000 tokens;
    (1 - 0.4^4) / 0.6 = 1.624 tokens a round stop paying where the round costs that much, at 1248."""
    alpha, tau = 0.4, theory.expected_tokens(0.4, 3)
    tiers = [_tier(n, tau / (1 + n / 2000), v=1 + n / 2000, c=None, o=None, o_base=0.0, alpha_hat=alpha,
                   cost_per_round=1 + n / 2000) for n in (512, 1024)]
    assert input_tiers.predicted_breakeven(tiers) == pytest.approx((tau - 1) * 2000, abs=0.5)
    assert "predicted from the round's whole cost and alpha_hat" in input_tiers.lines(tiers)[0]
    assert input_tiers.predicted_speedup({"alpha_hat": alpha, "o_base": 0.2, "cost_per_round": 0.5}, 3) <= tau


def test_a_cell_without_two_measured_costs_is_said_unpredicted_not_paying():
    tiers = [_tier(n, 0.8, v=None, c=None, o=None, o_base=None, alpha_hat=0.3) for n in (512, 1024)]
    assert input_tiers.predicted_breakeven(tiers) is None
    assert "not predicted" in input_tiers.lines(tiers)[0] and "pays up to" not in input_tiers.lines(tiers)[0]
