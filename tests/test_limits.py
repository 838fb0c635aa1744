"""core/limits.py and `harness limits`: this machine's read bandwidth and matmul throughput, measured
with torch (positive, at the thread count asked for, torch's own count restored), cached once per
machine key, measured again on request; bad input is one line and exit 2."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from spec_harness.core import limits
from spec_harness.harness.cli import main


def test_limits_are_measured_positive_and_restore_torchs_threads(tmp_path):
    before = torch.get_num_threads()
    got = limits.machine_limits(1, tmp_path)
    assert torch.get_num_threads() == before
    assert got["read_gb_s"] > 0 and got["matmul_f32_gflops"] > 0 and got["threads"] == 1
    assert got["read_gb_s"] == max(got["read_gb_s_by_kernel"].values()) and set(got["read_gb_s_by_kernel"]) == {"sum", "amax", "sum huge pages", "amax huge pages"}
    assert got["matmul_int8_gops"] is None and got["matmul_int8_note"] or got["matmul_int8_gops"] > 0
    assert got["cpu"] and got["torch"] == torch.__version__ and got["seconds"] > 0


def test_a_second_call_reads_the_cache_and_remeasure_measures_again(tmp_path, monkeypatch):
    monkeypatch.delenv(limits.REMEASURE_ENV, raising=False)
    logged = []
    first = limits.machine_limits(1, tmp_path, log=logged.append)
    path = limits.cache_file(tmp_path, 1)
    assert logged == [limits.MEASURING] and first["cache_file"] == str(path)
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "read_gb_s": 12345.0}))  # a value no measurement gives
    assert limits.machine_limits(1, tmp_path, log=logged.append)["read_gb_s"] == 12345.0
    assert logged == [limits.MEASURING]  # read, not measured
    again = limits.machine_limits(1, tmp_path, remeasure=True, log=logged.append)
    assert again["read_gb_s"] != 12345.0 and len(logged) == 2
    assert json.loads(path.read_text())["read_gb_s"] == again["read_gb_s"]  # the new measurement is cached
    path.write_text(json.dumps({**stored, "read_gb_s": 12345.0}))
    monkeypatch.setenv(limits.REMEASURE_ENV, "1")
    assert limits.machine_limits(1, tmp_path, log=logged.append)["read_gb_s"] != 12345.0 and len(logged) == 3


def test_a_cache_file_of_another_machine_key_or_garbage_is_measured_over(tmp_path, monkeypatch):
    monkeypatch.delenv(limits.REMEASURE_ENV, raising=False)
    path = limits.cache_file(tmp_path, 1)
    path.write_text(json.dumps({"machine_key": "another CPU", "read_gb_s": 12345.0}))
    assert limits.machine_limits(1, tmp_path, log=lambda m: None)["read_gb_s"] != 12345.0
    path.write_text("{not json")
    assert limits.machine_limits(1, tmp_path, log=lambda m: None)["read_gb_s"] > 0
    assert limits.cache_file(tmp_path, 1) != limits.cache_file(tmp_path, 2)  # threads are part of the key


def test_harness_limits_prints_them_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    monkeypatch.delenv(limits.REMEASURE_ENV, raising=False)
    res = CliRunner().invoke(main, ["limits", "--threads", "1"])
    assert res.exit_code == 0, res.output
    assert limits.MEASURING in res.output and "memory read bandwidth" in res.output and "float32 matmul" in res.output
    assert "at 1 thread:" in res.output and str(tmp_path / "limits") in res.output
    res = CliRunner().invoke(main, ["limits", "--threads", "1"])
    assert res.exit_code == 0 and limits.MEASURING not in res.output
    res = CliRunner().invoke(main, ["limits", "--threads", "1", "--remeasure"])
    assert res.exit_code == 0 and limits.MEASURING in res.output


@pytest.mark.parametrize("threads", ["0", "-2"])
def test_bad_thread_count_is_one_line_and_exit_2(threads):
    res = CliRunner().invoke(main, ["limits", "--threads", threads])
    assert res.exit_code == 2 and res.output.strip().splitlines() == [f"error: --threads must be >= 1, got {threads}"]
