"""`harness run` end to end, and bad input: one line, exit 2, no traceback."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DESIGN_FIELDS = (
    "runtime mode pair target_quant prompt_id category repeat gamma temperature top_p top_k seed max_new_tokens device dtype "
    "wall_s prefill_s draft_s verify_s sampling_s unaccounted_s new_tokens tokens_per_s e2e_tokens_per_s n_rounds "
    "n_drafted n_accepted acceptance_rate alpha_hat mean_accepted_len per_position_acceptance per_position_marginal "
    "acceptance_length accept_histogram "
    "token_ids text greedy_match rounds error"
).split()
ROOT = Path(__file__).resolve().parents[1]


def invoke(*args):
    """The command line in this process (what the checks of bad input need: no model is loaded)."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    res = CliRunner().invoke(main, [str(a) for a in args])
    return subprocess.CompletedProcess(args, res.exit_code, res.stdout, res.stderr)


def harness(*args, cwd=None):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # see conftest: tiny models, shared cores
    return subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=600, env=env)


def test_run_torch_writes_run_json_and_results(tmp_path):
    out = tmp_path / "run"
    r = harness("run", "--runtime", "torch", "--pair", "tiny", "--max-new-tokens", "12", "--prompts", "factual", "--repeats", "2",
                "--gamma", "3", "--out", str(out))
    assert r.returncode == 0, r.stderr
    verdict = r.stdout[r.stdout.index("verdict · "):].splitlines()
    # the decode speedup stands beside the end-to-end one only where prefill makes them differ
    plain = ["runtime", "device", "g", "tok/s", "tok/s", "speedup", "alpha", "tau", "largest", "cost"]
    both = plain[:5] + ["e2e", "decode"] + plain[6:]
    assert verdict[2].split() == plain or (verdict[2].split() == both and verdict[1].split()[-2:] == ["speedup"] * 2)
    assert verdict[3].startswith("torch [kernels]") and verdict[3].split()[3] == "3"  # cpu, gamma 3
    assert any(line.startswith("Fastest here: torch [kernels]") for line in verdict[-6:])  # the last lines say it
    assert "Fastest here: torch [kernels]" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines() if not line.startswith("written to ")) <= 100
    assert (out / "trace.json").is_file() and (out / "report" / "report.html").is_file()
    info = json.loads((out / "run.json").read_text())
    assert info["config"]["gammas"] == [3] and info["environment"]["packages"]["torch"]
    assert info["model_files"] and all(len(f["sha256"]) == 64 for f in info["model_files"])
    assert info["runtimes"]["torch [kernels]"]["device"] == "cpu" and info["runtimes"]["torch [kernels]"]["torch_forward"] == "kernels"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 5 * 2 * 2  # prompts x repeats x modes
    for row in rows:
        assert set(DESIGN_FIELDS) <= set(row), set(DESIGN_FIELDS) - set(row)
        assert row["error"] is None
        assert all(row[k] >= 0 for k in ("prefill_s", "draft_s", "verify_s", "sampling_s", "unaccounted_s"))
        assert row["new_tokens"] == len(row["token_ids"]) == sum(rd["emitted"] for rd in row["rounds"])
        if row["mode"] == "speculative":
            assert row["greedy_match"] is True and row["gamma"] == 3 and row["alpha_hat"] is not None
        else:
            assert row["greedy_match"] is None and row["alpha_hat"] is None
    assert {r["seed"] for r in rows} == {0, 1}
    # the passes and choices are booked to their phases (over all rows: one 9 ms row preempted on a busy machine is not a bug)
    assert sum(r["unaccounted_s"] for r in rows) < 0.5 * sum(r["wall_s"] for r in rows)


