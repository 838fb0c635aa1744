"""Prompt-lookup drafting (runtimes/ngram.py): the lookup against a brute-force search of the
context, and the drafter in the shared loop of `torch` and `llamacpp` on the tiny pair: greedy
lossless at every gamma, its rounds, its lookup booked as draft time, and runtimes without it
skipped with their reason, and llamacpp-native's library lookup beside ours. Its sampling is checked in tests/test_sampling_distribution.py."""

from __future__ import annotations

import random

import pytest

from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.core.drafters.ngram import NGRAM_MAX, NgramSpec
from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.core.drafters import parse as parse_drafter
from spec_harness.core.errors import HarnessError
from spec_harness.runtimes.ngram import lookup

PROMPT = "one two three four, one two three four, one two three"


def brute_force(seq: list[int], n: int, k: int) -> list[int]:
    """Every earlier occurrence of every tail length m <= n: the longest m, then the latest one."""
    found = [(m, start) for m in range(1, n + 1) for start in range(len(seq)) if m < len(seq)
             and start + m <= len(seq) - 1 and seq[start:start + m] == seq[-m:]]
    if not found:
        return []
    m, start = max(found)
    return seq[start + m:start + m + k]


def test_lookup_equals_a_brute_force_search():
    rng = random.Random(0)
    hits = 0
    for _ in range(3000):
        seq = [rng.randrange(rng.choice([2, 4, 9])) for _ in range(rng.randrange(1, 30))]
        n, k = rng.randrange(1, 5), rng.randrange(1, 7)
        got = lookup(seq, n, k)
        assert got == brute_force(seq, n, k), (seq, n, k)
        hits += bool(got)
    assert 1000 < hits < 3000  # both outcomes tried


def test_lookup_examples():
    assert lookup([1, 2, 3, 9, 1, 2, 4, 1, 2], 2, 3) == [4, 1, 2]  # the latest earlier "1 2", not the first
    assert lookup([1, 2, 3, 9, 7, 2], 2, 3) == [3, 9, 7]  # "7 2" never occurred: the last token alone
    assert lookup([5, 6, 7], 2, 3) == [] and lookup([5], 2, 3) == []


def test_drafter_spec():
    assert parse_drafter("model") == DraftModelSpec() and parse_drafter("ngram:3,5") == NgramSpec(3, 5)
    assert parse_drafter("ngram").max_ngram == NGRAM_MAX and parse_drafter("ngram").k is None
    assert parse_drafter("ngram:3").max_ngram == 3 and parse_drafter("eagle3").path is None
    assert parse_drafter("eagle3:/heads/h:1").path == "/heads/h:1"
    for text in ("model", "ngram", "ngram:3", "ngram:3,5", "eagle3", "eagle3:/heads/h"):
        assert str(parse_drafter(text)) == text  # rows and run.json carry the flag's text
        assert str(GenerationSettings(drafter=text).drafter) == text
    for bad in ("ngram:0", "ngram:a", "ngram:1,2,3", "lookup", "model:2"):
        with pytest.raises(HarnessError, match="--drafter"):
            parse_drafter(bad)
        with pytest.raises(HarnessError, match="--drafter"):
            GenerationSettings(drafter=bad)


@pytest.fixture(scope="module")
def loop_runtimes(tiny_gguf):
    from spec_harness.runtimes.llamacpp import LlamaCppRuntime
    from spec_harness.runtimes.pytorch import TorchRuntime

    pair = tiny_gguf
    out = {}
    for name, cls in (("torch", TorchRuntime), ("llamacpp", LlamaCppRuntime)):
        rt = cls(RuntimeSettings(device="cpu", n_threads=1, n_ctx=512))
        rt.load(pair)
        out[name] = rt
    yield out
    for rt in out.values():
        rt.close()


@pytest.mark.parametrize("name", ["torch", "llamacpp"])
@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_greedy_prompt_lookup_is_lossless(loop_runtimes, name, gamma):
    rt = loop_runtimes[name]
    ids = rt.encode(PROMPT)
    gen = GenerationSettings(SamplingParams(), gamma, 40, ignore_eos=True, drafter="ngram")
    base = rt.generate_baseline(ids, gen)
    g = rt.generate_speculative(ids, gen)
    assert g.token_ids == base.token_ids
    assert sum(r.emitted for r in g.rounds) == 40 and all(r.drafted <= gamma for r in g.rounds)
    drafted = [r for r in g.rounds if r.drafted]
    assert drafted and g.phases.draft_s > 0  # the lookup found matches, and its time is draft time
    assert "draft" not in g.extra.get("llama_perf", {})  # no draft model ran
    capped = rt.generate_speculative(ids, GenerationSettings(SamplingParams(), gamma, 40, ignore_eos=True, drafter="ngram:2,1"))
    assert capped.token_ids == base.token_ids and max(r.drafted for r in capped.rounds) == 1


def test_each_runtimes_lookup_in_one_run_and_what_it_cannot_do_says_why(tmp_path):
    """torch's lookup (ours) and llamacpp-native's (the library's LlamaPromptLookupDecoding) side by
    side; llama-cpp-python's loop has no draft-length schedule, so its heuristic cell is one
    skipped row with the reason, and the run goes on."""
    from click.testing import CliRunner
    import json

    from spec_harness.harness.cli import main

    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["run", "--runtime", "torch,llamacpp-native", "--pair", "tiny", "--drafter", "ngram:2,3",
                                    "--draft-policy", "fixed,heuristic", "--max-new-tokens", "12", "--prompts", "math",
                                    "--warmup", "0", "--threads", "1", "--n-ctx", "512", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    lookup = [r for r in rows if r["mode"] == "speculative" and not r["error"]]
    assert {(r["runtime"], r["draft_policy"]) for r in lookup} == {
        ("torch", "fixed"), ("torch", "heuristic"), ("llamacpp-native", "fixed")}
    assert all(r["greedy_match"] and r["drafter"] == "ngram:2,3" for r in lookup)
    skipped = [r for r in rows if r["error"]]
    assert len(skipped) == 1 and skipped[0]["runtime"] == "llamacpp-native"
    assert "has no heuristic draft-length schedule" in skipped[0]["error"] and "runs in torch, hf and llamacpp" in skipped[0]["error"]
    assert skipped[0]["error"].startswith("skipped: ")
    report = (out / "report" / "report.md").read_text()
    for view in ("torch [kernels, ngram:2,3]", "torch [kernels, heuristic, ngram:2,3]", "llamacpp-native [ngram:2,3]"):
        assert view in res.output and view in report
