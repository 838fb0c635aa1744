"""What every runtime's generations must show of their phases (used by tests/test_phases.py and
the runtimes' own tests). unaccounted_s is wall minus the other phases, so their sum is the wall
by construction; what these checks catch is a phase booking nothing or too much: every phase
non-negative, the model's passes booked where they belong, the loop's own work a small part of
the wall, and the rounds inside the generation, after its prefill."""

from __future__ import annotations

from spec_harness.core.metrics import TIME_FIELDS

NS = 1e-9
UNACCOUNTED_MAX = 0.5  # of the wall: a runtime booking its passes nowhere would leave most of it unaccounted


def least_unaccounted(make, tries: int = 3):
    """make() until the loop's own work is under UNACCOUNTED_MAX of the wall, at most `tries` times;
    the last generation. A worker preempted on a loaded 2-core machine can cross the bound once (a
    wall of a few ms); a phase that books nothing crosses it every time."""
    for _ in range(tries):
        g = make()
        p = g.phases.to_dict()
        if p["unaccounted_s"] < UNACCOUNTED_MAX * p["wall_s"]:
            break
    return g


def check_phases(g, speculative: bool, sampling_timed: bool = True):
    """g: a generation, or a function that makes one (made again while least_unaccounted asks);
    returns the generation checked."""
    g = least_unaccounted(g) if callable(g) else g
    p = g.phases.to_dict()
    assert all(p[f] is not None and p[f] >= 0 for f in TIME_FIELDS), p
    assert p["prefill_s"] > 0 and p["verify_s"] > 0, p
    assert (p["sampling_s"] > 0) == sampling_timed, p
    assert (p["draft_s"] > 0) == speculative, p
    assert p["unaccounted_s"] < UNACCOUNTED_MAX * p["wall_s"], p
    for r in g.rounds:
        parts = (r.draft_s, r.verify_s, r.sampling_s, r.unaccounted_s)
        assert min(parts) >= 0, r  # a round may have no target pass of its own (the token the prefill gave)
        assert r.unaccounted_s <= r.wall_s + NS, r
    assert sum(r.wall_s for r in g.rounds) + p["prefill_s"] <= p["wall_s"] + NS  # rounds exclude the prefill
    return g
