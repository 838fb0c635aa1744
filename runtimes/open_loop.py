"""An open-loop load on a server runtime: requests sent at planned arrival times, whatever the
answers before them are doing, as `vllm bench serve --request-rate R --burstiness B` sends them.

    gaps ~ Gamma(shape B, scale 1 / (R B))       # B = 1: a Poisson process of rate R; R = inf: all at 0
                                                 # numpy's RandomState(seed): vllm bench serve --seed's draws
    arrival_k = gap_1 + ... + gap_k              # seconds from the cell's start, seeded
    arrival_k *= (n / R) / arrival_n             # the n arrivals span n / R exactly, as vllm bench serve's do
    request k is sent at arrival_k (or, under a cap of M in flight, when one of the M ends)

Each request is timed as runtimes/closed_loop.py times it (TTFT, a chunk of k tokens counted as k
tokens); beside it, when it was planned, so that a client that cannot keep its schedule is seen
(`lag_s`: when it woke to send - planned; `held_s`: then waiting for a place under a cap).
`goodput` is vLLM's: the requests per second of the cell's wall that meet every latency target.

What it owns: the schedule and the open-loop sending. Not the HTTP stream nor what a chunk means
(closed_loop's `send_timed` and the runtime's `chunk`), nor which server or rows.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
from typing import Callable, Optional

from spec_harness.core import metrics
from spec_harness.runtimes.closed_loop import Cell, Request, send_timed

SLO_KEYS = ("ttft", "tpot", "e2el")  # --slo ttft=MS,tpot=MS,e2el=MS: vLLM's names
# With nothing in flight the client wakes this long before a send and polls the loop until it is
# due: a process woken from a long sleep on an idle VM runs 4-9 ms late (2-core EPYC VM at 0.25
# req/s: lag p99 9 ms; woken 20 ms early, 0), which a timer alone cannot help. While requests are
# in flight the server keeps the CPU awake and a polling client would compete with its threads
# (lag p99 up to 60 ms): then it sleeps to the due time. At most SPIN_SHARE of the mean gap.
WAKE_EARLY_S = 0.020
SPIN_SHARE = 0.02


def arrival_times(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """n send times (seconds from the start) for `rate` requests per second: gaps drawn from a gamma
    distribution of shape `burstiness` and mean 1 / rate (burstiness 1: exponential gaps, a Poisson
    process; below 1 burstier, above 1 more regular), rescaled so that the last is at n / rate, as
    `vllm bench serve` rescales its own (a few dozen requests then offer the rate asked for, not
    the draw's); rate inf: every request at 0. The gaps are drawn as vllm bench serve draws them
    (numpy's legacy generator seeded with `seed`, one gamma draw per request), so that with the same
    --seed and request count the two clients send on one schedule."""
    import numpy as np

    if n < 0 or not rate > 0 or not burstiness > 0:
        raise ValueError(f"arrivals need n >= 0, a rate > 0 and a burstiness > 0 (got {n}, {rate}, {burstiness})")
    if math.isinf(rate):
        return [0.0] * n
    rng, t, out = np.random.RandomState(seed % 2**32), 0.0, []
    for _ in range(n):
        t += float(rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness)))
        out.append(t)
    return [x * (n / rate) / t for x in out] if out and t > 0 else out


def tpot_s(r: Request) -> Optional[float]:
    """A request's time per output token after the first (core/metrics.py's tpot)."""
    return metrics.tpot(r.end_s - r.start_s, r.ttft_s, r.n_tokens)


def meets(r: Request, slo: dict) -> bool:
    """Whether a request that ended without error meets every target in `slo` (seconds, keys SLO_KEYS)."""
    if r.error or r.ttft_s is None:
        return False
    got = {"ttft": r.ttft_s, "tpot": tpot_s(r) or 0.0, "e2el": r.end_s - r.start_s}
    return all(got[k] <= v for k, v in slo.items())


def goodput(cell: Cell, slo: dict) -> float:
    """Requests per second of the cell's wall that meet every target (vLLM's goodput)."""
    unknown = set(slo) - set(SLO_KEYS)
    if unknown:
        raise ValueError(f"unknown latency target(s) {sorted(unknown)}: the targets are {', '.join(SLO_KEYS)}")
    return sum(meets(r, slo) for r in cell.requests) / cell.wall_s if cell.wall_s > 0 else 0.0


def summary(cell: Cell, slo: Optional[dict] = None) -> dict:
    """One cell as `vllm bench serve` reports a rate: completed requests and output tokens per second
    of the wall, p50/p90/p99 of TTFT, TPOT, ITL (a chunk of k tokens as k gaps) and E2E latency in
    seconds, goodput under `slo` where given; and the client's own: its CPU share of one core and
    its scheduling lag's p99 (can it keep the rate it plans?)."""
    ok = [r for r in cell.requests if not r.error]
    wall = cell.wall_s if cell.wall_s > 0 else float("nan")
    out = {"requests": len(cell.requests), "errors": len(cell.requests) - len(ok), "wall_s": cell.wall_s,
           "request_throughput": len(ok) / wall, "output_throughput": sum(r.n_tokens for r in ok) / wall,
           "client_cpu_share": cell.client_cpu_share,
           "lag_p99_s": metrics.quantile((r.lag_s for r in cell.requests), 0.99)}
    got = {"ttft": [r.ttft_s for r in ok], "tpot": [tpot_s(r) for r in ok],
           "itl": [g for r in ok for g in r.inter_token_s()], "e2el": [r.end_s - r.start_s for r in ok]}
    for name, xs in got.items():
        for q in (50, 90, 99):
            out[f"{name}_p{q}_s"] = metrics.quantile(xs, q / 100)
    if slo is not None:
        out["goodput"] = goodput(cell, slo)
    return out


