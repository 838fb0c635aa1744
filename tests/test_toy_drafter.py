"""A drafter kind that is one file plus one registry line (tests/toy_drafter.py) is found wherever a
drafter is: --drafter parsing and help, our loop, a "skipped: reason" row in a runtime that lacks
it, the report, and harness tune's candidates, with nothing else touched."""

from __future__ import annotations

import json

import pytest

from spec_harness import runtimes
from spec_harness.core import drafters
from spec_harness.core.results import read_results
from tests.test_cli import invoke


@pytest.fixture()
def repeat(monkeypatch):
    monkeypatch.setitem(drafters.REGISTRY, "repeat", "tests.toy_drafter:RepeatSpec")  # the one registry line


def test_its_syntax_is_parsed_and_named_in_help(repeat, tmp_path):
    assert [str(d) for d in drafters.parse_list("model,repeat:3,ngram:1,2,repeat")] == ["model", "repeat:3", "ngram:1,2", "repeat"]
    for command in ("run", "sweep", "tune", "calibrate"):
        r = invoke(command, "--help")
        assert r.returncode == 0 and "repeat[:K]" in " ".join(r.stdout.split()), command
    bad = invoke("run", "--pair", "tiny", "--drafter", "repeat:x", "--out", tmp_path / "o")
    assert bad.returncode == 2 and "repeat:K (K >= 1), got repeat:x" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
    assert "torch" in runtimes.able("drafters", "repeat")
    assert "hf" not in runtimes.able("drafters", "repeat")


def test_our_loop_runs_it_a_library_skips_it_and_the_report_and_tune_show_it(repeat, tmp_path):
    out = tmp_path / "run"
    r = invoke("run", "--runtime", "torch,hf", "--pair", "tiny", "--drafter", "repeat:2", "--prompts", "factual",
               "--max-new-tokens", "12", "--out", out)
    assert r.returncode == 0, r.stderr
    rows = read_results(out / "results.jsonl")
    mine = [x for x in rows if x["runtime"] == "torch" and x["mode"] == "speculative"]
    assert mine and all(x["drafter"] == "repeat:2" and not x["error"] for x in mine)
    assert all(x["n_rounds"] > 0 and max(rd["drafted"] for rd in x["rounds"]) == 2 for x in mine)
    assert all(x["greedy_match"] for x in mine)  # lossless, whatever proposes the drafts
    skipped = [x for x in rows if x["runtime"] == "hf" and x["error"]]
    assert len(skipped) == 1 and skipped[0]["error"].startswith("skipped: hf has no repeat drafting (--drafter repeat runs in ")
    report = (out / "report" / "report.md").read_text()
    assert "torch [kernels, repeat:2]" in report and "hf has no repeat drafting" in report

    tuned = tmp_path / "tune"
    r = invoke("tune", "--runtime", "torch", "--pair", "tiny", "--max-gamma", "2", "--drafter", "model,repeat",
               "--prompts", "factual", "--max-new-tokens", "12", "--rule-out", "0", "--out", tuned)
    assert r.returncode == 0, r.stderr
    result = json.loads((tuned / "tune.json").read_text())
    assert sorted({(c["drafter"], c["gamma"]) for c in result["candidates"] if c["policy"] == "fixed"}) == \
        [("model", 1), ("model", 2), ("repeat", 1), ("repeat", 2)]
