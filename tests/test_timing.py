"""The phase identity prefill + draft + verify + sampling + unaccounted == wall."""

import time

import pytest

from core.config import GenerationSettings, SamplingParams
from core.timing import PhaseTimer

PH = ("prefill_s", "draft_s", "verify_s", "sampling_s", "unaccounted_s")


def test_timer_identity_is_exact_in_nanoseconds():
    calls = []
    timer = PhaseTimer(sync=lambda: calls.append(1))
    timer.start()
    with timer.phase("prefill"):
        time.sleep(0.002)
    for _ in range(3):
        timer.begin_round()
        with timer.phase("draft"):
            time.sleep(0.001)
        with timer.phase("verify"):
            time.sleep(0.001)
        time.sleep(0.001)  # orchestration
        r = timer.end_round()
        assert sum(r.ns.values()) + r.unaccounted_ns == r.wall_ns
        assert r.unaccounted_ns >= 1_000_000
    total = timer.stop()
    assert sum(total.ns.values()) + total.unaccounted_ns == total.wall_ns
    assert total.ns["prefill"] >= 2_000_000 and total.ns["draft"] >= 3_000_000
    assert calls, "sync must be called before reading the clock"


def test_phase_is_booked_even_when_the_body_raises():
    timer = PhaseTimer()
    timer.start()
    with pytest.raises(ValueError):
        with timer.phase("verify"):
            time.sleep(0.001)
            raise ValueError
    assert timer.stop().ns["verify"] >= 1_000_000


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_generation_phases_sum_to_wall(torch_rt, temperature):
    ids = torch_rt.encode("Photosynthesis is")
    gen = GenerationSettings(SamplingParams(temperature=temperature, top_k=50, top_p=0.9), gamma=3, max_new_tokens=20, ignore_eos=True)
    for g in (torch_rt.generate_baseline(ids, gen), torch_rt.generate_speculative(ids, gen)):
        ph = g.phases.to_dict()
        assert all(ph[k] >= 0 for k in PH)
        assert sum(ph[k] for k in PH) == pytest.approx(ph["wall_s"], abs=1e-9)
        for r in g.rounds:
            d = r.to_dict()
            assert all(d[k] >= 0 for k in PH[1:])
            assert sum(d[k] for k in PH[1:]) == pytest.approx(d["wall_s"], abs=1e-9)
        # rounds fit inside the generation
        assert sum(r.wall_s for r in g.rounds) <= ph["wall_s"] - ph["prefill_s"] + 1e-9


def test_the_harness_s_own_bookkeeping_is_outside_every_wall():
    """outside(): in no phase and in no wall, per round and per generation; the identity still holds."""
    timer = PhaseTimer()
    timer.start()
    timer.begin_round()
    with timer.phase("verify"):
        time.sleep(0.002)
    with timer.outside():
        time.sleep(0.02)
    r = timer.end_round()
    total = timer.stop()
    assert 2_000_000 <= r.wall_ns < 15_000_000 and total.wall_ns < 15_000_000
    assert sum(r.ns.values()) + r.unaccounted_ns == r.wall_ns and r.unaccounted_ns >= 0
    timer.start()
    timer.begin("draft")
    with pytest.raises(RuntimeError, match="while phase 'draft' is open"):
        with timer.outside():
            pass
