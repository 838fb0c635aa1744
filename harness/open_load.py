"""What an open-loop load asks (`--request-rate`): the rates, the arrivals' burstiness, how many
requests each rate sends, the client's cap, the server's slots and the latency targets
(`OpenLoad`, validated when built), and the order of each rate's prompts (`OpenLoad.order`:
seeded, the same for every setting, so the baseline and each speculative server answer the same
requests on the same schedule; RunConfig.open_cells makes them cells).

What it does not own: sending them (runtimes/open_loop.py draws the arrival times and sends),
measuring a setting's cells (harness/under_load.py, as under --concurrency) or the report
(reports/open_loop.py).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Iterator, Optional

from spec_harness.core.config import Arrivals, at_least
from spec_harness.core.errors import HarnessError
from spec_harness.core.results import rate_value

DEFAULT_REQUESTS = 16  # requests per rate: enough for a p90 from a 2-core CPU's few requests per second
# the server's slots without --max-concurrency: llama-server's own default (-np auto is 4); the
# requests its slots do not hold wait in the server's queue, as they would in production
DEFAULT_SLOTS = 4


def parse_rates(text: Optional[str]) -> list[float]:
    """--request-rate's comma list: numbers of requests per second, or inf (every request at once)."""
    if not text:
        return []
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            out.append(float(part))
        except ValueError:
            raise HarnessError(f"--request-rate takes a comma list of requests per second or inf, got {part!r}") from None
    return out


def parse_slo(text: Optional[str]) -> dict[str, float]:
    """--slo ttft=MS,tpot=MS,e2el=MS (vLLM's --goodput names, milliseconds) -> seconds by name."""
    from spec_harness.runtimes.open_loop import SLO_KEYS

    out = {}
    for part in (p.strip() for p in (text or "").split(",") if p.strip()):
        name, _, value = part.partition("=")
        try:
            ms = float(value)
        except ValueError:
            ms = float("nan")
        if name not in SLO_KEYS or not ms > 0:
            raise HarnessError(f"--slo takes NAME=MILLISECONDS pairs, NAME one of {', '.join(SLO_KEYS)} "
                               f"(e.g. --slo ttft=500,tpot=50), got {part!r}")
        out[name] = ms / 1000
    return out


@dataclass
class OpenLoad:
    """An open-loop load's settings (the flags of its name); `rates` empty: no open-loop cells."""

    rates: list[float] = field(default_factory=list)  # --request-rate
    burstiness: float = 1.0  # --burstiness
    requests: int = DEFAULT_REQUESTS  # --num-requests: per rate, unless duration_s
    duration_s: Optional[float] = None  # --duration: per rate, ceil(rate x duration) requests
    max_concurrency: Optional[int] = None  # --max-concurrency: the client's cap and the server's slots
    slo: dict = field(default_factory=dict)  # --slo: seconds by name (runtimes/open_loop.SLO_KEYS)

    def __post_init__(self):
        for rate in self.rates or [1.0]:
            self.arrivals(rate)  # each rate, the burstiness and the cap validated (given without a rate too)
        at_least("--num-requests", self.requests, 1, "requests per rate")
        if self.duration_s is not None:
            if not self.duration_s > 0:
                raise HarnessError(f"--duration must be > 0 seconds per rate, got {self.duration_s}")
            if any(math.isinf(r) for r in self.rates):
                raise HarnessError("--request-rate inf sends every request at once, which lasts no duration: "
                                   "give --num-requests instead of --duration")
        if self.slo and not self.rates:
            raise HarnessError("--slo sets the latency targets of an open-loop load: give --request-rate too")

    def arrivals(self, rate: float) -> Arrivals:
        return Arrivals(rate, self.burstiness, self.max_concurrency)

    @property
    def slots(self) -> int:
        """The sequences each server is started for (llama-server -np, vLLM --max-num-seqs)."""
        return self.max_concurrency or DEFAULT_SLOTS

    def requests_at(self, rate: float) -> int:
        """Requests one cell of `rate` sends: --num-requests, or ceil(rate x --duration)."""
        return self.requests if self.duration_s is None else max(1, math.ceil(rate * self.duration_s))

    @staticmethod
    def order(prompts: list, n: int, seed: int) -> Iterator[tuple[object, int]]:
        """n (prompt, repeat) in an order seeded by the run's --seed: each pass over the prompts
        shuffled anew (pass r is repeat r), the same order for every setting and rate."""
        for r in range(-(-n // len(prompts))):
            shuffled = list(prompts)
            random.Random(f"{seed}-{r}").shuffle(shuffled)
            for p in shuffled[:n - r * len(prompts)]:
                yield p, r

    def config(self) -> dict:
        """run.json's config["open_load"]."""
        return {"request_rates": [rate_value(r) for r in self.rates], "burstiness": self.burstiness,
                "requests_per_rate": None if self.duration_s else self.requests, "duration_s": self.duration_s,
                "max_concurrency": self.max_concurrency, "server_slots": self.slots,
                "slo_ms": {k: v * 1000 for k, v in self.slo.items()}}


def from_options(o: dict) -> OpenLoad:
    """The open-loop load of a command's options (harness/options.py's OPEN_LOAD_OPTIONS); a
    command without them has none."""
    given = lambda k, default: default if o.get(k) is None else o[k]  # noqa: E731 - a 0 is given, and refused
    return OpenLoad(parse_rates(o.get("request_rate_list")), given("burstiness", 1.0), given("num_requests", DEFAULT_REQUESTS),
                    o.get("duration_s"), o.get("max_concurrency"), parse_slo(o.get("slo_spec")))
