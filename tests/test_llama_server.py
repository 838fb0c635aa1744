"""The llama-server runtime: the real `llama-server` (built by scripts/setup.sh) started by the
harness on the tiny f32 GGUF pair. Greedy equality with its own baseline and with our llamacpp
loop (same weights), the round counts against the server's own totals and /metrics, the phase
identity, sampling, the library-default and confidence policies, ngram-simple lookup, servers
stopped on close and paused while another measures, a server that dies in the middle of a sweep,
and load (tests/test_llama_server_lifecycle.py: the process's own life cycle). Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from spec_harness.core.drafters.ngram import NgramSpec
from spec_harness.core.config import DraftPolicy, GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.runtimes import llama_common as lc
from spec_harness.runtimes.llama_server import LlamaServerRuntime
from spec_harness.runtimes.process import ServerError
from spec_harness.runtimes.server import ServerSetting
from tests.procs import session_processes

SETTINGS = RuntimeSettings(n_threads=1, n_ctx=512)
PROMPT = "The quick brown fox"
ROOT = Path(__file__).resolve().parents[1]


def gen(n=40, gamma=4, s=SamplingParams(), seed=0, policy="fixed", drafter="model"):
    return GenerationSettings(s, gamma, n, seed, ignore_eos=True, draft_policy=policy, drafter=drafter)


def server_pids() -> set[int]:
    """Every llama-server process this test session started (tests/procs.py), alive or orphaned."""
    return session_processes(lambda proc: (proc / "comm").read_text().strip() == "llama-server")


@pytest.fixture(scope="module")
def pairs(tiny_gguf, tiny_self):
    return tiny_gguf, tiny_self


@pytest.fixture(scope="module")
def server(pairs, tmp_path_factory):
    rt = LlamaServerRuntime(SETTINGS, workdir=tmp_path_factory.mktemp("run"))
    rt.load(pairs[0])
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def ids(server):
    return server.encode(PROMPT)


def test_a_server_setting_is_what_the_server_takes_by_name():
    """The key of a server in the pool: its policy, most drafts, drafter, forced rates and streams,
    not the length, seed or sampling of a request; its log name says it."""
    s = ServerSetting.of(gen(40, 6, policy="confidence:0.5", drafter="ngram:1,3"))
    assert (s.policy, s.gamma_max, s.drafter, s.forced, s.concurrency) == (
        DraftPolicy("confidence", 0.5), 6, NgramSpec(1, 3), None, 1)
    assert not s.is_baseline and s.name == "confidence0.5-gamma6-ngram1-3"
    assert {s: "server"}[ServerSetting.of(gen(8, 6, SamplingParams(0.7), seed=3, policy="confidence:0.5",
                                               drafter="ngram:1,3"))] == "server"
    assert ServerSetting.of(gen(40, 6)) != ServerSetting.of(gen(40, 5)) != ServerSetting.baseline()
    assert ServerSetting.baseline().is_baseline and ServerSetting.baseline().name == "baseline"
    assert ServerSetting.baseline(4) != ServerSetting.baseline() and ServerSetting.baseline(4).name == "baseline-np4"
    assert ServerSetting.of(gen(policy="library-default")).name == "library-default"
    head = GenerationSettings(drafter="eagle3:/heads/smol/head", forced=(0.5, 0.25), concurrency=2)
    assert ServerSetting.of(head).name == "fixed-gamma4-eagle3-smol-forced0.5_0.25-np2"


def test_binary_is_the_setup_build():
    path = Path(lc.find_binary("llama-server"))
    import llama_cpp

    assert path.parent == Path(llama_cpp.__file__).parent / "lib"  # beside the libraries Python loads


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_greedy_speculative_equals_its_baseline_and_our_loop(server, llama_rt, ids, gamma):
    base = server.generate_baseline(ids, gen(40))
    assert len(base.token_ids) == 40 and len(base.rounds) == 40
    assert llama_rt.generate_baseline(llama_rt.encode(PROMPT), gen(40)).token_ids == base.token_ids  # same weights
    g = server.generate_speculative(ids, gen(40, gamma))
    assert g.token_ids == base.token_ids
    assert sum(r.emitted for r in g.rounds) == 40
    assert all(r.drafted <= gamma for r in g.rounds)
    assert 0 < sum(r.accepted for r in g.rounds) < sum(r.drafted for r in g.rounds)  # a real mix
    assert g.extra["server_draft"] == {"n_max": gamma, "n_min": 0, "p_min": 0.0} and g.draft_max == gamma


def test_round_counts_agree_with_the_servers_totals_and_metrics(server, ids):
    g = server.generate_speculative(ids, gen(40, 4))
    tm, m = g.extra["timings"], g.extra["server_metrics"]
    drafted = [r for r in g.rounds if r.drafted]
    assert sum(r.drafted for r in drafted) == tm["draft_n"] == m["draft_tokens"]
    assert sum(r.accepted for r in drafted) == tm["draft_n_accepted"] == m["accepted"]
    assert len(drafted) == m["drafts"]
    # /metrics counts, per position i, the rounds that accepted more than i drafts
    assert m["accepted_per_pos"] == [sum(1 for r in drafted if r.accepted > i) for i in range(4)]


def test_phases_add_up_to_the_wall(server, ids):
    for g in (server.generate_baseline(ids, gen(20)), server.generate_speculative(ids, gen(20, 4))):
        p = g.phases
        parts = [p.prefill_s, p.draft_s, p.verify_s, p.unaccounted_s]
        assert all(x is not None and x >= 0 for x in parts), p
        assert p.sampling_s is None and "sampling_s" in g.notes
        assert abs(sum(parts) - p.wall_s) < 1e-6
        assert p.prefill_s == pytest.approx(g.extra["timings"]["prompt_ms"] * 1e-3)
        assert all(r.wall_s is None for r in g.rounds)  # the server times no round
    assert p.draft_s > 0  # the speculative run: llama.cpp's drafting counter moved


def test_self_draft_accepts_everything(pairs, ids, tmp_path):
    rt = LlamaServerRuntime(SETTINGS, workdir=tmp_path)
    rt.load(pairs[1])
    try:
        g = rt.generate_speculative(ids, gen(40, 4))
        drafted = [r for r in g.rounds if r.drafted]
        assert drafted and all(r.accepted == r.drafted for r in drafted)
        assert g.token_ids == rt.generate_baseline(ids, gen(40)).token_ids
    finally:
        rt.close()


def test_sampling_runs_at_every_length_and_names_its_rule(server, ids):
    s = SamplingParams(temperature=0.8, top_p=0.9)
    for n in (1, 2, 5):
        g = server.generate_speculative(ids, gen(n, 4, s, seed=n))
        assert len(g.token_ids) == n and sum(r.emitted for r in g.rounds) == n
    assert server.verify_rule(gen(1, 4, s)) == "sample-match"
    assert server.verify_rule(gen(1, 4)) == "greedy-match"


def test_library_default_leaves_the_servers_draft_settings(server, ids):
    g = server.generate_speculative(ids, gen(40, 8, policy="library-default"))
    srv = server.servers[ServerSetting.of(gen(policy="library-default"))]
    assert "--spec-draft-n-max" not in srv.argv and "--spec-draft-p-min" not in srv.argv
    assert g.draft_max == g.extra["server_draft"]["n_max"] == 3  # this build's own default n-max, not our gamma 8
    assert max(r.drafted for r in g.rounds) == 3
    assert g.token_ids == server.generate_baseline(ids, gen(40)).token_ids


def test_confidence_maps_to_p_min(server, ids):
    """--spec-draft-p-min P: the server drops the first draft whose probability is under P. Its
    probability is the draft sampler's top-1 among its top 10 candidates (renormalized), not over
    the whole vocabulary as in the shared loop, so the two stop at different rounds; greedy output
    stays the target's."""
    g = server.generate_speculative(ids, gen(40, 6, policy="confidence:0.9"))
    srv = server.servers[ServerSetting.of(gen(40, 6, policy="confidence:0.9"))]
    assert srv.argv[srv.argv.index("--spec-draft-p-min") + 1] == "0.9" and g.extra["server_draft"]["p_min"] == 0.9
    assert g.token_ids == server.generate_baseline(ids, gen(40)).token_ids
    fixed = server.generate_speculative(ids, gen(40, 6))
    assert sum(r.drafted for r in g.rounds) < sum(r.drafted for r in fixed.rounds)  # it stopped early
    assert any(0 < r.drafted < 6 for r in g.rounds) and g.draft_max == 6
    assert "schedule" in server.supports(gen(policy="heuristic"))


