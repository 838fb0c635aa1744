"""The llamacpp-native runtime (llama-cpp-python's own Llama(draft_model=...) loop) on the tiny
GGUF pair: greedy equality with our loop, round bookkeeping seen from outside, phase identity,
and the CLI running every runtime with no flags."""

from __future__ import annotations

import json

import pytest

import llama_cpp  # noqa: F401  (a hard dependency)

from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.runtimes.llamacpp_native import LlamaCppNativeRuntime
from tests.extras import NOT_ON_TINY, installed

SETTINGS = RuntimeSettings(n_threads=1, n_ctx=512)


def gen(n=40, gamma=4, s=SamplingParams(), seed=0):
    return GenerationSettings(s, gamma, n, seed, ignore_eos=True)


@pytest.fixture(scope="module")
def pairs(tiny_gguf, tiny_self):
    return tiny_gguf, tiny_self


@pytest.fixture(scope="module")
def native(pairs):
    rt = LlamaCppNativeRuntime(SETTINGS)
    rt.load(pairs[0])
    yield rt
    rt.close()


def _identity(p):
    parts = [p.prefill_s, p.draft_s, p.verify_s, p.sampling_s, p.unaccounted_s]
    assert all(x is not None and x >= 0 for x in parts)
    assert abs(sum(parts) - p.wall_s) < 1e-6


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_native_greedy_equals_our_loop(native, llama_rt, gamma):
    ids = llama_rt.encode("The quick brown fox")
    assert native.encode("The quick brown fox") == ids
    ref = llama_rt.generate_baseline(ids, gen(40)).token_ids
    assert native.generate_baseline(ids, gen(40)).token_ids == ref
    ours_spec = llama_rt.generate_speculative(ids, gen(40, gamma))
    g = native.generate_speculative(ids, gen(40, gamma))
    assert g.token_ids == ref
    # rounds seen from outside: the first token (round 0, drafted 0), then one round per draft call
    assert g.rounds[0].drafted == 0 and g.rounds[0].emitted == 1
    assert sum(r.emitted for r in g.rounds) == 40
    assert all(r.drafted <= gamma and r.accepted <= r.drafted and r.emitted <= r.accepted + 1 for r in g.rounds)
    # same draft, same greedy rule: the same acceptances as our loop
    assert sum(r.accepted for r in g.rounds) == sum(r.accepted for r in ours_spec.rounds)


def test_native_phases(native):
    ids = native.encode("Hello world")
    base, spec = native.generate_baseline(ids, gen(12)), native.generate_speculative(ids, gen(12, 4))
    for g in (base, spec):
        _identity(g.phases)
        assert g.phases.verify_s > 0 and g.phases.sampling_s > 0 and g.phases.prefill_s > 0
        assert g.extra["n_eval_calls"] > 0 and "verify_s" in g.notes
        assert g.extra["llama_perf"]["target"]["n_p_eval"] >= len(ids)
    assert len(base.rounds) == 12 and base.phases.draft_s == 0
    assert spec.phases.draft_s > 0 and spec.extra["llama_perf"]["draft"]["n_eval"] > 0


def test_native_self_draft_accepts_everything(pairs):
    rt = LlamaCppNativeRuntime(SETTINGS)
    rt.load(pairs[1])
    try:
        ids = rt.encode("The quick brown fox")
        g = rt.generate_speculative(ids, gen(30, 4))
        assert all(r.accepted == r.drafted for r in g.rounds)
        assert g.token_ids == rt.generate_baseline(ids, gen(30)).token_ids
    finally:
        rt.close()


def test_native_sampling_runs(native):
    ids = native.encode("Hello")
    for n in (1, 2, 5):
        g = native.generate_speculative(ids, gen(n, 4, SamplingParams(temperature=0.8), seed=n))
        assert len(g.token_ids) == n


@pytest.mark.slow  # vLLM's engines start (and refuse the tiny pair) in it
def test_cli_runs_all_runtimes_with_no_flags(tmp_path):
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    out, prompts = tmp_path / "run", tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "p1", "category": "factual", "prompt": "The capital of France is"}) + "\n")
    res = CliRunner().invoke(main, ["run", "--runtime", "all", "--pair", "tiny", "--max-new-tokens", "8", "--warmup", "0", "--prompts",
                                    str(prompts), "--threads", "1", "--n-ctx", "256", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    got = {(r["runtime"], r["mode"]) for r in rows}
    assert {("llamacpp", "speculative"), ("llamacpp-native", "speculative")} <= got
    rows = [r for r in rows if installed(r["runtime"])]  # an optional runtime not installed: its skipped row
    for r in [r for r in rows if r["runtime"] in NOT_ON_TINY]:  # vLLM: its engine's own reason
        assert "head_dim=16" in r["error"]
    rows = [r for r in rows if r["runtime"] not in NOT_ON_TINY]
    assert all(r["error"] is None for r in rows), [r["error"] for r in rows]
    assert all(r["greedy_match"] for r in rows if r["mode"] == "speculative")
    torch_ids = {r["prompt_id"]: r["token_ids"] for r in rows if r["runtime"] == "torch" and r["mode"] == "baseline"}
    for r in rows:
        if r["runtime"].startswith("llamacpp"):
            assert r["token_ids"] == torch_ids[r["prompt_id"]]  # same weights, same answer


@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_generations_longer_than_one_batch(pairs, drafter):
    """Prompt + output past n_batch (512) tokens: llama-cpp-python sizes Llama.scores by its
    logits_all argument, which its speculative loop needs for every position."""
    from spec_harness.runtimes.llamacpp_native import LlamaCppNativeRuntime

    rt = LlamaCppNativeRuntime(RuntimeSettings(n_threads=1, n_ctx=1024))
    rt.load(pairs[0])
    try:
        ids = rt.encode("one two three four, " * 30)
        assert 512 < len(ids) + 40 < 1024
        g = GenerationSettings(SamplingParams(), 4, 40, 0, ignore_eos=True, drafter=drafter)
        assert rt.generate_speculative(ids, g).token_ids == rt.generate_baseline(ids, g).token_ids
    finally:
        rt.close()
