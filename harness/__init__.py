"""Speculative-decoding comparison harness: configuration, runner, timing, metrics, theory.

The `harness` package holds what is shared by every runtime (see ../DESIGN notes in README):
the phase timer, the sampling and acceptance rule, the metric definitions, the run loop and the
CLI. Runtime-specific code lives in `runtimes/`, model handling in `models/`, reports in `reports/`.
"""

__version__ = "0.1.0"
