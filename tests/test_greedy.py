"""Greedy speculative decoding reproduces the target-only output token for token."""

import pytest
import torch

from spec_harness.core.config import GenerationSettings
from tests.numerics import forward_atol

PROMPTS = ["The quick brown fox", "Photosynthesis is", "def f(x):", "1, 2, 3,", "Once upon a time"]


def tie_closer_than_rounding(rt, text: str, new_tokens: int) -> str:
    """'' when, at every position of the prompt's greedy output, the target's and the draft's top
    two logits are further apart than twice what two float32 forwards may differ by (tests/numerics.py):
    then no kernel, batch size or SIMD width can flip a greedy choice, and two runtimes that emit
    other tokens differ by more than rounding. Else the nearest tie."""
    ids = rt.encode(text)
    seq = ids + rt.generate_baseline(ids, GenerationSettings(max_new_tokens=new_tokens, ignore_eos=True)).token_ids
    for side in (rt.target, rt.draft):
        with torch.inference_mode():
            logits = side.model(input_ids=torch.tensor([seq])).logits[0, len(ids) - 1:, : side.vocab]
        top = logits.topk(2, -1).values
        margin, tol = float((top[:, 0] - top[:, 1]).min()), 2 * forward_atol(logits, side.model.config, len(seq))
        if margin <= tol:
            return f"{text!r}: a top-2 margin of {margin:.2e}, within {tol:.2e}"
    return ""


def test_every_greedy_choice_is_further_from_a_tie_than_rounding(torch_rt):
    """What the token-for-token comparisons here and in tests/test_same_ids.py and
    tests/test_entropy.py stand on, on any machine (its prompts, the recorded ones among them)."""
    assert not [why for text in PROMPTS if (why := tie_closer_than_rounding(torch_rt, text, 30))]


@pytest.mark.parametrize("gamma", range(1, 9))
def test_speculative_equals_baseline(torch_rt, gamma):
    for text in PROMPTS:
        ids = torch_rt.encode(text)
        gen = GenerationSettings(gamma=gamma, max_new_tokens=23, ignore_eos=True)  # 23: ends mid-round
        base = torch_rt.generate_baseline(ids, gen)
        spec = torch_rt.generate_speculative(ids, gen)
        assert len(base.token_ids) == 23
        assert spec.token_ids == base.token_ids, (gamma, text)
        assert sum(r.emitted for r in spec.rounds) == 23
        assert all(r.drafted <= gamma and r.accepted <= r.drafted for r in spec.rounds)


def test_cases_that_must_be_exercised(torch_rt):
    """The prompts above really contain a first-draft rejection, a full accept and a mid-round end."""
    first_rejected = full_accept = truncated = False
    for gamma in (2, 4):
        for text in PROMPTS:
            gen = GenerationSettings(gamma=gamma, max_new_tokens=23, ignore_eos=True)
            spec = torch_rt.generate_speculative(torch_rt.encode(text), gen)
            first_rejected |= spec.rounds[0].accepted == 0
            full_accept |= any(r.drafted == gamma and r.accepted == gamma for r in spec.rounds)
            # the last round was cut short by the gamma clamp or by max_new_tokens
            truncated |= spec.rounds[-1].drafted < gamma or spec.rounds[-1].emitted < spec.rounds[-1].accepted + 1
    assert first_rejected and full_accept and truncated


def test_eos_mid_round_stops_both_modes_at_the_same_token(torch_rt):
    ids = torch_rt.encode("The quick brown fox")
    gen = GenerationSettings(gamma=6, max_new_tokens=30, ignore_eos=True)
    full = torch_rt.generate_baseline(ids, gen).token_ids
    old = torch_rt.eos_id
    try:
        torch_rt.eos_id = full[9]  # pretend the 10th generated token is EOS
        stop = full.index(full[9]) + 1
        gen_eos = GenerationSettings(gamma=6, max_new_tokens=30)
        base = torch_rt.generate_baseline(ids, gen_eos)
        spec = torch_rt.generate_speculative(ids, gen_eos)
    finally:
        torch_rt.eos_id = old
    assert base.token_ids == full[:stop]
    assert spec.token_ids == base.token_ids
    assert sum(r.emitted for r in spec.rounds) == stop


def test_padded_embeddings_compare_over_tokenizer_ids():
    """Draft and target with different embedding sizes (as Qwen2.5 0.5B vs 7B) still agree greedily."""
    from spec_harness.core.config import RuntimeSettings
    from spec_harness.models.tiny import ensure_pair
    from spec_harness.core.config import PairSpec
    from spec_harness.runtimes.pytorch import TorchRuntime

    t, d = ensure_pair("tiny-padded")
    rt = TorchRuntime(RuntimeSettings(device="cpu"))
    rt.load(PairSpec("tiny-padded", str(t), str(d)))
    assert rt.target.model.config.vocab_size != rt.draft.model.config.vocab_size
    ids = rt.encode("Hello")
    assert not tie_closer_than_rounding(rt, "Hello", 20)
    gen = GenerationSettings(gamma=4, max_new_tokens=20, ignore_eos=True)
    base = rt.generate_baseline(ids, gen)
    spec = rt.generate_speculative(ids, gen)
    assert spec.token_ids == base.token_ids
    assert max(base.token_ids) < 257
