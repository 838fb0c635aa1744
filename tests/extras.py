"""Optional runtime extras: a runtime whose extra is not installed here is left out of the tests
that run every runtime (its own tests skip); scripts/setup.sh installs every extra, so CI runs them.
A runtime that cannot run the tiny pair at all (NOT_ON_TINY) is tested on a pair it runs instead."""

from __future__ import annotations

import importlib.util

EXTRAS = {"mlx": "mlx_lm"}  # runtime -> the module its extra installs (pip install -e '.[mlx]')


NOT_ON_TINY = {"vllm": "vLLM's CPU attention needs head size 32 or more (tiny has 16): tests/test_vllm.py runs tiny-hd32"}


def on_tiny(runtime: str) -> bool:
    """Whether a runtime runs the tiny pair, which the tests that run every runtime use."""
    return installed(runtime) and runtime not in NOT_ON_TINY


def installed(runtime: str) -> bool:
    module = EXTRAS.get(runtime)
    return module is None or importlib.util.find_spec(module) is not None
