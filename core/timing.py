"""One phase timer for every runtime, and the phases themselves (defined here, once).

A generation is split into the phases of docs/DESIGN.md: prefill, draft, verify, sampling, and
`unaccounted` (wall minus the four). The timer works in integer nanoseconds, so the identity

    prefill + draft + verify + sampling + unaccounted == wall

holds exactly per round and per generation (the float seconds reported agree to 1 ns).
On an asynchronous device the caller passes `sync` (e.g. torch.cuda.synchronize); it is called
before every clock read, so a phase ends only when its device work has ended, and the time
spent synchronizing is booked to the phase it closes.

Time the harness spends on its own observation, not the runtime's (the copy of a baseline step's
logits row for target_entropy), is taken out of the clock with `outside()`: it is in no phase and
in no wall, so measuring more never makes a runtime look slower.

What it does not do: decide what is a phase of a runtime's code (the runtime or the shared loop
does), or compute rates (core/metrics.py).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

PHASES = ("prefill", "draft", "verify", "sampling")  # the timed phases
PHASE_FIELDS = tuple(f"{p}_s" for p in PHASES) + ("unaccounted_s",)  # the five parts of wall_s, in seconds
NS = 1e-9

# Off only for `harness bench`'s instrumentation-overhead figure: phases are then not timed
# (no clock reads, no syncs inside the generation) and everything lands in unaccounted.
ENABLED = True


@dataclass
class RoundTimes:
    """Nanoseconds spent per phase in one round (or a whole generation), plus its wall."""

    ns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    wall_ns: int = 0

    @property
    def unaccounted_ns(self) -> int:
        return self.wall_ns - sum(self.ns.values())

    def seconds(self) -> dict[str, float]:
        """The round fields (draft_s .. unaccounted_s) and wall_s."""
        out = {f"{p}_s": self.ns[p] * NS for p in PHASES if p != "prefill"}
        out["unaccounted_s"] = self.unaccounted_ns * NS
        out["wall_s"] = self.wall_ns * NS
        return out


class PhaseTimer:
    """Books wall-clock time to phases; rounds are optional sub-intervals of the generation.

    Usage:
        timer = PhaseTimer(sync)
        timer.start()
        with timer.phase("prefill"): ...
        timer.begin_round()
        with timer.phase("draft"): ...
        rt = timer.end_round()        # RoundTimes of that round
        totals = timer.stop()         # RoundTimes of the whole generation (prefill included)
    """

    def __init__(self, sync: Optional[Callable[[], None]] = None):
        self._sync = sync
        self._total = RoundTimes()
        self._round: Optional[RoundTimes] = None
        self._t0 = 0
        self._round_t0 = 0
        self._open: Optional[tuple[str, int]] = None  # (phase, start) between begin() and end()
        self._outside = self._round_outside = 0  # ns taken out of the clock by outside()

    def _now(self) -> int:
        if self._sync is not None:
            self._sync()
        return time.perf_counter_ns()

    def start(self) -> None:
        self._total = RoundTimes()
        self._outside = 0
        self._t0 = self._now()

    def booked_ns(self, phase: str) -> int:
        """Nanoseconds booked to `phase` so far in this generation."""
        return self._total.ns[phase]

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.begin(name)
        try:
            yield
        finally:
            self.end()

    @contextmanager
    def outside(self) -> Iterator[None]:
        """A block of the harness's own bookkeeping, between phases: left out of every wall."""
        if not ENABLED:
            yield
            return
        if self._open is not None:
            raise RuntimeError(f"outside() while phase {self._open[0]!r} is open")
        t = self._now()
        try:
            yield
        finally:
            dt = self._now() - t
            self._outside += dt
            self._round_outside += dt

    def begin_round(self) -> None:
        self._round = RoundTimes()
        self._round_outside = 0
        self._round_t0 = self._now() if ENABLED else 0

    def end_round(self) -> RoundTimes:
        assert self._round is not None, "end_round without begin_round"
        r, self._round = self._round, None
        r.wall_ns = self._now() - self._round_t0 - self._round_outside if ENABLED else 0
        return r

    def stop(self) -> RoundTimes:
        self._total.wall_ns = self._now() - self._t0 - self._outside
        return self._total

    def begin(self, name: str) -> None:
        """phase() split in two calls, for hooks that see a start and an end but wrap no block.

        One phase at a time: begin() while another is open is an error (it would book time twice).
        """
        if not ENABLED:
            return
        if self._open is not None:
            raise RuntimeError(f"phase {name!r} begun while {self._open[0]!r} is open")
        self._open = (name, self._now())

    def end(self) -> None:
        """Close the phase begun last; books it to the generation and to the open round."""
        if not ENABLED:
            return
        if self._open is None:
            raise RuntimeError("end() without begin()")
        (name, t), self._open = self._open, None
        dt = self._now() - t
        self._total.ns[name] += dt
        if self._round is not None:
            self._round.ns[name] += dt


def device_sync(device: str) -> Optional[Callable[[], None]]:
    """The synchronize function for a torch device string, or None where the clock is honest."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.synchronize
    if device.startswith("mps"):
        import torch

        return torch.mps.synchronize
    return None