def test_torch_forward_is_an_axis_each_forward_a_runtime_of_its_own(tmp_path):
    """--torch-forward kernels,eager: both measured, each named in its rows, run.json and report."""
    out = tmp_path / "run"
    r = harness("run", "--runtime", "torch", "--pair", "tiny", "--max-new-tokens", "8", "--prompts", "factual",
                "--torch-forward", "kernels,eager", "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted({(x["runtime"], x["torch_forward"]) for x in rows}) == [("torch", "eager"), ("torch", "kernels")]
    assert len(rows) == 2 * 5 * 2 and not any(x["error"] for x in rows)
    info = json.loads((out / "run.json").read_text())
    forward = {k: v["forward"]["target"] for k, v in info["runtimes"].items()}
    assert set(forward) == {"torch [kernels]", "torch [eager]"} and set(info["roofline"]["tiny"]) == set(forward)
    assert "kernel" in forward["torch [kernels]"] and "kernel" not in forward["torch [eager]"]
    report = (out / "report" / "report.md").read_text()
    for label in ("torch [kernels]", "torch [eager]"):
        assert label in r.stdout and label in report
    same = {x["prompt_id"]: x["token_ids"] for x in rows if x["torch_forward"] == "kernels" and x["mode"] == "baseline"}
    assert same == {x["prompt_id"]: x["token_ids"] for x in rows if x["torch_forward"] == "eager" and x["mode"] == "baseline"}
    bad = harness("run", "--runtime", "torch", "--pair", "tiny", "--torch-forward", "compiled", "--out", str(tmp_path / "b"))
    assert bad.returncode == 2 and "--torch-forward must be one of auto, kernels, eager" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--runtime", "nope"], "unknown runtime 'nope'; choose from: torch"),
        (["--gamma", "0"], "--gamma must be >= 1"),
        (["--gamma", "2,0"], "--gamma must be >= 1"),
        (["--gamma", "2,four"], "--gamma takes a comma list of numbers, got '2,four'"),
        (["--temperature", "-0.5"], "--temperature must be >= 0"),
        (["--top-p", "0"], "--top-p must be in (0, 1]"),
        (["--top-p", "1.5"], "--top-p must be in (0, 1]"),
        (["--prompts", "poetry"], "unknown prompt set 'poetry'"),
        (["--target", "/no/such/model", "--draft", "self"], "target model not found: /no/such/model"),
        (["--max-new-tokens", "5000"], "exceeds the 1024-token context"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, needle):
    pair = [] if "--target" in args else ["--pair", "tiny"]  # the default pair is a real model now
    r = invoke("run", *pair, *args, "--out", str(tmp_path / "o"))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], r.stderr


def _one_error(r, needle: str) -> None:
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], r.stderr


