"""What `harness bench`'s figure modules share: the figures' constants, Figure, and alternating
measurements (A B A B ..., medians). The figures are in harness/bench_speed.py, harness/bench_spec.py,
harness/bench_runs.py and harness/bench_sampling.py; harness/bench.py composes and runs them."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable, Optional

PROMPT = "Summarize how photosynthesis works in plants, step by step."
CALIBRATION_GRID = ([1, 2, 4, 8], [0.0, 0.4, 0.8, 1.0])  # figure 8: gammas, forced alphas
# figure 9 leaves these out: an engine start costs more than the figure, and it runs Hugging Face folders, not the GGUF
ROOFLINE_LEAVES_OUT = ("vllm",)
DEFAULT_RUN_GOAL_S = {"cached": 120, "first": 180}  # figure 6's goals for the default run's wall, set for 2 cores
HEAD_GOALS = {"alpha_hat": 0.60, "tau": 2.3, "torch_speedup": 1.3, "alpha_spread": 0.05}  # figure 10
LOAD_NS = (1, 2, 4)  # figure 11: concurrent streams
LOAD_GOAL = 0.10  # figure 11: our aggregate tokens/s within this of vllm bench serve's
# figure 15: offered request rates (req/s): the default pair's vLLM baseline on one core of two saturates near 1.8
OPEN_RATES = (0.5, 1.0, 1.5, 2.0)
OPEN_REQUESTS = 40  # figure 15: requests per rate and client (p90: the 4th slowest)
OPEN_ALTERNATIONS = 3  # figure 15: each client's runs per rate, in turn (throughputs: their median; percentiles: their requests pooled)
# figure 15: the latency targets of the clients' goodput, off the medians (TPOT 55-60 ms there, TTFT 0.2-0.35 s below saturation)
OPEN_SLO_MS = {"ttft": 1000, "tpot": 75}
ROOFLINE_GOAL = 0.8  # figure 9: torch's baseline step at this fraction of the memory bound or more
CONTEXTS = (64, 512, 1024, 2048, 4096)  # figure 14: the cache lengths torch's step and verify pass are timed at
CONTEXT_GOAL = 1.2  # figure 14: their growth at most this over what the bytes they read predict



@dataclass
class Figure:
    id: int
    name: str
    value: Optional[float]
    goal: str
    detail: dict = field(default_factory=dict)
    note: str = ""


def alternate_samples(fns: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Call each fn once as warm-up, then A B C A B C ... `repeats` times -> the values per name."""
    for f in fns.values():
        f()
    got: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            got[k].append(f())
    return got


def alternate(fns: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """alternate_samples -> the median per name."""
    return {k: statistics.median(v) for k, v in alternate_samples(fns, repeats).items()}


