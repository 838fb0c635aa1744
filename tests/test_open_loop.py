"""Open-loop load (runtimes/open_loop.py): the seeded arrivals have the rate and burstiness asked
for, requests go out on their schedule whatever the answers before them do (against the real
llama-server on the tiny f32 GGUF pair, nothing mocked), a cap on requests in flight holds them
back and their lag says so, and goodput counts the requests that meet every target."""

from __future__ import annotations

import itertools
import math
import re
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
    assert times[-1] == pytest.approx(4000 / 5.0)  # rescaled to span n / rate, as vllm bench serve's
    few = open_loop.arrival_times(12, 5.0, burstiness, seed=3)
    assert few[-1] == pytest.approx(12 / 5.0) and few == open_loop.arrival_times(12, 5.0, burstiness, seed=3)
    assert open_loop.arrival_times(12, 5.0, burstiness, seed=4) != few


@pytest.mark.parametrize("burstiness, seed", [(1.0, 0), (0.5, 7)])
def test_the_same_seed_sends_on_vllm_bench_serves_schedule(burstiness, seed):
    """vllm bench serve (vllm/benchmarks/serve.py, get_request): np.random.seed(--seed), one
    np.random.gamma(shape=B, scale=1 / (R B)) per request, summed, rescaled to end at n / R."""
    import numpy as np

    np.random.seed(seed)
    theirs = list(itertools.accumulate(float(np.random.gamma(shape=burstiness, scale=1 / (2.0 * burstiness)))
                                       for _ in range(24)))
    theirs = [t * (24 / 2.0) / theirs[-1] for t in theirs]
    assert open_loop.arrival_times(24, 2.0, burstiness, seed) == pytest.approx(theirs, abs=1e-12)


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


def test_a_cap_in_flight_holds_requests_back_and_says_so_apart_from_the_lag(served):
    """At most one in flight: each request waits for the one before to end; that wait is its
    held_s, not its lag (the client woke on time)."""
    rt, srv, bodies = served
    cell = open_loop.run_open_cell(HOST, srv.port, rt.load_path, bodies, [0.0] * 4, rt.load_chunk, max_in_flight=1)
    rs = sorted(cell.requests, key=lambda r: r.start_s)
    assert all(b.start_s >= a.end_s for a, b in zip(rs, rs[1:]))
    # each waited in held_s until a's end freed the place; it woke at most `late` after its plan (0)
    late = 0.05  # a busy machine wakes a coroutine some milliseconds late
    assert all(b.held_s >= a.end_s - late and b.start_s - b.planned_s == pytest.approx(b.lag_s + b.held_s)
               for a, b in zip(rs, rs[1:]))
    assert max(r.lag_s for r in rs) < late


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


