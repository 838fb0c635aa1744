"""The numeric tests (NUMERIC_TESTS, tests/numerics.py) again on torch's narrower vector ISAs, so
that any machine also runs the SIMD paths of another: ATEN_CPU_CAPABILITY=avx2 (8 float lanes, as
on an AVX2-only CPU) and =default (no vector ISA: at::vec's portable 8-float class) switch torch's
CPU kernels, and the ISA inductor builds runtimes/llama_step.py's and packed_matmul.py's kernels
for. Each runs those tests in one subprocess, `python -m pytest -q -n 0 -p no:cacheprovider
--tb=line TESTS`; a failure names the ISA, the failing tests and where and why each failed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.numerics import NUMERIC_TESTS

ROOT = Path(__file__).resolve().parent.parent


def under(capability: str) -> dict:
    """This process's environment with torch's CPU dispatch set to `capability`."""
    return {**os.environ, "ATEN_CPU_CAPABILITY": capability}


def dispatched(capability: str) -> str:
    """The capability torch's CPU kernels run at in a process asked for `capability` (the CPU's
    own where it lacks that ISA)."""
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    r = subprocess.run([sys.executable, "-c", probe], env=under(capability), capture_output=True, text=True,
                       check=True)
    return r.stdout.split()[-1]


def failures(output: str) -> list[str]:
    """Where each failure was raised and why (--tb=line's lines), and the FAILED and ERROR lines of
    pytest's short summary."""
    return [line for line in output.splitlines()
            if line.startswith(("FAILED", "ERROR")) or re.match(r"\S+\.py:\d+: \w", line)]


@pytest.mark.slow
@pytest.mark.parametrize("capability", ["avx2", "default"])
def test_the_numeric_tests_pass_on_a_narrower_simd_path(capability):
    got = dispatched(capability)
    if got != capability.upper():
        pytest.skip(f"this CPU has no {capability}: torch runs {got} under ATEN_CPU_CAPABILITY={capability}")
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "--tb=line", *NUMERIC_TESTS]
    r = subprocess.run(cmd, cwd=ROOT, env=under(capability), capture_output=True, text=True)
    code, why = r.returncode, "\n".join(failures(r.stdout)) or (r.stdout + r.stderr)[-3000:]
    assert code == 0, f"ATEN_CPU_CAPABILITY={capability}:\n{why}"
