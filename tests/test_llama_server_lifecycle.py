"""The llama-server runtime's process life cycle, with the real `llama-server` scripts/setup.sh
builds: no server outlives the harness (Ctrl-C, SIGTERM, kill -9, a kill while a server starts or
forks), a port in use, a model the server cannot load, a binary not built. Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spec_harness.runtimes import llama_common as lc
from spec_harness.runtimes import process as process_mod
from spec_harness.runtimes.process import ServerError, ServerProcess
from tests.test_llama_server import ROOT, server_pids


@pytest.fixture(scope="module")
def pairs(tiny_gguf, tiny_self):
    return tiny_gguf, tiny_self


def _harness(args: list[str], tmp_path: Path) -> subprocess.Popen:
    """The harness as a user starts it from a terminal: Ctrl-C (SIGINT) acts even when these tests
    run in a background job, which starts with SIGINT ignored."""
    return subprocess.Popen([sys.executable, "-m", "spec_harness.harness.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_server(before: set[int], timeout=120.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mine = server_pids() - before
        if mine:
            return mine
        time.sleep(0.1)
    raise AssertionError("no llama-server started")


def _gone(pids: set[int], timeout=15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not (server_pids() & pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_no_server_outlives_the_harness(tmp_path, sig, code):
    """Ctrl-C, SIGTERM and kill -9 of a running sweep: the servers go with it, and the rows stay."""
    before = server_pids()
    out = tmp_path / "o"
    p = _harness(["sweep", "--runtime", "llama-server", "--pair", "tiny", "--gamma", "1,2,3,4,5,6", "--prompts", "factual",
                  "--max-new-tokens", "64", "--ignore-eos", "--repeats", "50", "--threads", "1", "--n-ctx", "512",
                  "--out", str(out)], tmp_path)
    mine = _wait_for_server(before)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not ((out / "results.jsonl").exists() and (out / "results.jsonl").stat().st_size):
        time.sleep(0.1)
    os.kill(p.pid, sig)
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:  # a harness that did not stop must not go on starting servers
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        pytest.fail(f"the harness did not stop within 60 s of signal {sig}; its output:\n{p.stdout.read()[-3000:]}")
    assert p.returncode == code, p.stdout.read()
    assert _gone(mine | (server_pids() - before)), "a llama-server outlived the harness"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.endswith("}")]
    assert rows and all(r["runtime"] == "llama-server" and not r["error"] for r in rows)


@pytest.mark.slow
def test_a_harness_killed_while_its_server_starts_leaves_no_server(tmp_path, pairs):
    """kill -9 of the starting process 0-40 ms after it forks the server, i.e. around the fork, the
    exec and the server's model loading (llama-server loses a SIGTERM then): none is left."""
    code = ("import os, signal, sys, threading, time; from pathlib import Path; from runtimes.process import ServerProcess; "
            "from runtimes import process; popen = process.subprocess.Popen; "
            "process.subprocess.Popen = lambda *a, **k: (threading.Timer(float(sys.argv[1]), os.kill, "
            "(os.getpid(), signal.SIGKILL)).start(), popen(*a, **k))[1]; "
            "ServerProcess(sys.argv[2:], Path(%r), 'llama-server').start(); time.sleep(60)" % str(tmp_path / "s.log"))
    argv = [lc.find_binary("llama-server"), "-m", pairs[0].target_gguf, "-c", "256", "-t", "1"]
    for delay in (0.0, 0.002, 0.005, 0.01, 0.02, 0.04):
        before = server_pids()
        subprocess.run([sys.executable, "-c", code, str(delay), *argv], cwd=ROOT)
        assert _gone(server_pids() - before, timeout=10), f"a llama-server outlived its harness (killed after {delay} s)"


@pytest.mark.slow
def test_a_signal_during_the_servers_fork_is_not_lost(tmp_path, pairs):
    """SIGTERM that arrives while the harness forks a server (here: from Python's own after-fork hook,
    where a raised exception is ignored) still stops the harness, and takes the server with it."""
    code = ("import os, signal, sys; from pathlib import Path; from runtimes.process import ServerProcess\n"
            "def on_term(*a): raise KeyboardInterrupt\n"
            "signal.signal(signal.SIGTERM, on_term)\n"
            "os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGTERM))\n"
            "try:\n    ServerProcess(sys.argv[1:], Path(%r), 'llama-server').start()\n"
            "except KeyboardInterrupt:\n    sys.exit(143)\n" % str(tmp_path / "s.log"))
    argv = [lc.find_binary("llama-server"), "-m", pairs[0].target_gguf, "-c", "256", "-t", "1"]
    before = server_pids()
    p = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, timeout=120)
    assert p.returncode == 143, "the SIGTERM was lost: the server started as if nothing had happened"
    assert _gone(server_pids() - before), "a llama-server outlived the harness"


@pytest.mark.slow
def test_a_port_in_use(tmp_path, pairs):
    argv = [lc.find_binary("llama-server"), "-m", pairs[0].target_gguf, "-c", "256", "-t", "1"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} .* in use"):  # a port the user chose
            ServerProcess(argv, tmp_path / "a.log", "llama-server").start(port=port)
        # a free port taken between our check and the server's bind: the server's bind fails, another port is tried
        ports = iter([port, process_mod.free_port()])
        orig = process_mod.free_port
        process_mod.free_port = lambda: next(ports)
        try:
            srv = ServerProcess(argv, tmp_path / "b.log", "llama-server").start()
        finally:
            process_mod.free_port = orig
        try:
            assert srv.port != port and srv.alive()
            assert "couldn't bind" in (tmp_path / "b.log").read_text()
        finally:
            srv.stop()


def test_a_model_the_server_cannot_load_gives_its_own_reason(tmp_path, pairs):
    data = Path(pairs[0].target_gguf).read_bytes()
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(data[: len(data) // 2])
    srv = ServerProcess([lc.find_binary("llama-server"), "-m", str(bad)], tmp_path / "s.log", "llama-server")
    with pytest.raises(ServerError, match="not within the file bounds") as e:
        srv.start()
    assert "\n" not in str(e.value) and not srv.alive()


@pytest.mark.slow
def test_missing_binary_is_a_skipped_row_and_exit_2(tmp_path):
    env = {**os.environ, "HARNESS_LLAMA_SERVER": str(tmp_path / "nothing")}
    r = subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", "run", "--runtime", "llama-server", "--pair", "tiny",
                        "--max-new-tokens", "4", "--prompts", "math", "--out", str(tmp_path / "o")], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "skipped: HARNESS_LLAMA_SERVER=" in r.stderr and "Traceback" not in r.stderr
    rows = [json.loads(line) for line in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["error"].startswith("skipped:")
    # the skip reason and one error line: no empty summary table, no report of nothing
    assert not r.stdout.strip() and not (tmp_path / "o" / "report").exists()
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no runtime measured anything" in errors[0]
