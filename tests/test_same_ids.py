"""The redesign onto one shared loop changed no output: on the tiny pairs, every runtime gives the
token ids and round counts (drafted, accepted, emitted) recorded with the code before it (the
two-loop layout of commit 3626a38), greedy and seeded sampling, baseline and speculative, a real
draft and --draft self. tests/data/ids_before_redesign.json holds what that code produced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import runtimes
from core.config import GenerationSettings, PairSpec, RuntimeSettings, SamplingParams

RECORDED = json.loads((Path(__file__).parent / "data" / "ids_before_redesign.json").read_text())


def _pairs():
    from models.presets import resolve_pair

    t = resolve_pair("tiny")
    return {"tiny": t, "tiny+self": PairSpec("tiny+self", t.target, t.target, t.target_gguf, t.target_gguf)}


@pytest.mark.parametrize("name", sorted({c["runtime"] for c in RECORDED["cases"]}))  # the runtimes of that code
def test_every_runtime_reproduces_the_recorded_ids(name):
    assert name in runtimes.names()
    cases = [c for c in RECORDED["cases"] if c["runtime"] == name]
    assert len(cases) == 80  # 2 pairs x 2 prompts x 5 samplings/seeds x (1 baseline + 3 gammas)
    for pair_name, pair in _pairs().items():
        rt = runtimes.get(name)(RuntimeSettings(device="cpu", n_threads=1, n_ctx=256))
        rt.load(pair)
        try:
            for c in (c for c in cases if c["pair"] == pair_name):
                gen = GenerationSettings(SamplingParams(**c["sampling"]), c["gamma"], c["max_new_tokens"], c["seed"],
                                         ignore_eos=True)
                ids = rt.encode(c["prompt"])
                g = rt.generate_speculative(ids, gen) if c["mode"] == "speculative" else rt.generate_baseline(ids, gen)
                where = (pair_name, c["prompt"], c["sampling"], c["seed"], c["mode"], c["gamma"])
                assert g.token_ids == c["token_ids"], where
                assert [[r.drafted, r.accepted, r.emitted] for r in g.rounds] == c["rounds"], where
        finally:
            rt.close()
