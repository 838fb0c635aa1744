"""`harness bench` machinery on the tiny f32 GGUF (llama.cpp only: transformers cannot read the tiny
GGUF's tokenizer): alternation order and medians, figure 3's paths (llama-bench included) and figure
7's two loops, all through the real libraries and binaries."""

from __future__ import annotations

import statistics

import pytest

from spec_harness.core.config import RuntimeSettings
from spec_harness.harness.bench import Bench, alternate


def test_alternate_warms_up_then_interleaves_and_takes_medians():
    calls = []
    vals = {"a": iter([100, 3, 1, 2]), "b": iter([100, 30, 10, 20])}
    med = alternate({k: (lambda k=k: calls.append(k) or next(vals[k])) for k in "ab"}, 3)
    assert calls == ["a", "b"] * 4
    assert med == {"a": 2, "b": 20}


def test_figure_3_compares_our_llamacpp_loop_with_llama_bench_and_llama_cpp_pythons_paths(tiny_pair):
    from spec_harness.models.gguf_writer import ensure_tiny_gguf

    t_gguf, _ = ensure_tiny_gguf("tiny", "f32")
    b = Bench(t_gguf, 8, 1, 2, RuntimeSettings(device="cpu", n_threads=1, n_ctx=256), log=lambda *a: None)
    fig = b.fig3_llamacpp_paths()
    tps = fig.detail["tokens_per_s"]
    assert set(tps) == {"llamacpp", "llamacpp_e2e", "llama-bench", "eval", "generate", "create_completion"}
    assert all(v > 0 for v in tps.values())
    assert fig.value == pytest.approx(tps["llamacpp"] / tps["llama-bench"])  # decode against decode
    assert fig.detail["ratio_to"]["eval"] == pytest.approx(tps["llamacpp_e2e"] / tps["eval"])  # end to end


def test_figure_7_compares_our_loop_with_llama_server(tiny_gguf):
    pair = tiny_gguf
    b = Bench(pair.target_gguf, 16, 1, 3, RuntimeSettings(device="cpu", n_threads=1, n_ctx=256), log=lambda *a: None)
    fig = b.fig7_loop_vs_server(pair)
    tps = fig.detail["tokens_per_s"]
    assert set(tps) == {"llamacpp", "llama-server"} and all(v > 0 for v in tps.values())
    assert fig.value == pytest.approx(tps["llamacpp"] / tps["llama-server"])


def test_pooled_self_draft_costs_for_a_runtime_that_times_no_round():
    from spec_harness.core.records import Generation, Phases, RoundRecord
    from spec_harness.harness.bench import pooled_self_draft_costs

    def gen(n_rounds, drafted, draft_s, verify_s):
        ph = Phases(wall_s=0.1 + draft_s + verify_s, prefill_s=0.1, draft_s=draft_s, verify_s=verify_s, sampling_s=None,
                    unaccounted_s=0.0)
        return Generation(list(range(8)), ph, [RoundRecord(drafted, drafted, 1, None, None, None, None, None)] * n_rounds)

    base = [gen(8, 0, 0.0, 0.08)]  # T = 10 ms
    d = pooled_self_draft_costs([gen(2, 4, 0.08, 0.04)], base, 4, 0.9)  # c = 80/8/10 = 1, v = 40/2/10 = 2
    assert d["v"] == pytest.approx(2.0) and d["c"] == pytest.approx(1.0)
    assert d["ceiling"] == pytest.approx(5 / 6) and d["ceiling_with_draft_cost"] == pytest.approx(5 / 6)


def test_self_draft_costs_split_a_round_into_verify_and_draft_steps():
    from spec_harness.harness.bench import self_draft_costs

    base = [{"drafted": 0, "verify_s": 0.010, "draft_s": None}] * 5
    spec = [{"drafted": 4, "verify_s": 0.020, "draft_s": 0.050}] * 3  # v = 2 steps, c = 1.25 steps
    d = self_draft_costs(spec, base, 4, 0.75)
    assert d["v"] == pytest.approx(2.0) and d["c"] == pytest.approx(1.25)
    assert d["ceiling"] == pytest.approx(5 / 6) and d["of_ceiling"] == pytest.approx(0.75 / (5 / 6))
    assert d["ceiling_with_draft_cost"] == pytest.approx(5 / 7)
    assert self_draft_costs([dict(r, verify_s=None) for r in spec], base, 4, 0.75) == {}


def test_figure_2_reports_shares_acceptance_and_llama_cpp_s_own_view():
    """What the retired llamacpp_selfdraft script printed, from Generations of one setting."""
    from spec_harness.core.records import Generation, Phases, RoundRecord
    from spec_harness.harness.bench import run_shares

    def gen(ids, drafted, accepted, llama=True):
        phases = Phases(wall_s=1.0, prefill_s=0.2, draft_s=0.3, verify_s=0.4, sampling_s=0.05, unaccounted_s=0.05)
        rounds = [RoundRecord(drafted, accepted, accepted + 1, 0.1, 0.1, 0.0, 0.0, 0.2)] * 2
        extra = {"llama_perf": {"target": {"p_eval_ms": 500.0, "eval_ms": 100.0}},
                 "decode_ms": {"target": {"ours_ms": 610.0, "llama_ms": 600.0}}} if llama else {}
        return Generation(ids, phases, rounds, extra=extra)

    base = [gen([1, 2, 3, 4], 0, 0)] * 2
    d = run_shares([gen([1, 2, 3, 4], 4, 3)] * 3, base)
    assert d["tok_s"]["speculative"] == pytest.approx(4 / 0.8)
    assert d["shares"]["verify_s"] == pytest.approx(0.4) and d["accept"] == pytest.approx(0.75)
    assert d["greedy_match"] is True and d["llama_unaccounted"] == pytest.approx(0.4)  # 1 - 0.6 s of llama decode
    assert d["decode_ms"] == {"target": {"ours_ms": 610.0, "llama_ms": 600.0}}
    other = run_shares([gen([1, 2, 9, 4], 4, 3, llama=False)], base)
    assert other["greedy_match"] is False and "llama_unaccounted" not in other


