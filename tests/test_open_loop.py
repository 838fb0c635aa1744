"""Open-loop load (runtimes/open_loop.py): the seeded arrivals have the rate and burstiness asked
for, requests go out on their schedule whatever the answers before them do (against the real
llama-server on the tiny f32 GGUF pair, nothing mocked), a cap on requests in flight holds them
back and their lag says so, and goodput counts the requests that meet every target."""

from __future__ import annotations

import math
import statistics

import pytest

from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.runtimes import open_loop
from spec_harness.runtimes.llama_server import LlamaServerRuntime
from spec_harness.runtimes.process import HOST
from spec_harness.runtimes.server import ServerSetting


@pytest.mark.parametrize("burstiness", [1.0, 4.0, 0.5])
def test_arrivals_have_the_rate_and_burstiness_asked_for(burstiness):
    """Gaps of mean 1 / rate, their coefficient of variation 1 / sqrt(burstiness) (1: Poisson), the
    same times for the same seed and other times for another."""
    times = open_loop.arrival_times(4000, rate=5.0, burstiness=burstiness, seed=3)
    gaps = [b - a for a, b in zip([0.0] + times, times)]
    assert all(g >= 0 for g in gaps) and times == sorted(times)
    assert statistics.fmean(gaps) == pytest.approx(0.2, rel=0.06)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)
    assert open_loop.arrival_times(50, 5.0, burstiness, seed=3) == times[:50]
    assert open_loop.arrival_times(50, 5.0, burstiness, seed=4) != times[:50]


def test_an_infinite_rate_sends_everything_at_once_and_bad_arrivals_are_refused():
    assert open_loop.arrival_times(3, math.inf) == [0.0, 0.0, 0.0]
    for bad in (dict(n=3, rate=0.0), dict(n=3, rate=-1.0), dict(n=3, rate=2.0, burstiness=0.0), dict(n=-1, rate=1.0)):
        with pytest.raises(ValueError, match="arrivals need"):
            open_loop.arrival_times(**bad)


@pytest.fixture(scope="module")
def served(tiny_gguf, tmp_path_factory):
    """The real llama-server with 4 slots, and the bodies of 4 streamed requests of 12 tokens."""
    rt = LlamaServerRuntime(RuntimeSettings(n_threads=1, n_ctx=512), workdir=tmp_path_factory.mktemp("run"))
    rt.load(tiny_gguf)
    srv = rt._server(ServerSetting.baseline(4))
    gen = GenerationSettings(SamplingParams(), 4, 12, 0, ignore_eos=True, concurrency=4)
    bodies = [rt.load_body(rt.encode(p), gen) for p in ("The quick brown fox", "Once upon", "A B C", "Hello there")]
    yield rt, srv, bodies
    rt.close()


def test_requests_go_out_on_schedule_not_after_the_answers_before_them(served):
    """All due at once: every request is sent before any answer has ended (a closed loop of one
    stream would send each after the last), each streams its 12 tokens, and none was sent early."""
    rt, srv, bodies = served
    cell = open_loop.run_open_cell(HOST, srv.port, rt.load_path, bodies, [0.0] * 4, rt.load_chunk)
    assert [r.error for r in cell.requests] == [None] * 4
    assert [r.n_tokens for r in cell.requests] == [12] * 4
    assert max(r.start_s for r in cell.requests) < min(r.end_s for r in cell.requests)
    assert all(r.lag_s > -1e-3 and r.ttft_s > 0 for r in cell.requests)  # asyncio may wake a hair early


def test_a_cap_in_flight_holds_requests_back_and_their_lag_says_so(served):
    """At most one in flight: each request waits for the one before to end, so its lag (actual -
    planned send time) is at least that wait."""
    rt, srv, bodies = served
    cell = open_loop.run_open_cell(HOST, srv.port, rt.load_path, bodies, [0.0] * 4, rt.load_chunk, max_in_flight=1)
    rs = sorted(cell.requests, key=lambda r: r.start_s)
    assert all(b.start_s >= a.end_s for a, b in zip(rs, rs[1:]))
    assert all(b.lag_s >= a.end_s for a, b in zip(rs, rs[1:]))


def test_goodput_counts_the_requests_that_meet_every_target(served):
    rt, srv, bodies = served
    cell = open_loop.run_open_cell(HOST, srv.port, rt.load_path, bodies, open_loop.arrival_times(4, 20.0, seed=1),
                                   rt.load_chunk)
    assert [r.planned_s for r in cell.requests] == open_loop.arrival_times(4, 20.0, seed=1)
    loose = {"ttft": 60.0, "tpot": 60.0, "e2el": 60.0}
    assert open_loop.goodput(cell, loose) == pytest.approx(4 / cell.wall_s)
    slowest = max(open_loop.tpot_s(r) for r in cell.requests)
    assert open_loop.goodput(cell, {"tpot": slowest}) == pytest.approx(4 / cell.wall_s)
    assert open_loop.goodput(cell, {"tpot": slowest * 0.999}) < 4 / cell.wall_s
    assert open_loop.goodput(cell, {"ttft": 0.0}) == 0.0
    with pytest.raises(ValueError, match="unknown latency target"):
        open_loop.goodput(cell, {"itl": 1.0})


def test_a_cells_summary_is_its_requests_percentiles_throughput_and_goodput(served):
    """The summary's numbers come from the requests as timed: 4 requests of 12 tokens, the p50/p90
    of TTFT between the fastest and slowest request's, throughput over the wall, the lag's p99."""
    rt, srv, bodies = served
    cell = open_loop.run_open_cell(HOST, srv.port, rt.load_path, bodies, [0.0, 0.05, 0.1, 0.15], rt.load_chunk)
    got = open_loop.summary(cell, {"e2el": 60.0})
    ttfts = sorted(r.ttft_s for r in cell.requests)
    assert got["requests"] == 4 and got["errors"] == 0
    assert got["output_throughput"] == pytest.approx(48 / cell.wall_s)
    assert got["request_throughput"] == pytest.approx(4 / cell.wall_s) == pytest.approx(got["goodput"])
    assert ttfts[0] <= got["ttft_p50_s"] <= got["ttft_p90_s"] <= got["ttft_p99_s"] <= ttfts[-1]
    assert got["e2el_p99_s"] <= max(r.end_s - r.start_s for r in cell.requests)
    assert got["itl_p50_s"] > 0 and got["tpot_p50_s"] > 0
    lags = sorted(r.lag_s for r in cell.requests)
    assert lags[-2] <= got["lag_p99_s"] <= lags[-1]
    assert "goodput" not in open_loop.summary(cell)
