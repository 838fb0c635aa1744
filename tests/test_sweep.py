"""Sweeps: grid, resume after kill -9, truncated last line, error rows, prompt sets, entropy."""

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spec_harness.core.config import SamplingParams
from spec_harness.harness.prompts import CATEGORIES, builtin, load_prompts

BUILTIN = {c: [p.text for p in builtin(c)] for c in CATEGORIES}  # the shipped texts (harness/prompt_sets)
from spec_harness.core.results import read_results, row_key
from spec_harness.harness.run_config import RunConfig
from spec_harness.harness.runner import Runner

ROOT = Path(__file__).resolve().parents[1]
GRID = ["sweep", "--runtime", "torch", "--pair", "tiny", "--gamma", "1,3", "--max-new-tokens", "256", "--prompts", "math", "--warmup", "0"]


def harness_proc(*args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "spec_harness.harness.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def keys(path: Path) -> list[tuple]:
    return [row_key(r) for r in read_results(path)]


@pytest.mark.slow
def test_killed_sweep_resumes_to_the_same_rows(tmp_path):
    full, cut = tmp_path / "full", tmp_path / "cut"
    p = harness_proc(*GRID, "--out", str(full))
    assert p.wait(timeout=600) == 0, p.stderr.read()

    p = harness_proc(*GRID, "--out", str(cut))
    results = cut / "results.jsonl"
    deadline = time.time() + 300
    # a row of 256 tokens on the tiny pair takes 30-100 ms: the kill lands mid-way. Count whole lines only
    # (ended by a newline): a row caught half-written is not yet a row
    while time.time() < deadline and (not results.exists() or results.read_text().count("\n") < 4):
        time.sleep(0.005)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    n_before = len(read_results(results))
    assert 4 <= n_before < 15, "the sweep must be killed mid-way for this test to mean anything"

    p = harness_proc(*GRID, "--out", str(cut), "--resume")
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert "rows already measured are kept" in err
    assert len(keys(results)) == len(set(keys(results))) == 15, "nothing is measured twice"
    assert set(keys(results)) == set(keys(full / "results.jsonl"))
    # the resumed greedy rows are still checked against their (earlier) baseline
    assert all(r["greedy_match"] is True for r in read_results(results) if r["mode"] == "speculative")


def _cfg(out, runtimes=("torch",), resume=False, pair=None, **kw):
    from spec_harness.models.presets import resolve_pair

    return RunConfig(list(runtimes), [pair or resolve_pair("tiny")], load_prompts("math")[:2], gammas=[2],
                     samplings=[SamplingParams()], max_new_tokens=[5], warmup=0, out=out, resume=resume, **kw)


def test_truncated_last_line_is_reported_cut_and_measured_again(tmp_path, capsys):
    out = tmp_path / "o"
    Runner(_cfg(out)).run()
    path = out / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) == 4
    path.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])  # killed while writing the 4th row
    assert len(read_results(path)) == 3
    rows = Runner(_cfg(out, resume=True)).run()
    err = capsys.readouterr().err
    assert "incomplete" in err
    final = [json.loads(line) for line in path.read_text().splitlines()]  # every line is whole JSON again
    assert len(final) == 4 and len(rows) == 4
    assert set(map(row_key, final)) == set(map(row_key, [json.loads(x) for x in lines[:3]] + [final[-1]]))


def test_without_resume_existing_results_are_refused(tmp_path):
    from spec_harness.core.errors import HarnessError

    out = tmp_path / "o"
    Runner(_cfg(out)).run()
    with pytest.raises(HarnessError, match="--resume"):
        Runner(_cfg(out))


def test_a_runtime_that_cannot_load_becomes_an_error_row_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from spec_harness import runtimes

    monkeypatch.setitem(runtimes.REGISTRY, "broken", "no_such_module_for_tests:Runtime")
    rows = Runner(_cfg(tmp_path / "o", runtimes=("broken", "torch"))).run()
    errors = [r for r in rows if r["error"]]
    assert len(errors) == 1 and errors[0]["runtime"] == "broken" and "no_such_module_for_tests" in errors[0]["error"]
    ok = [r for r in rows if r["runtime"] == "torch"]
    assert len(ok) == 4 and all(r["error"] is None for r in ok)
    # resume retries the failed runtime (it may have been installed since) and keeps the rest
    monkeypatch.setitem(runtimes.REGISTRY, "broken", "spec_harness.runtimes.pytorch:TorchRuntime")
    rows = Runner(_cfg(tmp_path / "o", runtimes=("broken", "torch"), resume=True)).run()
    assert len([r for r in rows if r["runtime"] == "broken" and not r["error"]]) == 4
    assert len([r for r in rows if r["runtime"] == "torch"]) == 4


