"""A runtime that is one adapter file plus one registry line (tests/toy_runtime.py) gets the whole
harness from the shared loop: rows, greedy equality, phases, rounds, target_entropy, a sampled
distribution equal to its target's, and the run's report."""

from __future__ import annotations

import numpy as np
import pytest

from spec_harness import runtimes
from spec_harness.core import sampling
from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.harness.prompts import load_prompts
from spec_harness.harness.run_config import RunConfig
from spec_harness.harness.runner import Runner
from spec_harness.models.presets import resolve_pair


@pytest.fixture()
def toy(monkeypatch):
    monkeypatch.setitem(runtimes.REGISTRY, "toy", "tests.toy_runtime:ToyRuntime")
    rt = runtimes.get("toy")(RuntimeSettings())
    rt.load(resolve_pair("tiny"))
    return rt


def test_a_registered_toy_runtime_runs_through_the_runner(toy, tmp_path):
    cfg = RunConfig(["toy"], [resolve_pair("tiny")], load_prompts("code")[:2], gammas=[1, 3],
                    samplings=[SamplingParams(), SamplingParams(0.9)], max_new_tokens=[24], warmup=0, out=tmp_path / "o")
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


def test_one_registry_line_puts_a_runtime_everywhere_a_user_meets_runtimes(monkeypatch):
    """Registered (one line, nothing else touched), the toy runtime is listed by `harness
    runtimes`, chosen by `--runtime all`, named in run's --help and in the refusals that say which
    runtimes can run what; unregistered, it is in none of them."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    def everywhere() -> dict[str, bool]:
        listed = CliRunner().invoke(main, ["runtimes"]).output.splitlines()
        helped = " ".join(CliRunner().invoke(main, ["run", "--help"]).output.split())
        native = runtimes.get("llamacpp-native")(RuntimeSettings())
        return {"runtimes": any(line.split()[:1] == ["toy"] for line in listed),
                "all": "toy" in runtimes.parse_names("all"),
                "help": "toy" in helped.replace(" ", "").split("(", 1)[-1],
                "refusals": "toy" in native.supports(GenerationSettings(forced=(1.0,)))
                and "toy" in native.supports(GenerationSettings(drafter="eagle3"))}

    monkeypatch.setattr(runtimes, "REGISTRY", dict(runtimes.REGISTRY))
    assert not any(everywhere().values())
    runtimes.register("toy", "tests.toy_runtime:ToyRuntime")
    assert everywhere() == {"runtimes": True, "all": True, "help": True, "refusals": True}
