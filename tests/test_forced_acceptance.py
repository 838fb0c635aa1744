"""Forced acceptance (GenerationSettings.forced, core/sampling.forced): each draft position is
accepted with a given probability whatever the tokens, while every model pass runs for real: at
0 nothing is accepted, at 1 everything, at 0.5 and with per-position rates the accepted counts
follow the binomial; in torch and llamacpp (the shared loop) and llama-server
(`--spec-synth-rates`, the real server); runtimes that cannot are skipped with their reason; the
rows say `synthetic` and never enter greedy_match or the reports."""

from __future__ import annotations

import math

import pytest

from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.core.errors import HarnessError

PROMPT = "The quick brown fox"


def forced(rates, gamma=4, n=60, seed=0, s=SamplingParams()):
    return GenerationSettings(s, gamma, n, seed, ignore_eos=True, forced=tuple(rates))


@pytest.fixture(scope="module")
def runtimes(tiny_gguf, tmp_path_factory):
    from spec_harness.runtimes.llama_server import LlamaServerRuntime
    from spec_harness.runtimes.llamacpp import LlamaCppRuntime
    from spec_harness.runtimes.pytorch import TorchRuntime

    out = {}
    for cls in (TorchRuntime, LlamaCppRuntime, LlamaServerRuntime):
        rt = cls(RuntimeSettings(device="cpu", n_threads=1, n_ctx=512), tmp_path_factory.mktemp(cls.name))
        rt.load(tiny_gguf)
        out[cls.name] = rt
    yield out
    for rt in out.values():
        rt.close()


def test_rates_are_checked():
    for bad in ((), (1.5,), (-0.1, 0.5)):
        with pytest.raises(HarnessError, match="forced acceptance"):
            GenerationSettings(forced=bad)


@pytest.mark.parametrize("name", ["torch", "llamacpp", "llama-server"])
def test_alpha_0_accepts_nothing_and_1_everything(runtimes, name):
    rt = runtimes[name]
    ids = rt.encode(PROMPT)
    none = [r for r in rt.generate_speculative(ids, forced([0.0])).rounds if r.drafted]
    assert none and all(r.accepted == 0 for r in none)
    g = rt.generate_speculative(ids, forced([1.0]))
    every = [r for r in g.rounds if r.drafted]
    assert every and all(r.accepted == r.drafted for r in every) and len(g.token_ids) == 60
    assert sum(r.drafted for r in every) >= 4 * (len(every) - 1)  # full rounds of gamma drafts


def binomial_ok(k: int, n: int, p: float, z: float = 4.5) -> bool:
    return abs(k - n * p) <= z * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("name", ["torch", "llamacpp", "llama-server"])
def test_half_and_per_position_rates_follow_the_binomial(runtimes, name):
    rt = runtimes[name]
    ids = rt.encode(PROMPT)
    for rates in ((0.5,), (0.9, 0.3)):
        tried, taken = [0, 0], [0, 0]  # positions 1 and 2: reached, accepted
        for seed in range(6):
            for r in rt.generate_speculative(ids, forced(rates, n=60, seed=seed)).rounds:
                for i in range(2):
                    if r.drafted > i and r.accepted >= i:
                        tried[i] += 1
                        taken[i] += r.accepted > i
        for i in range(2):
            p = rates[min(i, len(rates) - 1)]
            assert tried[i] > 30 and binomial_ok(taken[i], tried[i], p), (rates, i, taken[i], tried[i])


def test_rows_say_synthetic_and_stay_out_of_reports(runtimes, tmp_path):
    from spec_harness.harness.prompts import Prompt
    from spec_harness.harness.rows import generation_row
    from spec_harness.core.config import PairSpec
    from spec_harness.core.results import ResultsWriter
    from spec_harness.reports.runs import load

    rt = runtimes["torch"]
    ids = rt.encode(PROMPT)
    gen = forced([1.0], n=20)
    base = generation_row(PairSpec("tiny"), rt, "torch", "baseline", Prompt("p", "c", PROMPT), 0, gen,
                          rt.generate_baseline(ids, gen))
    spec = generation_row(PairSpec("tiny"), rt, "torch", "speculative", Prompt("p", "c", PROMPT), 0, gen,
                          rt.generate_speculative(ids, gen), baseline=base)
    assert spec["synthetic"] is True and spec["forced_rates"] == [1.0] and spec["verify_rule"] == "forced"
    assert spec["greedy_match"] is None and spec["speedup"] is not None and base["synthetic"] is False
    w = ResultsWriter(tmp_path)
    w.write(base)
    w.write(spec)
    w.close()
    loaded = load([tmp_path])
    assert [r["mode"] for r in loaded.rows] == ["baseline"] and "1 forced-acceptance rows" in loaded.notes[-1]


def test_runtimes_that_cannot_force_say_why(tiny_gguf):
    from spec_harness.runtimes.hf import HFRuntime
    from spec_harness.runtimes.llamacpp_native import LlamaCppNativeRuntime

    for cls in (HFRuntime, LlamaCppNativeRuntime):
        why = cls(RuntimeSettings()).supports(forced([0.5]))
        assert why and "cannot force acceptance" in why
