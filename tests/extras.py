"""Optional runtime extras: a runtime whose extra is not installed here is left out of the tests
that run every runtime (its own tests skip); scripts/setup.sh installs every extra, so CI runs them."""

from __future__ import annotations

import importlib.util

EXTRAS = {"mlx": "mlx_lm"}  # runtime -> the module its extra installs (pip install -e '.[mlx]')


def installed(runtime: str) -> bool:
    module = EXTRAS.get(runtime)
    return module is None or importlib.util.find_spec(module) is not None
