"""Every runtime's baseline carries target_entropy, the target's mean next-token entropy (nats, at
temperature 1) over the generated tokens: the loop computes it for torch and llamacpp, hf from the
logits `generate` returns, llamacpp-native from the library's logits, llama-server by recomputing them
in-process with the same build. On the tiny pair all of them run the same float32 weights, so the
values agree; speculative rows carry none."""

from __future__ import annotations

import math

import pytest
import torch

from spec_harness import runtimes
from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.core.metrics import mean_entropy
from tests.extras import on_tiny
from tests.numerics import U32, forward_atol


@pytest.fixture(scope="module")
def loaded():
    from spec_harness.models.presets import resolve_pair

    pair, out = resolve_pair("tiny"), {}
    for name in filter(on_tiny, runtimes.names()):
        rt = runtimes.get(name)(RuntimeSettings(device="cpu", n_threads=1, n_ctx=256))
        rt.load(pair)
        out[name] = rt
    yield out
    for rt in out.values():
        rt.close()


@pytest.mark.parametrize("sampling", [SamplingParams(), SamplingParams(temperature=0.8, top_p=0.9)], ids=["greedy", "sampled"])
def test_every_baseline_has_the_same_target_entropy(loaded, sampling):
    gen = GenerationSettings(sampling, 4, 20, seed=1, ignore_eos=True)
    ids = loaded["torch"].encode("The quick brown fox")
    got = {}
    for name, rt in loaded.items():
        base = rt.generate_baseline(ids, gen)
        spec = rt.generate_speculative(ids, gen)
        assert base.target_entropy is not None and base.target_entropy > 0, name
        assert spec.target_entropy is None, name
        got[name] = (base.target_entropy, base.token_ids)
    ref, ref_ids = got["torch"]
    same = [name for name, (_, token_ids) in got.items() if token_ids == ref_ids]  # hf, native may sample otherwise
    assert set(same) == set(got) if sampling.greedy else {"torch", "llamacpp"} <= set(same), same
    for name in same:
        assert got[name][0] == pytest.approx(ref, rel=1e-3), (name, got)


def test_entropy_is_that_of_the_logits_each_step_saw(loaded):
    """torch: the value equals the mean entropy of the target's own logits on prompt + output."""
    rt = loaded["torch"]
    ids = rt.encode("Photosynthesis is")
    g = rt.generate_baseline(ids, GenerationSettings(max_new_tokens=12, ignore_eos=True))
    seq = ids + g.token_ids
    with torch.inference_mode():
        full = rt.target.model(input_ids=torch.tensor([seq])).logits[0, :, : rt.target.vocab]
    logits, one_early = full[len(ids) - 1 : len(seq) - 1], full[len(ids) - 2 : len(seq) - 2]
    # An entropy moves by at most 2 H max|dz| (dH/dz_i = -p_i (log p_i + H)): two forwards' within twice the
    # logits' tolerance, relative; each float32 entropy adds its sums' rounding, V u of H and V u absolute.
    rel = 2 * forward_atol(logits, rt.target.model.config, len(seq))
    rel += 2 * rt.target.vocab * U32 * (1 + 1 / g.target_entropy)
    assert g.target_entropy == pytest.approx(mean_entropy(logits), rel=rel)
    assert g.target_entropy != pytest.approx(mean_entropy(one_early), rel=rel)
    uniform = mean_entropy(torch.zeros(3, 257))
    assert uniform == pytest.approx(math.log(257)) and g.target_entropy < uniform
