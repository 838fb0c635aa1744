"""`harness theory` and `harness report` on the command line: numbers printed, one-line errors
with exit 2 and no traceback, and `harness run` ending with its own report."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from spec_harness.harness.cli import main
from tests import synthetic


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_one_line_error(res, contains: str):
    """Exit 2 on purpose (SystemExit, no crash), and the whole output is one 'error: ...' line."""
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and contains in lines[0], res.output


def test_theory_with_c_prints_the_seed_numbers():
    res = invoke("theory", "--alpha", 0.392, "--gamma", 4, "--c", 0.1601)
    assert res.exit_code == 0, res.output
    assert "expected speedup            0.99x" in res.output
    assert "breakeven alpha at gamma 4  0.396" in res.output
    assert "best gamma for alpha 0.392  1 -> 1.20x" in res.output
    table = [line for line in res.output.splitlines() if line.endswith(" <")]
    assert table == ["    4       1.63       0.99x            0.396 <"]


def test_theory_from_local_configs(tmp_path):
    t, d = synthetic.qwen_configs(tmp_path)
    res = invoke("theory", "--target", t, "--draft", d, "--alpha", 0.336, "--gamma", 7)
    assert res.exit_code == 0, res.output
    assert "6,171,394,048 FLOPs/token" in res.output and "987,922,432 FLOPs/token" in res.output
    assert "c_flops = 0.1601" in res.output and "expected speedup            0.71x" in res.output
    res = invoke("theory", "--target", t, "--draft", d, "--context", 1024)
    assert res.exit_code == 0 and f"{6_171_394_048 + 4 * 36 * 2048 * 1024:,} FLOPs/token at context 1024" in res.output


@pytest.mark.parametrize("args,msg", [
    (["--alpha", 1.5, "--gamma", 4, "--c", 0.1], "--alpha must be in [0, 1]"),
    (["--alpha", 0.5, "--gamma", 0, "--c", 0.1], "--gamma must be >= 1"),
    (["--alpha", 0.5, "--c", -1], "--c must be >= 0"),
    (["--alpha", 0.5], "give --c C, or --target and --draft"),
    (["--c", 0.2, "--target", "a", "--draft", "b"], "not both"),
    (["--target", "no-such-org/no-such-model", "--draft", "no-such-org/other"], "not in the Hugging Face cache"),
    (["--target", "/nope/t.gguf", "--draft", "/nope/d.gguf"], "GGUF file not found"),
    (["--c", 0.2, "--max-gamma", 0], "--max-gamma must be >= 1"),
])
def test_theory_bad_input_is_one_line(args, msg):
    assert_one_line_error(invoke("theory", *args), msg)


def test_theory_bad_type_is_a_usage_error_not_a_traceback():
    res = invoke("theory", "--alpha", "high", "--c", 0.1)
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_report_command(tmp_path):
    d = synthetic.write_run(tmp_path / "run", synthetic.rows_for("fast", (4,)))
    res = invoke("report", d)
    assert res.exit_code == 0, res.output
    said = res.output.splitlines()
    assert said[0] == f"report: {d / 'report' / 'report.html'}  (also report.md, trace.json, CSVs, figures)"
    assert "verdict · pair qwen-like" in res.output and said[-2].startswith("Cost model: fast at gamma 1 would give")
    res = invoke("report", d / "results.jsonl", "--out", tmp_path / "elsewhere")
    assert res.exit_code == 0 and (tmp_path / "elsewhere" / "per_position.png").is_file()


@pytest.mark.parametrize("setup,msg", [
    (lambda p: p / "missing", "no such results folder"),
    (lambda p: p, "no results.jsonl"),
])
def test_report_bad_folders_are_one_line(tmp_path, setup, msg):
    assert_one_line_error(invoke("report", setup(tmp_path)), msg)


def test_report_of_empty_results_is_one_line(tmp_path):
    (tmp_path / "results.jsonl").write_text("")
    assert_one_line_error(invoke("report", tmp_path), "no result rows")


@pytest.mark.slow
def test_run_ends_with_its_report(tmp_path, tiny_pair):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "p1", "category": "factual", "prompt": "The water cycle"}) + "\n")
    out = tmp_path / "run"
    res = invoke("run", "--pair", "tiny", "--max-new-tokens", 8, "--warmup", 0, "--prompts", prompts, "--device", "cpu", "--out", out)
    assert res.exit_code == 0, res.output
    assert f"written to {out}/:" in res.output and "report/report.html (the report; also report.md" in res.output
    md = (out / "report" / "report.md").read_text()
    assert "**Fastest: torch [kernels]**" in md and "c_flops for pair tiny" in md
    assert (out / "report" / "phases.png").read_bytes()[:4] == b"\x89PNG"
