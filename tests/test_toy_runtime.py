"""A runtime that is one adapter file plus one registry line (tests/toy_runtime.py) gets the whole
harness from the shared loop: rows, greedy equality, phases, rounds, target_entropy, a sampled
distribution equal to its target's, and the run's report."""

from __future__ import annotations

import numpy as np
import pytest

import runtimes
from core import sampling
from core.config import GenerationSettings, RuntimeSettings, SamplingParams
from harness.prompts import load_prompts
from harness.run_config import RunConfig
from harness.runner import Runner
from models.presets import resolve_pair


@pytest.fixture()
def toy(monkeypatch):
    monkeypatch.setitem(runtimes.REGISTRY, "toy", "tests.toy_runtime:ToyRuntime")
    rt = runtimes.get("toy")(RuntimeSettings())
    rt.load(resolve_pair("tiny"))
    return rt


def test_a_registered_toy_runtime_runs_through_the_runner(toy, tmp_path):
    cfg = RunConfig(["toy"], [resolve_pair("tiny")], load_prompts("code")[:2], [1, 3], [SamplingParams(), SamplingParams(0.9)],
                    [24], warmup=0, out=tmp_path / "o")
    rows = Runner(cfg).run()
    assert len(rows) == cfg.n_rows() and not any(r["error"] for r in rows)
    for r in rows:
        assert all(r[k] >= 0 for k in ("prefill_s", "draft_s", "verify_s", "sampling_s", "unaccounted_s"))
        assert r["verify_s"] > 0 and r["new_tokens"] == sum(x["emitted"] for x in r["rounds"])
        if r["mode"] == "baseline":
            assert r["target_entropy"] > 0 and r["draft_s"] == 0
        else:
            assert r["draft_s"] > 0 and 0 < r["alpha_hat"] < 1
    assert all(r["greedy_match"] for r in rows if r["mode"] == "speculative" and r["temperature"] == 0)


def test_the_toy_speculative_first_token_follows_its_target(toy):
    """Leviathan's guarantee through the shared loop: the first emitted token's frequencies follow p."""
    from scipy.stats import chisquare

    s = SamplingParams(temperature=2.0)
    prompt = toy.encode("ab")
    p = sampling.probs_from_logits(toy.target.table[prompt[-1]][None], s)[0].double().numpy()
    n, counts = 800, np.zeros(len(p))
    for seed in range(n):
        counts[toy.generate_speculative(prompt, GenerationSettings(s, 3, 2, seed, ignore_eos=True)).token_ids[0]] += 1
    top = np.argsort(p)[::-1][:6]
    obs = np.append(counts[top], n - counts[top].sum())
    exp = np.append(p[top], 1 - p[top].sum()) * n
    assert exp.min() > 5
    assert chisquare(obs, exp / exp.sum() * n).pvalue > 1e-3
    drafted = [r for seed in range(20) for r in toy.generate_speculative(prompt, GenerationSettings(s, 3, 12, seed)).rounds if r.drafted]
    assert 0 < sum(r.accepted for r in drafted) < sum(r.drafted for r in drafted)  # the draft really disagrees
