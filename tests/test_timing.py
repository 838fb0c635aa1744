"""The phase timer: each phase books what was spent in it, unaccounted is what no phase booked (it
is defined as wall minus the phases, so their sum is the wall by construction; what can be wrong
is a phase booking too little or too much, or two phases at once), one phase at a time."""

import time

import pytest

from spec_harness.core import timing
from spec_harness.core.config import GenerationSettings, SamplingParams
from spec_harness.core.timing import PhaseTimer
from tests.phases import UNACCOUNTED_MAX, least_unaccounted

PH = ("prefill_s", "draft_s", "verify_s", "sampling_s", "unaccounted_s")


class _Clock:
    """A perf_counter_ns that moves only when the test sleeps: bookings are exact, whatever the
    machine's scheduler does (a real 1 ms sleep on a loaded CI runner took 4.7 ms)."""

    def __init__(self):
        self.ns = 1_000_000_000

    def perf_counter_ns(self):
        return self.ns

    def sleep(self, s):
        self.ns += round(s * 1e9)


def test_each_phase_books_its_own_time_and_orchestration_is_unaccounted(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(timing, "time", clock)
    calls = []
    timer = PhaseTimer(sync=lambda: calls.append(1))
    timer.start()
    with timer.phase("prefill"):
        clock.sleep(0.002)
    for _ in range(3):
        timer.begin_round()
        with timer.phase("draft"):
            clock.sleep(0.001)
        with timer.phase("verify"):
            clock.sleep(0.003)
        clock.sleep(0.002)  # orchestration: in no phase
        r = timer.end_round()
        assert (r.ns["draft"], r.ns["verify"], r.ns["sampling"]) == (1_000_000, 3_000_000, 0)
        assert r.unaccounted_ns == 2_000_000  # the orchestration, not booked to draft or verify
        assert r.wall_ns == 6_000_000
    total = timer.stop()
    assert (total.ns["prefill"], total.ns["draft"], total.ns["verify"]) == (2_000_000, 3_000_000, 9_000_000)
    assert total.unaccounted_ns == 6_000_000 and total.wall_ns == 20_000_000
    assert calls, "sync must be called before reading the clock"


def test_phases_book_real_sleeps_on_the_real_clock():
    """The real perf_counter_ns: a sleep never ends early, so each phase books at least its sleep."""
    timer = PhaseTimer()
    timer.start()
    timer.begin_round()
    with timer.phase("draft"):
        time.sleep(0.001)
    with timer.phase("verify"):
        time.sleep(0.003)
    time.sleep(0.002)
    r = timer.end_round()
    assert r.ns["draft"] >= 1_000_000 and r.ns["verify"] >= 3_000_000 and r.unaccounted_ns >= 2_000_000


def test_one_phase_at_a_time():
    timer = PhaseTimer()
    timer.start()
    timer.begin("draft")
    with pytest.raises(RuntimeError, match="begun while 'draft' is open"):
        timer.begin("verify")


def test_phase_is_booked_even_when_the_body_raises():
    timer = PhaseTimer()
    timer.start()
    with pytest.raises(ValueError):
        with timer.phase("verify"):
            time.sleep(0.001)
            raise ValueError
    assert timer.stop().ns["verify"] >= 1_000_000


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_generation_books_its_work_to_its_phases(torch_rt, temperature):
    """Every phase non-negative, the model passes in draft and verify, the choices in sampling,
    little left unaccounted (the loop's own bookkeeping), and the rounds inside the generation."""
    ids = torch_rt.encode("Photosynthesis is")
    gen = GenerationSettings(SamplingParams(temperature=temperature, top_k=50, top_p=0.9), gamma=3, max_new_tokens=20, ignore_eos=True)
    for spec, make in ((False, torch_rt.generate_baseline), (True, torch_rt.generate_speculative)):
        g = least_unaccounted(lambda: make(ids, gen))  # made again if a preempted worker crossed the bound
        ph = g.phases.to_dict()
        assert all(ph[k] >= 0 for k in PH)
        assert ph["prefill_s"] > 0 and ph["verify_s"] > 0 and ph["sampling_s"] > 0
        assert (ph["draft_s"] > 0) == spec
        assert ph["unaccounted_s"] < UNACCOUNTED_MAX * ph["wall_s"]  # the passes and choices are most of it
        for r in g.rounds:
            d = r.to_dict()
            assert all(d[k] >= 0 for k in PH[1:]) and d["verify_s"] > 0
        # rounds fit inside the generation, after its prefill
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
    assert r.ns["verify"] >= 2_000_000 and 0 <= r.unaccounted_ns < 15_000_000  # the 20 ms are in neither
    timer.start()
    timer.begin("draft")
    with pytest.raises(RuntimeError, match="while phase 'draft' is open"):
        with timer.outside():
            pass
