"""The redesign onto one shared loop changed no output: on the tiny pairs, every runtime gives the
greedy token ids and round counts (drafted, accepted, emitted) recorded with the code before it
(the two-loop layout of commit 3626a38), baseline and speculative, a real draft and --draft self
(tests/data/ids_before_redesign.json holds what that code produced). Seeded sampling is recorded
there too, but core/sampling.py has since drawn its tokens otherwise (by inverting the CDF of the
nucleus over its ids, not torch.multinomial over the vocabulary: the same distributions, another
use of the random stream), so sampled ids are checked as what they must still be: the same for
a seed in every runtime over the shared loop, and again on a second call; their distribution is
tests/test_sampling_distribution.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spec_harness import runtimes
from spec_harness.core.config import GenerationSettings, PairSpec, RuntimeSettings, SamplingParams

RECORDED = json.loads((Path(__file__).parent / "data" / "ids_before_redesign.json").read_text())
LOOP_RUNTIMES = ("torch", "llamacpp")  # the runtimes over runtimes/loop.py, whose sampler is core/sampling.py


def _pairs():
    from spec_harness.models.presets import resolve_pair

    t = resolve_pair("tiny")
    return {"tiny": t, "tiny+self": PairSpec("tiny+self", t.target, t.target, t.target_gguf, t.target_gguf)}


def _generate(rt, c: dict):
    gen = GenerationSettings(SamplingParams(**c["sampling"]), c["gamma"], c["max_new_tokens"], c["seed"], ignore_eos=True)
    ids = rt.encode(c["prompt"])
    return rt.generate_speculative(ids, gen) if c["mode"] == "speculative" else rt.generate_baseline(ids, gen)


@pytest.mark.parametrize("name", sorted({c["runtime"] for c in RECORDED["cases"]}))  # the runtimes of that code
def test_every_runtime_reproduces_the_recorded_greedy_ids(name):
    assert name in runtimes.names()
    cases = [c for c in RECORDED["cases"] if c["runtime"] == name and not c["sampling"].get("temperature")]
    assert len(cases) == 16  # 2 pairs x 2 prompts x (1 baseline + 3 gammas), greedy
    for pair_name, pair in _pairs().items():
        rt = runtimes.get(name)(RuntimeSettings(device="cpu", n_threads=1, n_ctx=256))
        rt.load(pair)
        try:
            for c in (c for c in cases if c["pair"] == pair_name):
                g = _generate(rt, c)
                where = (pair_name, c["prompt"], c["sampling"], c["seed"], c["mode"], c["gamma"])
                assert g.token_ids == c["token_ids"], where
                assert [[r.drafted, r.accepted, r.emitted] for r in g.rounds] == c["rounds"], where
        finally:
            rt.close()


def test_seeded_sampling_is_the_same_in_every_runtime_over_the_loop_and_on_a_second_call():
    cases = [c for c in RECORDED["cases"] if c["runtime"] == "torch" and c["sampling"].get("temperature") and c["pair"] == "tiny"]
    assert len(cases) == 32  # 2 prompts x 4 samplings/seeds x (1 baseline + 3 gammas)
    got = {}
    for name in LOOP_RUNTIMES:
        rt = runtimes.get(name)(RuntimeSettings(device="cpu", n_threads=1, n_ctx=256))
        rt.load(_pairs()["tiny"])
        try:
            got[name] = [(_generate(rt, c).token_ids, [[r.drafted, r.accepted, r.emitted] for r in _generate(rt, c).rounds])
                         for c in cases]
            again = [_generate(rt, c).token_ids for c in cases]
            assert again == [ids for ids, _ in got[name]], name
        finally:
            rt.close()
    assert got["torch"] == got["llamacpp"]
    assert len({tuple(ids) for ids, _ in got["torch"]}) > len(cases) // 2  # the seeds and settings do sample differently