def test_a_skipped_setting_says_its_whole_reason_in_lines_of_the_console_width(tmp_path, monkeypatch, capsys):
    """A setting the runtime cannot run is one row and one say on the console, its reason wrapped
    onto indented lines no wider than the verdict's; the rest of the run goes on."""
    from spec_harness.harness.rows import skipped_line
    from spec_harness.reports.verdict import WIDTH
    from spec_harness.runtimes.pytorch import TorchRuntime

    why = "torch cannot draft by prompt lookup here: " + " ".join(["a reason long enough for three console lines"] * 5)
    supports = TorchRuntime.supports
    monkeypatch.setattr(TorchRuntime, "supports",
                        lambda self, gen: why if str(gen.drafter).startswith("ngram") else supports(self, gen))
    rows = Runner(_cfg(tmp_path / "o", drafters=["model", "ngram"])).run()
    assert [r["error"] for r in rows if r["error"]] == [f"skipped: {why}"]
    assert len([r for r in rows if not r["error"]]) == 4
    err = capsys.readouterr().err.splitlines()
    start = next(i for i, line in enumerate(err) if "--drafter ngram" in line)
    said = [err[start]] + list(itertools.takewhile(lambda line: line.startswith("  "), err[start + 1:]))
    assert len(said) >= 3 and all(len(line) <= WIDTH for line in said)
    said = " ".join(line.strip() for line in said)  # the tag names the forward: [torch [kernels]]
    assert said.startswith("[torch") and said.endswith(f"] --draft-policy fixed --drafter ngram: skipped: {why}")
    runtime = skipped_line("llama-server", "", why).splitlines()  # a runtime skipped whole
    assert runtime[0].startswith("[llama-server] skipped: torch") and all(len(line) <= WIDTH for line in runtime)


def test_a_settings_console_line_wraps_at_the_console_width_and_keeps_every_number():
    from spec_harness.core.config import DraftPolicy
    from spec_harness.core.drafters.eagle3 import Eagle3Spec
    from spec_harness.harness.rows import setting_line
    from spec_harness.reports.verdict import WIDTH

    rounds = [{"drafted": 4, "accepted": 2, "emitted": 3}]
    base = {"new_tokens": 32, "wall_s": 2.0, "prefill_s": 0.1}
    spec = {**base, "wall_s": 1.0, "rounds": rounds, "greedy_match": False, "mismatch": None}
    line = setting_line("llama-server [eagle3:some/head]", DraftPolicy.parse("confidence:0.5"), 6, Eagle3Spec("/x/some/head"),
                        0, [(base, spec)] * 5)
    lines = line.splitlines()
    assert len(lines) == 2 and all(len(x) <= WIDTH for x in lines) and lines[1].startswith("  ")
    assert " ".join(x.strip() for x in lines) == (
        "[llama-server [eagle3:some/head]] confidence:0.5 g6 eagle3:/x/some/head T0: 5 generations, decode 16.8 -> "
        "35.6 tok/s, 2.00x end to end (2.11x decode), alpha_hat 0.67; 5 greedy mismatch(es)")


def test_a_generation_that_fails_is_an_error_row(tmp_path, monkeypatch):
    from spec_harness.runtimes.pytorch import TorchRuntime

    def boom(self, ids, gen):
        raise RuntimeError("CUDA out of memory (simulated)")

    monkeypatch.setattr(TorchRuntime, "generate_speculative", boom)
    rows = Runner(_cfg(tmp_path / "o")).run()
    spec = [r for r in rows if r["mode"] == "speculative"]
    assert all(r["error"] == "RuntimeError: CUDA out of memory (simulated)" for r in spec)
    assert all(r["error"] is None for r in rows if r["mode"] == "baseline")
    assert "Traceback" in (tmp_path / "o" / "errors.log").read_text()


