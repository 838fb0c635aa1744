"""`harness models agreement` (teacher-forced agreement of a pair) and `harness models teacher-data`
(the target's own answers) on the tiny pair, from the command line."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from spec_harness.harness.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture()
def prompts(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps({"id": f"p{i}", "prompt": t}) + "\n" for i, t in enumerate(["The quick brown fox", "def f(x):"])))
    return f


def test_agreement_on_sampled_continuations(tiny_pair, prompts):
    r = invoke("models", "agreement", "--target", tiny_pair.target, "--draft", tiny_pair.draft, "--prompts", prompts,
               "--samples", 3, "--max-new-tokens", 5, "--temperature", 1.0)
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["p0", "p1", "all"]
    alpha, top1 = (float(x) for x in re.search(r"alpha\(T=1.0\) ([\d.]+)\s+top-1 ([\d.]+)", lines[2]).groups())
    assert 0 < alpha < 1 and 0 < top1 <= 1 and "(30 positions)" in lines[2]  # 2 prompts x 3 samples x 5 tokens
    assert len(lines[3].split(":")[1].split()) == 5  # alpha by position
    same = invoke("models", "agreement", "--target", tiny_pair.target, "--draft", tiny_pair.target, "--prompts", prompts,
                  "--samples", 2, "--max-new-tokens", 3)
    assert "alpha(T=0.7) 1.000   top-1 1.000" in same.stdout  # a draft that is the target agrees everywhere
    split = same.stdout.strip().splitlines()[-1]
    assert split.startswith("top-1 where the target's next token repeats a bigram of its context")
    assert re.search(r": 1\.000; elsewhere 1\.000$", split) or split.endswith("no such position")


def test_repeats_marks_the_positions_a_copy_of_the_context_gets():
    import torch

    from spec_harness.models.agreement import repeats

    ids = torch.tensor([5, 6, 7, 5, 8])
    # position 3 reads 5 and the target's next token is 6: the bigram (5, 6) is at 0-1
    assert repeats(ids, torch.tensor([6, 7, 5, 6, 9])).tolist() == [False, False, False, True, False]
    # (5, 7) is nowhere, and position 0 has no context before its own token
    assert repeats(ids, torch.tensor([6, 7, 5, 7, 9])).tolist() == [False] * 5
    # a bigram whose second token is the current one counts: "5 5" then 5 again
    assert repeats(torch.tensor([5, 5]), torch.tensor([5, 5])).tolist() == [False, True]


def test_agreement_of_an_eagle3_head_per_drafting_position(tiny_pair, prompts):
    from spec_harness.models.eagle3_train import ensure_tiny_head

    head = ensure_tiny_head("tiny")
    r = invoke("models", "agreement", "--target", tiny_pair.target, "--head", head, "--prompts", prompts,
               "--samples", 2, "--max-new-tokens", 6, "--temperature", 1.0, "--positions", 3)
    assert r.exit_code == 0, r.output
    rows = re.findall(r"drafting position (\d): alpha\(T=1.0\) ([\d.]+)\s+top-1 ([\d.]+)\s+\((\d+) positions\)", r.stdout)
    assert [row[0] for row in rows] == ["1", "2", "3"]
    assert all(0 < float(a) <= 1 and 0 <= float(t) <= 1 and int(n) > 0 for _, a, t, n in rows)
    assert "position 1, top-1 where the target's next token repeats a bigram of its context" in r.stdout


def test_agreement_on_stored_answers_written_by_teacher_data(tiny_pair, tmp_path):
    from spec_harness.models.gguf_writer import ensure_tiny_gguf

    t_gguf, _ = ensure_tiny_gguf("tiny", "f32")
    answers = tmp_path / "a.jsonl"
    r = invoke("models", "teacher-data", "--target", t_gguf, "--out", answers, "--n", 4, "--max-new-tokens", 6, "--teacher-top-k", 4,
               "--batch", 2, "--threads", 1)
    assert r.exit_code == 0, r.output
    recs = [json.loads(x) for x in answers.read_text().splitlines()]
    assert len(recs) == 4 and all(len(x["ids"]) > x["start"] and len(x["top_ids"][0]) == 4 for x in recs)
    r = invoke("models", "agreement", "--target", tiny_pair.target, "--draft", tiny_pair.draft, "--answers", answers)
    assert r.exit_code == 0, r.output
    n = sum(len(x["ids"]) - x["start"] for x in recs)
    assert f"({n} positions)" in r.output


@pytest.mark.parametrize("args, needle", [
    (["--answers", "/no/such.jsonl"], "answers file not found: /no/such.jsonl"),
    (["--temperature", "0"], "--temperature must be > 0"),
])
def test_agreement_bad_input_is_one_line_before_any_model_loads(args, needle):
    r = invoke("models", "agreement", "--target", "/no/such/target", *args)  # a missing target would fail later
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output
