"""The logits transform and the accept rule, on hand-made tensors."""

import torch

from spec_harness.core import sampling
from spec_harness.core.config import SamplingParams
from tests.numerics import U32


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]])
    p = sampling.probs_from_logits(logits, SamplingParams(temperature=1.0, top_k=2))
    # two float64 probabilities rounded to float32, then their float32 sum: within 2 u of 1
    assert (p[0, 2:] == 0).all() and abs(float(p[0, :2].sum()) - 1) <= 2 * U32
    full = logits.softmax(-1)[0]
    # top-p 0.8: the top token holds ~0.64 < 0.8, so the second is kept; the third is not needed
    p = sampling.probs_from_logits(logits, SamplingParams(temperature=1.0, top_p=0.8))
    assert p[0, 0] > 0 and p[0, 1] > 0 and (p[0, 2:] == 0).all()
    assert float(full[0]) < 0.8 < float(full[:2].sum())


def test_greedy_is_one_hot_argmax():
    p = sampling.probs_from_logits(torch.tensor([[0.1, 2.0, 1.0]]), SamplingParams())
    assert p.tolist() == [[0.0, 1.0, 0.0]]


def test_greedy_accepts_until_first_mismatch_and_corrects_with_argmax():
    target_logits = torch.tensor([[0, 9.0, 0], [9.0, 0, 0], [0, 0, 9.0], [0, 9.0, 0]])  # argmax 1,0,2,1
    assert sampling.accept_greedy(torch.tensor([1, 0, 1]), target_logits) == (2, 2)
    assert sampling.accept_greedy(torch.tensor([1, 0, 2]), target_logits) == (3, 1)  # bonus
    assert sampling.accept_greedy(torch.tensor([2, 0, 2]), target_logits) == (0, 1)


def test_rejection_resamples_from_the_residual():
    s = SamplingParams(temperature=1.0)
    q = torch.tensor([[0.0, 1.0, 0.0]])  # draft is sure of token 1
    p = torch.tensor([[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]])  # target never says 1
    for seed in range(20):
        k, t = sampling.accept_sampled(torch.tensor([1]), q, p, s, torch.Generator().manual_seed(seed))
        assert k == 0 and t in (0, 2)  # residual max(0, p - q) excludes token 1


def test_draft_equal_to_target_is_always_accepted():
    s = SamplingParams(temperature=1.0)
    q = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])
    p = torch.cat([q, torch.tensor([[0.0, 0.0, 1.0]])])
    for seed in range(20):
        k, t = sampling.accept_sampled(torch.tensor([2, 0]), q, p, s, torch.Generator().manual_seed(seed))
        assert (k, t) == (2, 2)