@pytest.mark.parametrize("drafter, size_n, size_m", [("ngram", 2, 4), ("ngram:1,3", 1, 3)])
def test_ngram_simple_is_the_servers_own_lookup(server, drafter, size_n, size_m):
    ids = server.encode("one two three four, one two three four, one two three")
    g = server.generate_speculative(ids, gen(40, 4, drafter=drafter))
    srv = server.servers[ServerSetting.of(gen(40, 4, drafter=drafter))]
    assert "-md" not in srv.argv and srv.argv[srv.argv.index("--spec-type") + 1] == "ngram-simple"
    assert g.extra["server_draft"] == {"size_n": size_n, "n_max": size_m, "min_hits": 1} and g.draft_max == size_m
    assert g.token_ids == server.generate_baseline(ids, gen(40)).token_ids
    assert max(r.drafted for r in g.rounds) == size_m and sum(r.accepted for r in g.rounds) > 10
    assert g.phases.draft_s is not None and g.phases.draft_s > 0  # llama.cpp's own lookup timer
    assert server.supports(gen(policy="confidence:0.5", drafter=drafter))  # no probabilities to stop on


def test_ngram_simple_untuned_is_the_servers_own_defaults(server, ids):
    g = server.generate_speculative(ids, gen(24, 4, policy="library-default", drafter="ngram"))
    srv = server.servers[ServerSetting.of(gen(policy="library-default", drafter="ngram"))]
    assert "--spec-ngram-simple-size-n" not in srv.argv and "-md" not in srv.argv
    assert g.extra["server_draft"] == {"size_n": 12, "n_max": 48, "min_hits": 1} and g.draft_max == 48
    assert g.token_ids == server.generate_baseline(ids, gen(24)).token_ids


