"""Metrics on synthetic round records with known answers."""

import random

import pytest

from spec_harness.core import metrics


def simulate_rounds(alpha: float, gamma: int, n: int, seed: int = 0) -> list[dict]:
    """Rounds where each draft position is accepted with probability alpha until the first rejection."""
    rng = random.Random(seed)
    rounds = []
    for _ in range(n):
        k = 0
        while k < gamma and rng.random() < alpha:
            k += 1
        rounds.append({"drafted": gamma, "accepted": k, "emitted": k + 1})
    return rounds


def test_alpha_hat_recovers_alpha_where_acceptance_rate_is_biased():
    rounds = simulate_rounds(0.8, 4, 20000)
    assert metrics.alpha_hat(rounds) == pytest.approx(0.8, abs=0.01)
    assert metrics.acceptance_rate(rounds) == pytest.approx(0.59, abs=0.01)
    assert metrics.expected_alpha_acceptance_rate(0.8, 4) == pytest.approx(0.5904)


def test_alpha_hat_counts_full_accepts_as_no_rejection():
    rounds = [{"drafted": 4, "accepted": 4, "emitted": 5}, {"drafted": 4, "accepted": 1, "emitted": 2}]
    assert metrics.alpha_hat(rounds) == pytest.approx(5 / 6)
    assert metrics.acceptance_rate(rounds) == pytest.approx(5 / 8)


def test_per_position_histogram_and_tau():
    rounds = [
        {"drafted": 3, "accepted": 0, "emitted": 1},
        {"drafted": 3, "accepted": 1, "emitted": 2},
        {"drafted": 3, "accepted": 3, "emitted": 4},
        {"drafted": 3, "accepted": 2, "emitted": 3},
        {"drafted": 1, "accepted": 1, "emitted": 1},  # clamped last round, truncated output
    ]
    assert metrics.accept_histogram(rounds, 3) == [1, 2, 1, 1]
    # position 1: 5 rounds reached it, 4 accepted; position 2: 3 reached (drafted >= 2), 2 accepted; 3: 2 reached, 1
    assert metrics.per_position_acceptance(rounds, 3) == [4 / 5, 2 / 3, 1 / 2]
    assert metrics.mean_accepted_len(rounds) == pytest.approx(11 / 5)
    # marginal: of the 5 drafting rounds, 4 accepted position 1, 2 position 2, 1 position 3
    assert metrics.per_position_marginal(rounds, 3) == [4 / 5, 2 / 5, 1 / 5]
    # acceptance length: accepted + 1 per drafting round = (1 + 2 + 4 + 3 + 2) / 5 = 1 + the sum of the marginals
    assert metrics.acceptance_length(rounds) == pytest.approx(12 / 5) == pytest.approx(1 + sum([4 / 5, 2 / 5, 1 / 5]))
    baseline = [{"drafted": 0, "accepted": 0, "emitted": 1}] * 3  # rounds that drafted nothing are not counted
    assert metrics.acceptance_length(rounds + baseline) == metrics.acceptance_length(rounds)
    assert metrics.per_position_marginal(baseline, 2) == [None, None]


def test_empty_and_baseline_rounds_give_none_not_zero():
    assert metrics.alpha_hat([]) is None
    assert metrics.acceptance_rate([{"drafted": 0, "accepted": 0, "emitted": 1}]) is None


def test_rates_and_speedup():
    assert metrics.tokens_per_s(50, 2.5, 0.5) == pytest.approx(25.0)
    assert metrics.e2e_tokens_per_s(50, 2.5) == pytest.approx(20.0)
    assert metrics.speedup(base_wall_s=2.0, base_tokens=40, spec_wall_s=1.0, spec_tokens=40) == pytest.approx(2.0)
    assert metrics.speedup(2.0, 40, 1.0, 0) is None


def test_generation_metrics_baseline_has_null_spec_fields():
    row = metrics.generation_metrics({"wall_s": 1.0, "prefill_s": 0.2}, [{"drafted": 0, "accepted": 0, "emitted": 1}] * 4, 4, False, 4)
    assert all(row[k] is None for k in metrics.SPEC_ONLY)
    assert row["tokens_per_s"] == pytest.approx(5.0)


def test_quartiles():
    assert metrics.quartiles([4, 1, 3, 2, None]) == (1.75, 2.5, 3.25)
    assert metrics.quartiles([]) == (None, None, None)
