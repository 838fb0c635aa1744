"""A closed-loop load on a server runtime (`--concurrency N`): N client streams in one asyncio
process, each sending its next request as soon as its previous answer ended, every answer
streamed (server-sent events) so that the client itself times each request's first token and
the gaps between tokens.

What it owns: the HTTP/1.1 requests over asyncio streams (no client library: one process, no
threads), the clock of a cell (perf_counter from the cell's start), the queue of requests, and
the client's own CPU time over the cell (process_time: the harness does nothing else while a
cell runs), so a client that could be the bottleneck is seen. What it does not own: what a
request's body is or what a chunk means (the runtime's `body` and `chunk` callables), or rows.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

CLIENT_CPU_WARN = 0.05  # the client's CPU time over the cell's wall above this (a share of one core): said


@dataclass
class Request:
    """One request of a cell, as the client saw it (seconds on the cell's clock)."""

    index: int
    start_s: float = 0.0
    end_s: float = 0.0
    first_token_s: Optional[float] = None  # when the first chunk with a token arrived
    token_times: list = field(default_factory=list)  # (arrival, tokens in that chunk)
    final: Optional[dict] = None  # what the server says at the end (counts, timings)
    tokens: list = field(default_factory=list)  # the ids the stream carried
    n_tokens: int = 0  # tokens generated (a server may hold some ids back from its stream: llama-server's UTF-8)
    error: Optional[str] = None
    planned_s: Optional[float] = None  # an open-loop request's planned send time (runtimes/open_loop.py)
    woken_s: Optional[float] = None  # when the client woke to send it (then it waits for a place under a cap)

    @property
    def lag_s(self) -> Optional[float]:
        """How late the client woke to send it against its plan (open loop only): its own lateness."""
        return None if self.planned_s is None or self.woken_s is None else self.woken_s - self.planned_s

    @property
    def held_s(self) -> Optional[float]:
        """How long it then waited for a place under a cap on requests in flight (open loop only)."""
        return None if self.woken_s is None else self.start_s - self.woken_s

    @property
    def ttft_s(self) -> Optional[float]:
        return None if self.first_token_s is None else self.first_token_s - self.start_s

    def inter_token_s(self) -> list[float]:
        """The gap before each token after the first: a chunk of k tokens after a gap d counts as
        k tokens d / k apart (a speculative server sends several at once)."""
        out, last = [], self.first_token_s
        for i, (t, k) in enumerate(self.token_times):
            if i == 0:
                k -= 1  # the first token's time is ttft
            if k > 0:
                out += [(t - last) / k] * k
            last = t
        return out


@dataclass
class Cell:
    requests: list[Request]
    wall_s: float
    client_cpu_s: float

    @property
    def client_cpu_share(self) -> float:
        return self.client_cpu_s / self.wall_s if self.wall_s > 0 else 0.0


def run_cell(host: str, port: int, path: str, bodies: list[dict], concurrency: int,
             chunk: Callable[[dict], tuple[list[int], Optional[int], Optional[dict]]], timeout_s: float = 3600.0) -> Cell:
    """Send every body in `bodies` through `concurrency` closed-loop streams. `chunk(event)` turns
    one server-sent event's JSON into (its token ids, the tokens generated so far when the server
    says so (else None: as many as ids), the final info or None)."""
    return asyncio.run(_cell(host, port, path, bodies, concurrency, chunk, timeout_s))


async def _cell(host, port, path, bodies, concurrency, chunk, timeout_s) -> Cell:
    queue: asyncio.Queue = asyncio.Queue()
    for i in range(len(bodies)):
        queue.put_nowait(i)
    done: list[Request] = []
    t0, cpu0 = time.perf_counter(), time.process_time()

    async def stream() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            done.append(await send_timed(host, port, path, bodies[i], Request(i), t0, chunk, timeout_s))

    await asyncio.gather(*(stream() for _ in range(min(concurrency, len(bodies)))))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return Cell(sorted(done, key=lambda r: r.index), wall, cpu)


async def send_timed(host, port, path, body, r: Request, t0: float, chunk, timeout_s: float) -> Request:
    """Send `body` now and time it on the cell's clock (from t0) into `r`: its start, its stream
    (_one), its end; a failure or a request past `timeout_s` is its error."""
    r.start_s = time.perf_counter() - t0
    try:
        await asyncio.wait_for(_one(host, port, path, body, r, t0, chunk), timeout_s)
    except (OSError, asyncio.TimeoutError, ValueError, ConnectionError) as e:
        r.error = f"{type(e).__name__}: {e}"[:300]
    r.end_s = time.perf_counter() - t0
    return r


async def _one(host, port, path, body, r: Request, t0: float, chunk) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        data = json.dumps(body).encode()
        writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                     f"Accept: text/event-stream\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        await writer.drain()
        status = await reader.readline()
        code = int(status.split()[1]) if len(status.split()) > 1 else 0
        chunked = False
        while True:  # headers
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower():
                chunked = True
        if code != 200:
            raise ValueError(f"HTTP {code}: {(await reader.read(2000)).decode(errors='replace')[:200]}")
        async for event in _events(reader, chunked):
            if event == "[DONE]":
                break
            tokens, so_far, final = chunk(json.loads(event))
            now = time.perf_counter() - t0
            k = len(tokens) if so_far is None else so_far - r.n_tokens
            r.tokens += tokens
            if k > 0:
                if r.first_token_s is None:
                    r.first_token_s = now
                r.token_times.append((now, k))
                r.n_tokens += k
            if final is not None:
                r.final = final
    finally:
        writer.close()


async def _events(reader: asyncio.StreamReader, chunked: bool):
    """The `data:` payloads of a server-sent event stream (HTTP chunked or not)."""
    buf = b""
    while True:
        if chunked:
            size_line = await reader.readline()
            if not size_line:
                return
            size = int(size_line.strip().split(b";")[0] or b"0", 16)
            if size == 0:
                return
            part = await reader.readexactly(size + 2)
            buf += part[:-2]
        else:
            part = await reader.read(65536)
            if not part:
                return
            buf += part
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    yield line[5:].strip().decode()