def run_open_cell(host: str, port: int, path: str, bodies: list[dict], arrivals: list[float],
                  chunk: Callable[[dict], tuple], max_in_flight: Optional[int] = None,
                  timeout_s: float = 600.0) -> Cell:
    """Send bodies[k] at arrivals[k] seconds from the cell's start (at most `max_in_flight` at once:
    a request due while the cap is full waits for a place, and its `held_s` says so). Each request's
    `planned_s` is its arrival time; every request is bounded by `timeout_s`."""
    if len(arrivals) != len(bodies):
        raise ValueError(f"{len(bodies)} requests but {len(arrivals)} arrival times")
    collecting = gc.isenabled()
    gc.disable()  # a full collection in a process holding torch's and transformers' objects stops every send it spans
    try:
        return asyncio.run(_open_cell(host, port, path, bodies, arrivals, chunk, max_in_flight, timeout_s))
    finally:
        if collecting:
            gc.enable()


async def _open_cell(host, port, path, bodies, arrivals, chunk, max_in_flight, timeout_s) -> Cell:
    places = asyncio.Semaphore(max_in_flight or len(bodies) or 1)
    early = min(WAKE_EARLY_S, SPIN_SHARE * max(arrivals, default=0.0) / max(len(arrivals), 1))
    t0, cpu0 = time.perf_counter(), time.process_time()
    in_flight = 0
    now = lambda: time.perf_counter() - t0  # noqa: E731

    async def send(k: int) -> Request:
        nonlocal in_flight
        r = Request(k, planned_s=arrivals[k])
        await asyncio.sleep(max(0.0, arrivals[k] - early - now()))
        if in_flight:  # the server is busy: a timer wakes on time
            await asyncio.sleep(max(0.0, arrivals[k] - now()))
        while now() < arrivals[k]:  # idle: the last moments polled (other coroutines still run)
            await asyncio.sleep(0)
        r.woken_s = now()
        async with places:
            in_flight += 1
            try:
                return await send_timed(host, port, path, bodies[k], r, t0, chunk, timeout_s)
            finally:
                in_flight -= 1

    done = await asyncio.gather(*(send(k) for k in range(len(bodies))))
    return Cell(list(done), time.perf_counter() - t0, time.process_time() - cpu0)