def test_bad_folders_and_settings_are_said_before_any_work(tmp_path):
    """Each of these used to be found only after minutes of measuring (or to end in a traceback)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "results.jsonl").write_text("")
    out = tmp_path / "c"
    _one_error(invoke("calibrate", "--pair", "tiny", "--run", str(empty), "--out", str(out)), f"no result rows in {empty}")
    _one_error(invoke("calibrate", "--pair", "tiny", "--alpha", "0.5,2", "--out", str(out)), "--alpha")
    assert not out.exists()  # nothing was measured
    _one_error(invoke("bench", "--figures", "1", "--out", str(tmp_path)), f"--out {tmp_path} is a folder")
    a_file = tmp_path / "f"
    a_file.write_text("mine")
    _one_error(invoke("run", "--pair", "tiny", "--out", str(a_file)), "is a file, not a folder")
    assert a_file.read_text() == "mine"


def test_a_concurrency_no_server_can_hold_is_one_line_before_any_work(tmp_path):
    """llama-server shares its context between its sequences: 100000 of them cannot fit, and that
    is known before llama.cpp's batched passes are timed or any runtime loads (it used to do both
    first, then say "(0 tokens each)")."""
    import time

    t = time.perf_counter()
    r = invoke("run", "--runtime", "llama-server", "--pair", "tiny", "--concurrency", "100000", "--out", tmp_path / "o")
    took = time.perf_counter() - t
    _one_error(r, "--concurrency 100000: 100000 sequences of at least 33 tokens (a prompt and --max-new-tokens 32) "
                  "do not fit llama-server's context (at most 124 do with its default of at most 4096 tokens); "
                  "lower --concurrency or raise --n-ctx")
    assert "0 tokens each" not in r.stdout + r.stderr
    assert "batched passes" not in r.stderr and "loading" not in r.stderr, r.stderr
    assert not (tmp_path / "o" / "results.jsonl").exists() and took < 30
    small = invoke("run", "--runtime", "llama-server", "--pair", "tiny", "--concurrency", "1,16", "--n-ctx", "512",
                   "--max-new-tokens", "40", "--out", tmp_path / "o")
    _one_error(small, "do not fit llama-server's context (at most 12 do with --n-ctx 512)")


def test_mismatched_tokenizers_are_refused(tmp_path):
    from spec_harness.models.tiny import ensure_pair

    tiny_target, _ = ensure_pair("tiny")
    _, micro_draft = ensure_pair("micro")
    r = invoke("run", "--target", str(tiny_target), "--draft", str(micro_draft), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "draft and target tokenizers differ" in r.stderr
    assert not (tmp_path / "o" / "results.jsonl").read_text().strip()  # nothing measured, nothing claimed


def test_existing_results_are_never_overwritten(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "results.jsonl").write_text('{"runtime": "torch"}\n')
    r = harness("run", "--out", str(out))
    assert r.returncode == 2 and "already holds results" in r.stderr
    assert (out / "results.jsonl").read_text() == '{"runtime": "torch"}\n'


def test_help_shows_the_defaults_the_dataclasses_define():
    """One definition of each default: run and sweep show GenerationSettings' and RunConfig's."""
    from click.testing import CliRunner

    from spec_harness.core.config import PROMPT_FILE_MAX_NEW_TOKENS, GenerationSettings, default_of
    from spec_harness.harness.cli import main
    from spec_harness.harness.run_config import RunConfig

    n, g = default_of(GenerationSettings, "max_new_tokens"), default_of(GenerationSettings, "gamma")
    for cmd in ("run", "sweep"):
        text = " ".join(CliRunner().invoke(main, [cmd, "--help"]).output.split())
        assert "--max-new-tokens TEXT " in text
        assert f"[default: {n}; {PROMPT_FILE_MAX_NEW_TOKENS} for a prompt file or public set]" in text
        assert f"[default: {default_of(RunConfig, 'warmup')}]" in text
    assert f"Comma list of draft tokens per round. [default: {g}]" in " ".join(
        CliRunner().invoke(main, ["run", "--help"]).output.split())


def test_help_names_the_runtimes_the_registry_holds_when_shown(monkeypatch):
    """A throwaway runtime registered after the command line was imported is named by run's and
    calibrate's --runtime (it forces acceptance, as every runtime over our loop), and not among the
    runtimes that run target quantizations (it reads no GGUF)."""
    from spec_harness import runtimes

    def flat(*args) -> str:  # click wraps (and breaks words at hyphens): compare without whitespace
        return "".join(invoke(*args).stdout.split())

    monkeypatch.setitem(runtimes.REGISTRY, "throwaway", "tests.toy_runtime:ToyRuntime")
    run = flat("run", "--help")
    assert "(torch,hf,llamacpp,llamacpp-native,llama-server,mlx,vllm,throwaway),or'all'" in run
    assert "(llamacpp,llamacpp-nativeandllama-server)runeachpair" in run
    assert "throwaway),or'all'." in flat("calibrate", "--help") and "throwaway" in flat("tune", "--help")
    monkeypatch.delitem(runtimes.REGISTRY, "throwaway")
    assert "throwaway" not in flat("run", "--help")


@pytest.mark.slow  # two runs in processes of their own: what a user's console shows
def test_the_console_names_the_pair_and_keeps_library_chatter_out(tmp_path):
    out = tmp_path / "run"
    r = harness("run", "--runtime", "hf,llamacpp", "--pair", "tiny", "--max-new-tokens", "4", "--prompts", "code",
                "--warmup", "0", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "verdict · pair tiny: target 4×64 181K F32 (" in r.stdout
    for chatter in ("Loading weights", "[transformers]", "llama_context", "Warning"):
        assert chatter not in r.stderr, chatter
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["pair_label"] for r in rows} == {json.loads((out / "run.json").read_text())["config"]["pairs"][0]["label"]}
    assert {r["dtype"] for r in rows if r["runtime"] == "llamacpp"} == {"F32"}
    loud = harness("run", "--runtime", "hf", "--pair", "tiny", "--max-new-tokens", "4", "--prompts", "code", "--warmup", "0",
                   "--verbose", "--out", str(tmp_path / "loud"))
    assert loud.returncode == 0 and "Loading weights" in loud.stderr


def test_the_harness_command_keeps_its_output_exit_codes_and_atexit_handlers(tmp_path):
    """harness/command.py ends the process without the interpreter's teardown: what the command
    printed (to a pipe) and its exit code survive, and so does what an atexit handler writes."""
    marker = tmp_path / "atexit.txt"
    code = ("import atexit; from harness import command; real = atexit.register\n"
            "def register(f):  # the command's own handler, then one registered after it (as a library's would be)\n"
            f"    real(f); real(lambda: open({str(marker)!r}, 'w').write('ran')); atexit.register = real\n"
            "atexit.register = register\n"
            "command.main()")
    ok = subprocess.run([sys.executable, "-c", code, "theory", "--c", "0.1", "--alpha", "0.6", "--gamma", "4"],
                        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert ok.returncode == 0 and "expected tokens per round" in ok.stdout and ok.stdout.endswith("\n")
    assert marker.read_text() == "ran"
    bad = subprocess.run([sys.executable, "-c", code, "run", "--runtime", "nosuch"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: unknown runtime 'nosuch'")


def test_a_run_config_parses_each_settings_text_once_and_run_json_keeps_the_text(tmp_path):
    """The text harness tune or a test hands RunConfig becomes the typed settings the runner and
    the runtimes read; run.json and the rows keep the flags' text."""
    from spec_harness.core.config import DraftPolicy, PairSpec, TorchForward
    from spec_harness.core.drafters.eagle3 import Eagle3Spec
    from spec_harness.core.drafters.model import DraftModelSpec
    from spec_harness.core.drafters.ngram import NgramSpec
    from spec_harness.core.errors import HarnessError
    from spec_harness.harness.prompts import Prompt
    from spec_harness.harness.run_config import Setting
    from spec_harness.harness.runner import RunConfig, Runner

    cfg = RunConfig(["torch"], [PairSpec("p")], [Prompt("a", "factual", "Hi")], draft_policies=["fixed", "confidence:0.4"],
                    drafters=["model", "ngram:3,5"], torch_forwards=["eager"],
                    only=[Setting.drafting("fixed", 2, "eagle3:/heads/h")], out=tmp_path / "run")
    assert cfg.draft_policies == [DraftPolicy(), DraftPolicy("confidence", 0.4)]
    assert cfg.drafters == [DraftModelSpec(), NgramSpec(3, 5)] and cfg.torch_forwards == [TorchForward.EAGER]
    head = Setting("speculative", DraftPolicy(), 2, Eagle3Spec("/heads/h"))
    assert cfg.only == cfg.speculative_settings() == [head] and head.speculative and not Setting().speculative
    config = json.loads(json.dumps(Runner(cfg).info["config"]))
    assert (config["draft_policies"], config["drafters"], config["torch_forwards"]) == (
        ["fixed", "confidence:0.4"], ["model", "ngram:3,5"], ["eager"])
    with pytest.raises(HarnessError, match="--drafter ngram takes ngram, ngram:N or ngram:N,K"):
        RunConfig(["torch"], [PairSpec("p")], [Prompt("a", "factual", "Hi")], drafters=["ngram:0"], out=tmp_path / "bad")
