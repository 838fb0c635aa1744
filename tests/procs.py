"""The server processes a test started, told apart from those of other tests running at the same
time (pytest-xdist workers): every process a test session starts, directly or through a harness it
runs, inherits SESSION_TAG in its environment (conftest.py sets it per worker), and keeps it after
its parent dies, when it is no longer anyone's child."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

SESSION_TAG = "SPEC_HARNESS_TEST_SESSION"


def tag_session() -> None:
    """A tag of this test process's own (each xdist worker overrides the one it inherited)."""
    os.environ[SESSION_TAG] = f"{os.getpid()}-{time.time_ns()}"


def session_processes(match: Callable[[Path], bool]) -> set[int]:
    """Pids of the live processes started from this test session for which match(/proc/PID) holds."""
    mine = f"{SESSION_TAG}={os.environ.get(SESSION_TAG, '')}".encode()
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if match(proc) and mine in (proc / "environ").read_bytes().split(b"\0"):
                pids.add(int(proc.name))
        except OSError:  # the process ended while we looked
            pass
    return pids
