"""What the `hf` runtime sets on transformers' objects for one generate call and undoes after it,
and how it books phases at those seams.

`Patches`: attributes, method wrappers and torch hooks set for one call, all undone (newest first),
also when the call raises. `TimedProcessors` and `TimedCriteria`: transformers' LogitsProcessorList
and StoppingCriteriaList holding the same items, whose every call first tells the runtime (the
seams where sampling opens and closes). `PhaseCursor`: at most one phase of a PhaseTimer open.
What it does not own: which seams are patched and what each books (runtimes/hf.py's probe).
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

from transformers import LogitsProcessorList, StoppingCriteriaList

from spec_harness.core.timing import PhaseTimer


class Patches:
    """Attributes and hooks set for one generate call; undo() restores everything, newest first."""

    def __init__(self):
        self._undo: list[Callable[[], None]] = []

    def set(self, obj, name: str, value) -> None:
        own = vars(obj)
        had, old = name in own, own.get(name)
        setattr(obj, name, value)
        self._undo.append(lambda: setattr(obj, name, old) if had else delattr(obj, name))

    def wrap(self, obj, name: str, before: Optional[Callable] = None, after: Optional[Callable] = None) -> None:
        """obj.name(*a, **k) calls before(*a, **k) first; after(result) may replace the result."""
        orig = getattr(obj, name)

        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            if before is not None:
                before(*args, **kwargs)
            out = orig(*args, **kwargs)
            return after(out) if after is not None else out

        self.set(obj, name, wrapper)

    def handle(self, h) -> None:
        """A torch hook handle."""
        self._undo.append(h.remove)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def timed(base: type) -> type:
    """A subclass of transformers' LogitsProcessorList or StoppingCriteriaList holding the same
    items, whose every call first runs on_call(): the seam where sampling opens or closes."""

    class Timed(base):
        def __init__(self, items=(), on_call: Callable[[], None] = lambda: None):
            super().__init__(items)
            self.on_call = on_call

        def __call__(self, input_ids, scores, **kwargs):
            self.on_call()
            return super().__call__(input_ids, scores, **kwargs)

    Timed.__name__ = f"Timed{base.__name__}"
    return Timed


TimedProcessors = timed(LogitsProcessorList)  # calling it opens sampling
TimedCriteria = timed(StoppingCriteriaList)  # calling it closes sampling


class PhaseCursor:
    """At most one phase open: switching to another closes the open one first."""

    def __init__(self, timer: PhaseTimer):
        self.timer = timer
        self.open: Optional[str] = None

    def switch(self, phase: Optional[str]) -> None:
        if phase == self.open:
            return
        if self.open is not None:
            self.timer.end()
        if phase is not None:
            self.timer.begin(phase)
        self.open = phase
