"""Prompt files as the public sets publish them (harness/prompt_formats.py), questions per category
(`SPEC:N`), conversations as one prompt per turn, and `harness prompts list | fetch` against the
fake Hub (tests/fakehub.py). Every fixture is written here for the project; no public text."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spec_harness.core.errors import HarnessError
from spec_harness.harness.prompts import load_prompts
from tests.fakehub import FakeHub, Repo

ROOT = Path(__file__).resolve().parents[1]
TWO_TURNS = [{"question_id": 81, "category": "writing", "turns": ["Write a haiku about rivers.", "Now make it rhyme."]},
             {"question_id": 82, "category": "writing", "turns": ["Name three colours.", "Which is warmest?"]},
             {"question_id": 101, "category": "math", "turns": ["What is 7 times 8?", "And divided by 4?"]}]


def _jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_mt_bench_and_spec_bench_questions_become_one_prompt_per_turn(tmp_path):
    got = load_prompts(str(_jsonl(tmp_path / "question.jsonl", TWO_TURNS)))
    assert [(p.id, p.turn, p.category) for p in got] == [
        ("81", 1, "writing"), ("81", 2, "writing"), ("82", 1, "writing"), ("82", 2, "writing"),
        ("101", 1, "math"), ("101", 2, "math")]
    second = got[1]
    assert second.text == "Now make it rhyme." and second.history == ("Write a haiku about rivers.",)
    assert second.earlier(1) == got[0] and second.key != got[0].key
    # HuggingFaceH4's copy of MT-Bench names the list `prompt`; the first N questions of each category
    renamed = [{"question_id": r["question_id"], "category": r["category"], "prompt": r["turns"]} for r in TWO_TURNS]
    limited = load_prompts(str(_jsonl(tmp_path / "h4.jsonl", renamed)) + ":1")
    assert [(p.id, p.turn) for p in limited] == [("81", 1), ("81", 2), ("101", 1), ("101", 2)]


def test_sharegpt_and_chat_messages_keep_the_users_turns_only(tmp_path):
    share = [{"id": "c1", "conversations": [{"from": "human", "value": "Hi, plan a trip."},
                                            {"from": "gpt", "value": "RECORDED ANSWER"},
                                            {"from": "human", "value": "Make it cheaper."}]},
             {"id": "c2", "conversations": [{"from": "gpt", "value": "no question here"}]},  # nothing to ask: left out
             {"id": "c3", "conversations": [{"from": "human", "value": "One question."}]}]
    f = tmp_path / "sharegpt.json"
    f.write_text(json.dumps(share))
    got = load_prompts(str(f))
    assert [(p.id, p.turn, p.text) for p in got] == [("c1", 1, "Hi, plan a trip."), ("c1", 2, "Make it cheaper."),
                                                     ("c3", 1, "One question.")]
    assert all("RECORDED" not in p.text and "RECORDED" not in "".join(p.history) for p in got)
    assert {p.category for p in got} == {"sharegpt"}
    chat = [{"messages": [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A"},
                          {"role": "user", "content": "Q2"}]}]
    got = load_prompts(str(_jsonl(tmp_path / "chat.jsonl", chat)))
    assert [(p.turn, p.text, p.history) for p in got] == [(1, "Q1", ()), (2, "Q2", ("Q1",))]


def test_speed_bench_rows_in_parquet(tmp_path):
    import pandas as pd

    rows = [{"question_id": f"q{i}", "category": cat, "sub_category": "x", "turns": turns, "source": "ours",
             "src_id": str(i), "difficulty": "easy", "multiturn": len(turns) > 1}
            for i, (cat, turns) in enumerate([("coding", ["Write a loop."]), ("rag", ["Doc: A. Q: what?", "Why?"])])]
    f = tmp_path / "test-00000-of-00001.parquet"
    pd.DataFrame(rows).to_parquet(f)
    got = load_prompts(str(f))
    assert [(p.id, p.category, p.turn, p.text) for p in got] == [
        ("q0", "coding", 1, "Write a loop."), ("q1", "rag", 1, "Doc: A. Q: what?"), ("q1", "rag", 2, "Why?")]


@pytest.mark.parametrize("content, where", [
    ('{"prompt": "fine"}\n{"question": "no such field"}\n', "p.jsonl:2: not a prompt in a known format"),
    ('{"prompt": "fine"}\nnot json\n', "p.jsonl:2: not a JSON object"),
    ('{"turns": [1, 2]}\n', "p.jsonl:1: not a prompt in a known format"),
    ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "prompt id a appears twice"),
])
def test_a_file_in_no_known_format_is_one_line_naming_the_line_and_the_formats(tmp_path, content, where):
    f = tmp_path / "p.jsonl"
    f.write_text(content)
    with pytest.raises(HarnessError, match=where) as e:
        load_prompts(str(f))
    if "format" in where:
        assert "MT-Bench" in str(e.value) and "ShareGPT" in str(e.value) and "\n" not in str(e.value)


def _harness(*args, home: Path, hub, **env):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    base.update(HF_HOME=str(home), HF_HUB_OFFLINE="0", HF_ENDPOINT=hub.url if hub else "http://127.0.0.1:9",
                HF_HUB_DISABLE_TELEMETRY="1")
    base.update(env)
    return subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=base, timeout=300)


def _one_error(r) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_prompts_fetch_downloads_a_public_set_that_then_reads_offline(tmp_path):
    hub = FakeHub(token="hf_good")
    questions = "".join(json.dumps(r) + "\n" for r in TWO_TURNS).encode()
    hub.repos["datasets/HuggingFaceH4/mt_bench_prompts"] = Repo({"raw/question.jsonl": questions, "README.md": b"#"})
    hub.repos["datasets/nvidia/SPEED-Bench"] = Repo({"qualitative/test.parquet": b"x"}, gated=True)
    home = tmp_path / "hf"
    try:
        err = _one_error(_harness("run", "--prompts", "mt-bench", "--runtime", "torch", home=home, hub=hub))  # not yet
        assert "not in the cache: run `harness prompts fetch mt-bench`" in err
        r = _harness("prompts", "fetch", "mt-bench", home=home, hub=hub)
        assert r.returncode == 0, r.stderr
        assert "mt-bench: 3 questions, 6 turns" in r.stdout
        assert hub.gets("raw/question.jsonl") == 1 and hub.gets("README.md") == 0  # only the set's own file
        again = _harness("prompts", "fetch", "mt-bench", home=home, hub=hub)
        assert again.returncode == 0 and hub.gets("raw/question.jsonl") == 1  # complete in the cache: not again
        gated = _one_error(_harness("prompts", "fetch", "speed-bench", home=home, hub=hub))
        assert "gated" in gated and "HF_TOKEN" in gated
    finally:
        hub.close()
    offline = _harness("prompts", "list", home=home, hub=None, HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stderr
    listed = next(line for line in offline.stdout.splitlines() if line.strip().startswith("mt-bench"))
    assert "not fetched" not in offline.stdout.split("mt-bench", 1)[1].split("speed-bench")[0], listed
    code = "from spec_harness.harness.prompts import load_prompts; print(len(load_prompts('mt-bench:1')))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**env, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1"})
    assert r.stdout.strip() == "4", r.stderr  # writing 81 and math 101, two turns each, read offline