def test_a_run_at_request_rates_measures_both_settings_on_one_schedule(tmp_path):
    """`--request-rate 4,inf` through the CLI with the real llama-server (2 slots, a cap of 2): per
    setting and rate the rate's requests, each a row with its planned send time, lag, TTFT and
    TPOT; the target alone and speculation get the same prompts in the same order on the same
    schedule; greedy speculative rows match their own rate's baseline; the in-process runtime is
    one skipped row; each setting's server starts once for both rates; the report has the section
    and its decisions; a resumed run measures nothing again; no server is left."""
    import json

    from click.testing import CliRunner

    from spec_harness.harness.cli import main
    from tests.test_llama_server import server_pids

    before = server_pids()
    out = tmp_path / "o"
    args = ["run", "--runtime", "torch,llama-server", "--pair", "tiny", "--request-rate", "4,inf", "--num-requests", "5",
            "--max-concurrency", "2", "--slo", "ttft=60000,tpot=60000", "--gamma", "2", "--max-new-tokens", "8",
            "--prompts", "math", "--threads", "1", "--n-ctx", "1024", "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    opened = [r for r in rows if r["runtime"] == "llama-server" and r["request_rate"] is not None]
    assert len(opened) == 2 * 2 * 5 and not [r for r in opened if r["error"]]
    by = lambda mode, rate: [r for r in opened if r["mode"] == mode and r["request_rate"] == rate]  # noqa: E731
    for rate in (4.0, "inf"):
        base, spec = by("baseline", rate), by("speculative", rate)
        assert [r["prompt_id"] for r in base] == [r["prompt_id"] for r in spec]  # one seeded order
        assert [r["planned_s"] for r in base] == [r["planned_s"] for r in spec] == sorted(r["planned_s"] for r in base)
        assert all(r["ttft_s"] > 0 and r["tpot_s"] > 0 and r["lag_s"] > -1e-3 and r["concurrency"] == 2 for r in base + spec)
        # lossless: the same streamed ids (the tiny vocabulary's partial UTF-8 ids are held back from the stream,
        # so greedy_match is checked only where every id came: it must never be False)
        assert [r["token_ids"] for r in spec] == [r["token_ids"] for r in base]
        assert all(r["greedy_match"] is not False for r in spec) and any(r["greedy_match"] for r in spec)
        summary = base[0]["extra"]["cell"]["open_loop"]
        assert summary["requests"] == 5 and summary["goodput"] == pytest.approx(summary["request_throughput"])
    assert set(r["planned_s"] for r in by("baseline", "inf")) == {0.0}
    assert max(r["planned_s"] for r in by("baseline", 4.0)) > 0.25  # 5 arrivals at 4 req/s span about a second
    assert len({r["prompt_id"] for r in by("baseline", 4.0)}) == 5  # 5 math prompts, each once
    skipped = [r["error"] for r in rows if r["runtime"] == "torch" and r["request_rate"] is not None]
    assert skipped == ["skipped: torch runs one sequence at a time (--concurrency above 1 and --request-rate run on "
                       "llama-server and vllm)"]
    assert re.search(r"Skipped: torch( \[\w+\])? under load", " ".join(res.output.split()))  # ran one at a time
    run = json.loads((out / "run.json").read_text())
    assert run["runtimes"]["llama-server"]["server_starts"] == {
        "baseline": 1, "fixed-gamma2": 1, "baseline-np2": 1, "fixed-gamma2-np2": 1}
    assert run["config"]["open_load"]["request_rates"] == [4.0, "inf"]
    assert "report not written" not in res.output
    report = (out / "report" / "report.md").read_text()
    assert "## Open-loop load" in report and "| llama-server | inf | 5 |" in report
    assert "the targets are met up to inf req/s without speculation, up to inf req/s with it" in report
    assert (out / "report" / "open_loop.csv").is_file()
    trace = json.loads((out / "trace.json").read_text())
    assert any("4 req/s" in str(e.get("args", {}).get("name", "")) for e in trace["traceEvents"])
    again = CliRunner().invoke(main, args + ["--resume"])
    after = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    measured = lambda rs: [r for r in rs if not r["error"]]  # noqa: E731 - a skipped row is tried again
    assert again.exit_code == 0 and len(measured(after)) == len(measured(rows)), again.output
    assert not server_pids() - before


@pytest.mark.parametrize("flags, why", [
    (["--request-rate", "0"], "--request-rate must be > 0"),
    (["--request-rate", "fast"], "--request-rate takes a comma list"),
    (["--request-rate", "1", "--burstiness", "0"], "--burstiness must be a finite number > 0"),
    (["--request-rate", "inf", "--duration", "10"], "give --num-requests instead of --duration"),
    (["--request-rate", "1", "--slo", "itl=5"], "--slo takes NAME=MILLISECONDS"),
    (["--slo", "ttft=5"], "give --request-rate too"),
    (["--request-rate", "1", "--max-concurrency", "64"], "--max-concurrency 64 (the servers' slots under --request-rate)"),
    (["--request-rate", "1", "--num-requests", "0"], "--num-requests must be >= 1"),
])
def test_impossible_open_loads_are_one_line_and_exit_2(tmp_path, flags, why):
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    res = CliRunner().invoke(main, ["run", "--runtime", "llama-server", "--pair", "tiny", "--prompts", "math",
                                    "--n-ctx", "1024", "--threads", "1", "--out", str(tmp_path / "o"), *flags])
    assert res.exit_code == 2 and why in res.output, res.output
    assert "Traceback" not in res.output


def test_the_queueing_model_saturates_where_the_slots_cannot_keep_up():
    """queue_e2e: a per-token time that does not grow with the load gives E2E = prefill + decode
    stretched by the share of the server the arriving prompts leave, none at or above capacity
    (slots / E2E at full slots) or where prompts alone fill the server; one that grows with the
    sequences in the server gives a longer E2E at a higher rate, Little's law at its root."""
    from spec_harness.reports.open_loop import queue_e2e

    flat = lambda b: 1.0  # noqa: E731
    e, cap = queue_e2e(0.5, 0.2, 33, 0.02, flat, 4)
    assert e == pytest.approx(0.2 + 33 * 0.02 / (1 - 0.5 * 0.2)) and cap == pytest.approx(4 / e)
    assert queue_e2e(1e-9, 0.2, 33, 0.02, flat, 4)[0] == pytest.approx(0.2 + 33 * 0.02)
    assert queue_e2e(cap, 0.2, 33, 0.02, flat, 4)[0] is None
    assert queue_e2e(5.0, 0.2, 1, 1e-6, flat, 64) == (None, 5.0)  # 5 prompts of 0.2 s a second fill it
    grows = lambda b: 1.0 + 0.5 * (b - 1)  # noqa: E731
    low, high = queue_e2e(0.2, 0.2, 33, 0.02, grows, 4)[0], queue_e2e(1.0, 0.2, 33, 0.02, grows, 4)[0]
    assert low < high
    b = 1.0 * high  # Little's law holds at the root
    assert high == pytest.approx(0.2 + 33 * 0.02 * grows(b) / (1 - 0.2), rel=1e-6)


def _rows(mode: str, wall: float, rounds: list[dict]) -> list[dict]:
    """Five rows of one request at a time (N = 1) of one runtime, 33 tokens each, prefill 0.1 s."""
    return [{"runtime": "srv", "pair": "p", "mode": mode, "gamma": 4 if mode == "speculative" else None,
             "drafter": "model" if mode == "speculative" else None, "temperature": 0.0, "top_p": 1.0, "top_k": 0,
             "max_new_tokens": 33, "concurrency": 1, "request_rate": None, "new_tokens": 33, "wall_s": wall,
             "prefill_s": 0.1, "rounds": rounds, "error": None, "prompt_id": f"q{i}"} for i in range(5)]


def test_speculation_predicted_to_stop_paying_where_its_batched_verify_outgrows_its_gain():
    """predict() on a pair whose speculation is 1.6x faster one request at a time and whose verify
    batch turns compute bound at 4 sequences (a pass of 4 x 5 tokens costs 4 one-token passes of
    4): it pays at the low rates, not at the high ones, and the decisions say where."""
    from spec_harness.reports import open_loop

    spec_rounds = [{"drafted": 4, "accepted": 2, "emitted": 3}] * 11
    rows = _rows("baseline", 1.0, []) + _rows("speculative", 0.6, spec_rounds)
    costs = {"target": {"1": {"1": 0.010, "5": 0.011}, "4": {"1": 0.011, "5": 0.044}},
             "draft": {"1": {"1": 0.001}, "4": {"1": 0.0012}}}
    recs = [{"pair": "p", "runtime": "srv", "rate": f"{r:g}", "burstiness": 1.0, "gamma": 4, "drafter": "model",
             "slots": 4, "kept": "yes", "base_e2el_p50_s": 1.0, "spec_e2el_p50_s": 0.6 if r < 2 else 1.5}
            for r in (0.25, 0.5, 1, 2, 4)]
    open_loop.predict(recs, rows, {"p": costs})
    pays = [c["predicted_pays"] for c in recs]
    assert pays[0] is True and pays[-1] is False and pays == sorted(pays, reverse=True)
    assert all(c["spec_e2e_predicted_s"] is None or c["spec_e2e_predicted_s"] > 0.5 for c in recs)
    stop = open_loop.first_loss(recs, "predicted_pays")
    line = open_loop.decisions(recs)[0]
    assert "stops paying at 2 req/s" in line and f"predicted from the batched step costs: it stops paying at {stop} req/s" in line
    for c, e2e in zip(recs, (1.2, 1.1, 0.9, 0.8, 0.7)):  # speculation paying only from 1 req/s up: no rate where it stops
        c["spec_e2el_p50_s"] = e2e
    assert "lowers the median latency at 1, 2, 4 req/s and raises it at 0.25, 0.5 req/s" in open_loop.decisions(recs)[0]