# ---- the process life cycle ----------------------------------------------------------------------


def test_close_stops_every_server_and_frees_the_vocabulary_model(pairs, ids, tmp_path, monkeypatch):
    import llama_cpp

    freed, free = [], llama_cpp.llama_model_free
    monkeypatch.setattr(llama_cpp, "llama_model_free", lambda model: (freed.append(model), free(model))[1])
    before = server_pids()
    rt = LlamaServerRuntime(SETTINGS, workdir=tmp_path)
    rt.load(pairs[0])
    text_model = rt.text_model  # the target's vocabulary, loaded in-process for encode/decode
    rt.generate_speculative(ids, gen(8, 2))
    mine = server_pids() - before
    assert len(mine) == 2  # baseline and gamma 2
    assert sorted(p.name for p in (tmp_path / "llama-server").iterdir()) == ["01-baseline.log", "02-fixed-gamma2.log"]
    assert text_model is not None and text_model not in freed  # the draft's vocabulary went at the load
    rt.close()
    assert not (server_pids() & mine)
    assert freed.count(text_model) == 1 and rt.text_model is None
    rt.close()  # again: nothing is freed twice
    assert freed.count(text_model) == 1


def _state(pid: int) -> str:
    """A process's state letter (R running, S sleeping, T stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_only_the_server_in_use_runs_the_others_are_paused(pairs, ids, tmp_path):
    rt = LlamaServerRuntime(SETTINGS, workdir=tmp_path)
    rt.load(pairs[0])
    try:
        base = rt.generate_baseline(ids, gen(8))
        spec = rt.generate_speculative(ids, gen(8, 2))
        b, s = rt.servers[ServerSetting.baseline()], rt.servers[ServerSetting.of(gen(8, 2))]
        assert (_state(b.proc.pid), b.paused) == ("T", True) and _state(s.proc.pid) != "T"
        assert rt.generate_baseline(ids, gen(8)).token_ids == base.token_ids == spec.token_ids  # resumed, answers
        assert _state(s.proc.pid) == "T" and _state(b.proc.pid) != "T"
        paused = s.proc.pid
    finally:
        rt.close()
    assert not (server_pids() & {paused})  # a paused server is stopped too


def test_a_sweep_starts_each_server_once(tmp_path):
    """Five server settings (baseline, gamma 1 and 2, each with the draft model and with prompt
    lookup), more than the pool holds, over five prompts: the runner measures one setting at a
    time, so each server starts once (run.json says so) and no server is left."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    before = server_pids()
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["sweep", "--runtime", "llama-server", "--pair", "tiny", "--gamma", "1,2", "--drafter",
                                    "model,ngram:2,3", "--max-new-tokens", "12", "--prompts", "math", "--threads", "1",
                                    "--n-ctx", "512", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 5 * 5 and not [r for r in rows if r["error"]]
    assert all(r["greedy_match"] for r in rows if r["mode"] == "speculative")
    settings = ["baseline", "fixed-gamma1", "fixed-gamma2", "fixed-gamma1-ngram2-3", "fixed-gamma2-ngram2-3"]
    starts = json.loads((out / "run.json").read_text())["runtimes"]["llama-server"]["server_starts"]
    assert starts == dict.fromkeys(settings, 1)
    assert sorted(p.name for p in (out / "llama-server").iterdir()) == sorted(
        f"{i:02d}-{name}.log" for i, name in enumerate(settings, 1))
    said = " ".join(res.output.split())  # console lines wrap at 100 columns
    assert "servers started: " + ", ".join(f"{name} 1x" for name in settings) in said
    assert all(len(line) <= 100 for line in res.output.splitlines() if "servers started" in line)
    assert not server_pids() - before


def test_a_server_runtime_measured_later_starts_early_and_is_paused_while_another_measures(tmp_path, monkeypatch):
    """`--runtime probe,llama-server`: llama-server is loaded at the start of the run and its first
    server launched then (starts_early), every one of its processes is stopped (T) while the probe
    runtime generates, each setting's server still starts once, and none is left."""
    from spec_harness import runtimes
    from spec_harness.harness.prompts import load_prompts
    from spec_harness.harness.run_config import RunConfig
    from spec_harness.harness.runner import Runner
    from spec_harness.models.presets import resolve_pair
    from tests.toy_runtime import Probe

    monkeypatch.setitem(runtimes.REGISTRY, "probe", "tests.toy_runtime:Probe")
    def mine() -> set[str]:  # the states of this run's llama-servers (their output goes to its folder)
        return {_state(pid) for pid in server_pids() if str(tmp_path / "o") in os.readlink(f"/proc/{pid}/fd/1")}

    monkeypatch.setattr(Probe, "watch", staticmethod(mine))
    monkeypatch.setattr(Probe, "seen", [])
    before = server_pids()
    cfg = RunConfig(["probe", "llama-server"], [resolve_pair("tiny")], load_prompts("math")[:2], gammas=[2],
                    max_new_tokens=[8], runtime=SETTINGS, warmup=1, out=tmp_path / "o")
    rows = Runner(cfg).run()
    assert len(rows) == cfg.n_rows() and not [r for r in rows if r["error"]]
    assert Probe.seen and all(states == {"T"} for states in Probe.seen), Probe.seen  # a server, and all paused
    starts = json.loads((tmp_path / "o" / "run.json").read_text())["runtimes"]["llama-server"]["server_starts"]
    assert starts == {"baseline": 1, "fixed-gamma2": 1}
    assert all(r["greedy_match"] for r in rows if r["runtime"] == "llama-server" and r["mode"] == "speculative")
    assert not server_pids() - before


def test_interleaved_settings_take_turns_prompt_by_prompt(tmp_path):
    """`--interleave` (harness tune always): baseline, gamma 1 and 2 of the draft model and of prompt
    lookup, each a server of its own, all live at once (the pool's limit raised past MAX_LIVE where
    memory holds them), measured in turn for each prompt as the in-process runtimes are; each
    server starts once, and none is left."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    before = server_pids()
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["sweep", "--runtime", "llama-server", "--pair", "tiny", "--gamma", "1,2", "--drafter",
                                    "model,ngram", "--max-new-tokens", "8", "--prompts", "math", "--threads", "1",
                                    "--n-ctx", "512", "--interleave", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = sorted((json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()), key=lambda r: r["started_at"])
    assert len(rows) == 5 * 5 and not [r for r in rows if r["error"]]
    turn = [(r["mode"], r["drafter"], r["gamma"]) for r in rows[:5]]
    assert turn == [("baseline", None, None), ("speculative", "model", 1), ("speculative", "model", 2),
                    ("speculative", "ngram", 1), ("speculative", "ngram", 2)]
    assert [r["prompt_id"] for r in rows] == [p for p in dict.fromkeys(r["prompt_id"] for r in rows) for _ in range(5)]
    assert all(r["greedy_match"] for r in rows if r["mode"] == "speculative")
    info = json.loads((out / "run.json").read_text())
    assert info["config"]["interleave"] is True
    starts = info["runtimes"]["llama-server"]["server_starts"]
    assert starts == dict.fromkeys(["baseline", "fixed-gamma1", "fixed-gamma2", "fixed-gamma1-ngram", "fixed-gamma2-ngram"], 1)
    assert not server_pids() - before


def test_a_dead_server_is_started_again(server, ids):
    server.generate_speculative(ids, gen(8, 4))
    srv = server.servers[ServerSetting.of(gen(8, 4))]
    os.kill(srv.proc.pid, signal.SIGKILL)
    srv.proc.wait()
    with pytest.raises(ServerError, match="died during a request"):
        srv.request("/completion", {"prompt": ids, "n_predict": 1})
    g = server.generate_speculative(ids, gen(8, 4))  # a new server for the same setting
    assert len(g.token_ids) == 8 and server.servers[ServerSetting.of(gen(8, 4))] is not srv


class DyingServer(LlamaServerRuntime):
    """The real runtime; the real server is killed with SIGKILL in the middle of the second
    speculative generation (a long one), as a crash would."""

    n = 0

    def generate_speculative(self, prompt_ids, gen):
        DyingServer.n += 1
        if DyingServer.n == 2:
            srv = self._server(ServerSetting.of(gen))
            threading.Timer(0.3, lambda: os.kill(srv.proc.pid, signal.SIGKILL)).start()
            gen = GenerationSettings(gen.sampling, gen.gamma, 100_000, gen.seed, True, gen.draft_policy)
        return super().generate_speculative(prompt_ids, gen)


def test_a_server_dying_mid_sweep_is_an_error_row_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from spec_harness import runtimes
    from spec_harness.harness.prompts import load_prompts
    from spec_harness.harness.run_config import RunConfig
    from spec_harness.harness.runner import Runner
    from spec_harness.models.presets import resolve_pair

    monkeypatch.setitem(runtimes.REGISTRY, "dying", "tests.test_llama_server:DyingServer")
    DyingServer.n = 0
    cfg = RunConfig(["dying"], [resolve_pair("tiny")], load_prompts("math")[:3], gammas=[2], max_new_tokens=[8], warmup=0,
                    runtime=RuntimeSettings(n_threads=1, n_ctx=200_000), out=tmp_path / "o")
    rows = Runner(cfg).run()
    spec = [r for r in rows if r["mode"] == "speculative"]
    assert [bool(r["error"]) for r in spec] == [False, True, False]
    assert "died during a request" in spec[1]["error"] or "did not answer" in spec[1]["error"]


@pytest.mark.slow
def test_library_default_beside_fixed_gamma_in_a_run_its_report_and_resume(tmp_path):
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    out = tmp_path / "o"
    args = ["run", "--runtime", "llama-server,llamacpp", "--pair", "tiny", "--draft-policy", "fixed,library-default",
            "--max-new-tokens", "16", "--prompts", "math", "--warmup", "0", "--threads", "1", "--n-ctx", "512",
            "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    lib = [r for r in rows if r["draft_policy"] == "library-default" and not r["error"]]
    assert lib and all(r["runtime"] == "llama-server" and r["gamma"] == 3 for r in lib)
    assert all(r["greedy_match"] and r["verify_rule"] == "greedy-match" for r in lib)
    skipped = [r for r in rows if r["runtime"] == "llamacpp" and r["error"]]
    assert len(skipped) == 1 and "no library default" in skipped[0]["error"]  # one row says so, the run goes on
    assert "llama-server [library-default]" in res.output  # the summary shows it as a runtime of its own
    report = (out / "report" / "report.md").read_text()
    assert "llama-server [library-default]" in report
    again = CliRunner().invoke(main, args + ["--resume"])
    assert again.exit_code == 0, again.output
    rows2 = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows2) == len(rows) + 1  # only the skipped row is tried again


def test_a_run_under_load_measures_each_request_of_each_cell(tmp_path):
    """`--concurrency 1,2` with the real llama-server (-np 2): at N = 2 every prompt is sent
    repeats_at(2) times through two closed-loop streams, one row per request with its cell, the
    client's times and the server's counts (checked against /metrics inside the runtime); the
    in-process runtime is one skipped row; each setting's server starts once; a resumed run
    measures nothing again; the report has its section under load."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    before = server_pids()
    out = tmp_path / "o"
    args = ["run", "--runtime", "torch,llama-server", "--pair", "tiny", "--concurrency", "1,2", "--gamma", "2",
            "--max-new-tokens", "12", "--prompts", "math", "--threads", "1", "--n-ctx", "1024", "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    load = [r for r in rows if r["runtime"] == "llama-server" and r["concurrency"] == 2]
    assert len(load) == 2 * 5 and not [r for r in load if r["error"]]  # 5 prompts once each: 5 >= 2N requests a cell
    spec = [r for r in load if r["mode"] == "speculative"]
    assert len({r["cell"] for r in spec}) == 1 and all(r["ttft_s"] > 0 and r["request_end_s"] > r["request_start_s"] for r in spec)
    assert sum(r["n_drafted"] for r in spec) == sum(r["extra"]["timings"]["draft_n"] for r in spec) > 0
    assert all(r["new_tokens"] == 12 or r["token_ids"][-1:] == [256] for r in load)  # 12 tokens unless it ended
    assert [r["error"] for r in rows if r["runtime"] == "torch" and r["concurrency"] == 2] == [
        "skipped: torch runs one sequence at a time (--concurrency above 1 and --request-rate run on llama-server "
        "and vllm)"]
    starts = json.loads((out / "run.json").read_text())["runtimes"]["llama-server"]["server_starts"]
    assert starts == {"baseline": 1, "fixed-gamma2": 1, "baseline-np2": 1, "fixed-gamma2-np2": 1}
    assert "batched_costs" in json.loads((out / "run.json").read_text())
    report = (out / "report" / "report.md").read_text()
    assert "## Under load" in report and "speedup_vs_concurrency.png" in report
    again = CliRunner().invoke(main, args + ["--resume"])
    after = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    measured = lambda rs: [r for r in rs if not r["error"]]  # noqa: E731 - a skipped row is tried again
    assert again.exit_code == 0 and len(measured(after)) == len(measured(rows)), again.output
    assert not server_pids() - before


def test_an_engine_prices_its_batches_at_the_load_level_of_the_settings_it_is_given(tmp_path):
    """UnderLoad.price_batches reads N from the settings alone: at the baseline's server the
    target's passes of N x k tokens and its step, at a draft model's server the draft's pass
    (its step's extra over the baseline's beyond the verify batch, per gamma), under run.json's
    keys of that N."""
    from spec_harness.core.config import PairSpec
    from spec_harness.harness.prompts import Prompt
    from spec_harness.harness.rows import Measuring
    from spec_harness.harness.run_config import RunConfig
    from spec_harness.harness.under_load import UnderLoad

    class Engine:  # seconds that grow with the tokens of a batch; a draft model's step costs more
        prices_batches = True

        def batch_pass_s(self, n, ks, ids):
            return {str(k): 0.01 * n + 0.002 * n * k for k in ks}

        def decode_step_s(self, gen, n, ids):
            return 0.012 * n * (1 if gen is None else 2.5)

    cfg = RunConfig(["torch"], [PairSpec("p")], [Prompt("a", "factual", "Hi")], gammas=[4], concurrencies=[1, 3],
                    out=tmp_path)
    info: dict = {}
    load = UnderLoad(cfg, tmp_path, info, emit=None, advance=None, check=None)
    m = Measuring("vllm", PairSpec("p"), Engine(), "vllm", {"a": [1, 2]}, RuntimeSettings(), "p", None)
    at = lambda setting: cfg.generation(cfg.first_cell, setting, concurrency=3)  # noqa: E731
    load.price_batches(m, at(cfg.settings_of("torch")[0]), speculative=False)
    spec = cfg.settings_of("torch")[1]
    load.price_batches(m, at(spec), speculative=True)
    own = json.loads((tmp_path / "run.json").read_text())["batched_costs"]["p"]["by_runtime"]["vllm"]
    target = Engine().batch_pass_s(3, [1, 5], None)
    assert own["target"] == {"3": target} and own["step"] == {"3": Engine().decode_step_s(None, 3, None)}
    v = target["5"] / target["1"]
    per_gamma = (2.5 - v) / 4  # the draft model's step over the baseline's, less the verify batch, per draft
    assert own["draft"] == {"3": {"1": pytest.approx(per_gamma * target["1"])}}


@pytest.mark.parametrize("flag, why", [("0", "--concurrency must be >= 1"),
                                       ("64", "do not fit llama-server's context (at most 15 do with --n-ctx 512)"),
                                       ("12", "do not fit llama-server's context (42 tokens each)")])  # the prompts
def test_impossible_concurrency_is_one_line_and_exit_2(tmp_path, flag, why):
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    res = CliRunner().invoke(main, ["run", "--runtime", "llama-server", "--pair", "tiny", "--concurrency", flag,
                                    "--prompts", "math", "--n-ctx", "512", "--threads", "1", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and why in res.output, res.output
