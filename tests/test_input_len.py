"""--input-len (harness/input_len.py): prompts built to exact token counts from real text, the rule
in run.json, rows that carry the length, and lengths refused before any model loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spec_harness.core.errors import HarnessError
from spec_harness.harness import input_len
from spec_harness.harness.prompts import load_prompts
from spec_harness.models.loading import encode_prompt, load_hf_tokenizer
from spec_harness.models.presets import resolve_pair

ROOT = Path(__file__).resolve().parents[1]


def test_parse_takes_counts_and_k():
    assert input_len.parse("1k,512,2k,512") == [512, 1024, 2048]
    assert input_len.parse(None) == [] and input_len.label(2048) == "2k" and input_len.label(600) == "600"
    for bad in ("lots", "8"):
        with pytest.raises(HarnessError, match="--input-len"):
            input_len.parse(bad)


def test_prompts_are_built_to_the_length_from_their_own_and_the_sets_text():
    tok = load_hf_tokenizer(resolve_pair("tiny").target, "target")
    count = lambda text: len(encode_prompt(tok, text))  # noqa: E731
    prompts = load_prompts("summarization,rag")[:4]
    long_one = max(prompts, key=lambda p: count(p.text))
    built = input_len.build(prompts, [64, 2600], lambda t: encode_prompt(tok, t))
    assert [(p.id, p.input_len) for p in built] == [(p.id, n) for n in (64, 2600) for p in prompts]
    for p in built:
        own = next(q for q in prompts if q.id == p.id).text
        assert count(p.text) == p.input_len  # exact, chat template included
        if count(own) >= p.input_len:
            assert own.startswith(p.text)  # truncated: the start of its own text
        else:
            assert p.text.endswith(own)  # padded: its own question last, real text of the set before it
            assert p.text[: -len(own)].strip() in "\n\n".join(q.text for q in prompts if q.id != p.id)
    assert any(count(q.text) < 2600 for q in prompts) and count(long_one.text) > 64  # both rules were exercised


def test_too_little_text_or_conversations_are_refused():
    tok = load_hf_tokenizer(resolve_pair("tiny").target, "target")
    enc = lambda t: encode_prompt(tok, t)  # noqa: E731
    few = load_prompts("factual")[:2]
    with pytest.raises(HarnessError, match="too few to reach 5000 without repeating"):
        input_len.build(few, [5000], enc)
    from dataclasses import replace

    with pytest.raises(HarnessError, match="these prompts hold conversations"):
        input_len.build([few[0], replace(few[1], turn=2, history=(few[0].text,))], [64], enc)
    with pytest.raises(HarnessError, match="exceed the 1024-token context of tiny"):
        input_len.check_context([1024], 32, 1024, "tiny")


def _run(tmp_path, *args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", "run", "--pair", "tiny", "--runtime",
                           "torch", "--warmup", "0", "--out", str(tmp_path / "o"), *args],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)


def test_a_length_the_pair_cannot_hold_is_one_line_before_anything_loads(tmp_path):
    r = _run(tmp_path, "--input-len", "512,1k", "--max-new-tokens", "8")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert [line for line in r.stderr.splitlines() if line.startswith("error:")] == [
        "error: --input-len 1k: 1024 tokens + --max-new-tokens 8 exceed the 1024-token context of tiny; "
        "choose shorter lengths"]
    assert "loading" not in r.stderr and not (tmp_path / "o" / "results.jsonl").exists()


def test_a_length_past_n_ctx_is_refused_before_loading(tmp_path):
    r = _run(tmp_path, "--input-len", "256", "--max-new-tokens", "8", "--n-ctx", "200")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "loading" not in r.stderr
    assert "error: --input-len 256: 256 tokens + --max-new-tokens 8 do not fit --n-ctx 200; raise it to 264" in r.stderr


def test_rows_carry_the_length_and_run_json_the_rule(tmp_path):
    r = _run(tmp_path, "--input-len", "128,256", "--max-new-tokens", "8", "--prompts", "summarization", "--gamma", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert {r["input_len"] for r in rows} == {128, 256} and not any(r["error"] for r in rows)
    assert all(r["prompt_tokens"] == r["input_len"] for r in rows)  # torch reads the pair's own tokenizer
    config = json.loads((tmp_path / "o" / "run.json").read_text())["config"]
    assert config["input_lens"] == [128, 256] and config["input_len_rule"] == input_len.RULE
    report = (tmp_path / "o" / "report" / "report.md").read_text()
    assert "## Input length" in report and "(measured); predicted from v, c and alpha_hat" in report
    table = (tmp_path / "o" / "report" / "input_lengths.csv").read_text().splitlines()
    assert len(table) == 3 and table[0].startswith("pair,runtime")  # a header and one row per length
