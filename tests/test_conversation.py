"""Conversations turn by turn (harness/conversation.py): turn 2's input is the chat over turn 1 and
this runtime's own answer to it, rows carry the turn, greedy runs stay lossless per turn, and a
turn whose earlier answer is missing is an error row while the run goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spec_harness import runtimes
from spec_harness.core.config import SamplingParams
from spec_harness.core.errors import HarnessError
from spec_harness.core.results import read_results
from spec_harness.harness.prompts import load_prompts
from spec_harness.harness.run_config import RunConfig
from spec_harness.harness.runner import Runner
from spec_harness.models.presets import resolve_pair

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [{"question_id": 1, "category": "writing", "turns": ["abc", "def"]},
             {"question_id": 2, "category": "math", "turns": ["ghi", "jkl", "mno"]}]


def _questions(tmp_path: Path) -> str:
    f = tmp_path / "question.jsonl"
    f.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return str(f)


def _cfg(tmp_path, names, **kw) -> RunConfig:
    return RunConfig(names, [resolve_pair("tiny")], load_prompts(_questions(tmp_path)), gammas=[2],
                     samplings=[SamplingParams()], max_new_tokens=[12], warmup=0, out=tmp_path / "o", **kw)


def test_each_later_turn_reads_the_runtimes_own_earlier_answers(tmp_path, monkeypatch):
    monkeypatch.setitem(runtimes.REGISTRY, "recording", "tests.toy_runtime:Recording")
    recording = runtimes.get("recording")
    recording.inputs = []
    rows = Runner(_cfg(tmp_path, ["recording"])).run()
    assert not any(r["error"] for r in rows)
    assert sorted({(r["prompt_id"], r["turn"]) for r in rows}) == [("1", 1), ("1", 2), ("2", 1), ("2", 2), ("2", 3)]
    base = {(r["prompt_id"], r["turn"]): r for r in rows if r["mode"] == "baseline"}
    for (qid, turn), r in base.items():
        seen = next(bytes(i) for i in recording.inputs if len(i) == r["prompt_tokens"]
                    and bytes(i).endswith(QUESTIONS[int(qid) - 1]["turns"][turn - 1].encode()))
        # every earlier user turn and this runtime's answer to it, in order (the toy has no chat template)
        parts = [x for k in range(1, turn) for x in (QUESTIONS[int(qid) - 1]["turns"][k - 1], base[(qid, k)]["text"])]
        assert seen == "\n\n".join([*parts, QUESTIONS[int(qid) - 1]["turns"][turn - 1]]).encode()
    spec = [r for r in rows if r["mode"] == "speculative"]
    assert len(spec) == 5 and all(r["greedy_match"] is True for r in spec)  # lossless turn by turn
    for r in spec:  # the baseline and the speculative row of a turn read one input
        assert r["prompt_tokens"] == base[(r["prompt_id"], r["turn"])]["prompt_tokens"]


def test_a_turn_whose_earlier_answer_failed_is_an_error_row(tmp_path, monkeypatch):
    monkeypatch.setitem(runtimes.REGISTRY, "recording", "tests.toy_runtime:FailsOnGhi")
    rows = Runner(_cfg(tmp_path, ["recording"])).run()
    failed = {(r["prompt_id"], r["turn"], r["mode"]): r["error"] for r in rows if r["error"]}
    # question 2's first baseline fails; its later turns cannot be asked; question 1 is measured whole
    later = {(q, t, m) for q, t in (("2", 2), ("2", 3)) for m in ("baseline", "speculative")}
    assert set(failed) == {("2", 1, "baseline"), *later}
    assert "out of memory" in failed[("2", 1, "baseline")]
    assert all("turn 1 of 2 has no answer from this runtime (its baseline failed: RuntimeError: out of memory"
               in failed[k] for k in later)


def test_conversations_under_load_need_the_answers_measured_one_at_a_time(tmp_path):
    with pytest.raises(HarnessError, match="add 1 to --concurrency"):
        _cfg(tmp_path, ["torch"], concurrencies=[2])


RUNTIMES = "torch,hf,llamacpp,llamacpp-native,llama-server,vllm,mlx"


@pytest.mark.slow
def test_every_runtime_answers_both_turns_with_its_own_answer(tmp_path):
    """Through the command line: every runtime measures each turn; its turn-2 input is as long as the
    chat template over turn 1, its own turn-1 answer and turn 2 in the pair's tokenizer; greedy
    speculative rows equal their baselines turn by turn."""
    from spec_harness.models.loading import encode_prompt, load_hf_tokenizer

    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", "run", "--runtime", RUNTIMES,
                        "--pair", "tiny-hd32", "--prompts", _questions(tmp_path), "--max-new-tokens", "12",
                        "--threads", "1", "--n-ctx", "512", "--warmup", "0", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=1500, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    rows = read_results(out / "results.jsonl")
    tok = load_hf_tokenizer(resolve_pair("tiny-hd32").target, "target")
    measured = {r["runtime"] for r in rows if not r["error"]}
    assert measured >= {"torch", "hf", "llamacpp", "llama-server", "vllm"}, {r["runtime"]: r["error"] for r in rows}
    for name in measured:
        mine = [x for x in rows if x["runtime"] == name and not x["error"]]
        base = {(x["prompt_id"], x["turn"]): x for x in mine if x["mode"] == "baseline"}
        assert set(base) == {("1", 1), ("1", 2), ("2", 1), ("2", 2), ("2", 3)}, name
        for (qid, turn), x in base.items():
            turns = QUESTIONS[int(qid) - 1]["turns"]
            chat = [m for k in range(1, turn) for m in ({"role": "user", "content": turns[k - 1]},
                                                       {"role": "assistant", "content": base[(qid, k)]["text"]})]
            assert x["prompt_tokens"] == len(encode_prompt(tok, [*chat, {"role": "user", "content": turns[turn - 1]}]))
        spec = [x for x in mine if x["mode"] == "speculative"]
        assert spec and all(x["greedy_match"] is not False for x in spec), name
        assert {x["turn"] for x in spec} == {1, 2, 3}, name