def test_grid_shares_one_baseline_across_gammas_and_records_entropy(tmp_path):
    from spec_harness.models.presets import resolve_pair

    cfg = RunConfig(["torch"], [resolve_pair("tiny")], load_prompts("code")[:1], gammas=[1, 2, 4],
                    samplings=[SamplingParams(0.0), SamplingParams(0.7, 0.9)], max_new_tokens=[5, 7], repeats=2, warmup=0, out=tmp_path / "o")
    rows = Runner(cfg).run()
    assert len(rows) == cfg.n_rows() == 1 * 2 * 2 * 2 * (1 + 3)
    base = [r for r in rows if r["mode"] == "baseline"]
    assert all(r["target_entropy"] > 0 for r in base)
    assert {r["seed"] for r in rows} == {0, 1}
    assert {(r["gamma"], r["temperature"], r["max_new_tokens"]) for r in rows if r["mode"] == "speculative"} == {
        (g, t, n) for g in (1, 2, 4) for t in (0.0, 0.7) for n in (5, 7)}


def test_builtin_prompt_sets_and_user_jsonl(tmp_path):
    spec_bench = ["conversation", "translation", "summarization", "qa", "math-reasoning", "rag"]
    assert list(CATEGORIES) == list(BUILTIN) == ["factual", "open-ended", "code", "rewrite", "math", "extractive", *spec_bench]
    assert all(len(v) >= 5 for v in BUILTIN.values())
    texts = [t for v in BUILTIN.values() for t in v]
    assert len(set(texts)) == len(texts)  # no prompt is measured twice under two names
    got = load_prompts("spec-bench")
    assert [(p.id, p.category, p.text) for p in got] == [
        (f"{c}-{i + 1}", c, t) for c in spec_bench for i, t in enumerate(BUILTIN[c])]
    assert [p.id for p in load_prompts("all")] == [f"{c}-{i + 1}" for c in BUILTIN for i in range(len(BUILTIN[c]))]
    assert [p.id for p in load_prompts("math,spec-bench,math")] == [p.id for p in load_prompts("math")] + [p.id for p in got]
    assert load_prompts("factual")[0].text.startswith("Summarize how photosynthesis works")  # ids of the first sets kept
    # the long-input sets: summarization passages and rag documents the answer can copy from
    assert all(len(t) > 1200 for c in ("summarization", "rag") for t in BUILTIN[c])
    assert all(t.count("Document [") >= 2 for t in BUILTIN["rag"] if "```python" not in t)
    assert sum("```python" in t for t in BUILTIN["rag"]) == 1
    assert all(len(t) < 2800 for t in texts)  # about 700 SmolLM2 tokens at most
    f = tmp_path / "p.jsonl"
    f.write_text('{"id": "a", "category": "mine", "prompt": "Hello"}\n{"prompt": "World"}\n')
    ps = load_prompts(str(f))
    assert [(p.id, p.category, p.text) for p in ps] == [("a", "mine", "Hello"), ("p-2", "custom", "World")]
    f.write_text('{"id": "a"}\n')
    from spec_harness.core.errors import HarnessError

    with pytest.raises(HarnessError, match=r"p.jsonl:1: not a prompt in a known format; expected one of: \{id, category, prompt\}"):
        load_prompts(str(f))
    with pytest.raises(HarnessError, match="unknown prompt set .*spec-bench, a public set .*or a prompt file"):
        load_prompts("spec-bench-v2")


def test_builtin_prompts_fit_smollm2_and_the_long_ones_are_long():
    """Every built-in prompt is under 700 tokens of the default target's tokenizer (SmolLM2), and each
    summarization and rag prompt is over 300: the long inputs prompt lookup can copy from."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from spec_harness.models.smollm2 import smollm2_gguf

    m = llama_cpp.Llama(model_path=str(smollm2_gguf()), vocab_only=True, verbose=False)
    n = {(c, i): len(m.tokenize(t.encode(), add_bos=False)) for c, ts in BUILTIN.items() for i, t in enumerate(ts)}
    assert max(n.values()) < 700, max(n.items(), key=lambda kv: kv[1])
    assert min(v for (c, _), v in n.items() if c in ("summarization", "rag")) > 300
