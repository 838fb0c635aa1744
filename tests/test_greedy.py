"""Greedy speculative decoding reproduces the target-only output token for token."""

import pytest

from spec_harness.core.config import GenerationSettings

PROMPTS = ["The quick brown fox", "Photosynthesis is", "def f(x):", "1, 2, 3,", "Once upon a time"]


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
    gen = GenerationSettings(gamma=4, max_new_tokens=20, ignore_eos=True)
    base = rt.generate_baseline(ids, gen)
    spec = rt.generate_speculative(ids, gen)
    assert spec.token_ids == base.token_ids
    assert max(base.token_ids) < 257