def test_figure_8_is_the_largest_gap_between_forced_acceptance_and_the_cost_model(tiny_gguf):
    b = Bench(tiny_gguf.target_gguf, 12, 1, 3, RuntimeSettings(device="cpu", n_threads=1, n_ctx=256), log=lambda *a: None)
    fig = b.fig8_calibration(tiny_gguf)
    cells = fig.detail["off_model"]
    assert set(cells) == {f"{rt} gamma {g}" for rt in ("torch [kernels]", "llamacpp") for g in (1, 2, 4, 8)}
    assert fig.value == max(cells.values()) and fig.detail["within_goal"] == sum(v <= 0.10 for v in cells.values())
    assert all(0 < k["v"] and 0 < k["c"] for k in fig.detail["costs"].values())


def test_figure_9_sets_each_baseline_step_against_the_memory_bound(tiny_gguf):
    from spec_harness.harness.bench import PROMPT
    from spec_harness.models.shape import sizes_from_gguf

    b = Bench(tiny_gguf.target_gguf, 8, 1, 2, RuntimeSettings(device="cpu", n_threads=1, n_ctx=256), log=lambda *a: None)
    fig = b.fig9_memory_bound(("llamacpp", "llamacpp-native"))
    sizes, reads = sizes_from_gguf(tiny_gguf.target_gguf), fig.detail["read_gb_s"]
    assert fig.detail["threads"] == 1 and len(reads) == 1 and reads[0] > 0  # measured between the steps
    for name in ("llamacpp", "llamacpp-native"):
        d = fig.detail[name]
        context = len(b.runtime(name).encode(PROMPT)) + 8 / 2  # the prompt and half the generated tokens
        assert d["bytes"] == int(sizes["weight_bytes"] + sizes["kv_bytes_per_position"] * context)
        expect = [d["bytes"] / (bw * 1e9) / (ms / 1000) for bw, ms in zip(reads, d["steps_ms"])]
        assert d["fractions"] == pytest.approx(expect, rel=1e-6) and d["weights"] == "f32"
        assert d["fraction"] == pytest.approx(statistics.median(expect), rel=1e-6)
    assert fig.value is None  # torch's fraction: torch is not in this figure's list here


def test_figure_2_times_the_torch_matrices_three_ways_on_the_same_numbers(tiny_pair):
    import torch
    from transformers import AutoModelForCausalLM

    from spec_harness.harness.bench import matrices_ms
    from spec_harness.runtimes.torch_llama import LlamaFast

    model = AutoModelForCausalLM.from_pretrained(tiny_pair.target, dtype=torch.float32).eval()
    weights = LlamaFast(model).weights
    d = matrices_ms(weights, [1, 5], 2)
    assert set(d) == {1, 5}
    ways = {"packed", "mkl"} | ({"onednn"} if torch.backends.mkldnn.is_available() else set())
    for s in (1, 5):
        assert set(d[s]) == ways | {"max_diff"}
        assert all(d[s][w] > 0 for w in ways)
        assert d[s]["max_diff"] < 1e-4  # the three compute the same products


def test_the_figures_print_in_lines_of_100_columns_saying_every_detail():
    from spec_harness.harness.bench import Figure, print_figures

    detail = {"off_model": {f"torch [kernels] gamma {g}": 0.01 * g for g in range(1, 9)}, "cells": 8, "spread": 0.123456}
    said: list[str] = []
    print_figures([Figure(8, "calibration: largest |measured / cost model - 1| over gamma x alpha", 0.08, "<= 0.10", detail)],
                  log=said.append)
    lines = "\n".join(said).splitlines()
    assert len(lines) > len(detail) + 1 and all(len(line) <= 100 for line in lines)
    text = " ".join(" ".join(said).split())
    assert "8. calibration: largest |measured / cost model - 1| over gamma x alpha: 0.080 (goal <= 0.10)" in text
    assert '"torch [kernels] gamma 8": 0.08}' in text and "cells: 8" in text and "spread: 0.1235" in text


def test_figure_15_pins_every_thread_of_a_process_group_and_reads_the_pinning_back():
    """Figure 15 puts the server's processes (its group: the engine and its threads) on some cores
    and the clients on another: every thread of every process of the group moves, threads the
    pinned ones start later inherit it."""
    import os
    import subprocess
    import sys

    from spec_harness.harness.bench_runs import cpus_of, pin_threads
    from spec_harness.runtimes.process import group_processes

    cores = sorted(os.sched_getaffinity(0))
    # a group of two processes, the parent with a second thread that starts a third after the pinning
    code = ("import subprocess, sys, threading, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('up', flush=True); sys.stdin.readline()\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('later', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout.readline() == "up\n"
        pids = list(group_processes(proc.pid))
        assert len(pids) == 2 and proc.pid in pids
        assert cpus_of(pids) == cores
        pin_threads(pids, cores[-1:])
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "later\n"
        tasks = [int(t) for pid in pids for t in os.listdir(f"/proc/{pid}/task")]
        assert len(tasks) >= 4  # the parent's three threads and the child's
        assert {frozenset(os.sched_getaffinity(t)) for t in tasks} == {frozenset(cores[-1:])}
        assert cpus_of(pids) == cores[-1:]
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
