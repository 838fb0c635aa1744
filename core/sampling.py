"""Logits -> probabilities -> tokens, and the speculative accept/reject rule. Defined once.

The shared loop (runtimes/loop.py) calls these for every runtime that samples in Python (torch,
llamacpp), so the draft's q and the target's p go through exactly the same temperature / top-k /
top-p transform, and baseline and speculative runs use the same code.

The rule (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023):
  for i = 1..gamma:   accept draft token d_i with probability min(1, p_i(d_i) / q_i(d_i))
  first rejection at i:  emit t ~ normalize(max(0, p_i - q_i)) and stop
  all accepted:          emit the bonus t ~ p_{gamma+1}
Greedy (temperature 0) is the same rule with one-hot p and q: accept while d_i == argmax p_i;
the correction is argmax p_i. `accept_greedy` is that special case without building one-hots.
"""

from __future__ import annotations

from typing import Optional

import torch

from core.config import SamplingParams


def probs_from_logits(logits: torch.Tensor, s: SamplingParams) -> torch.Tensor:
    """[N, V] logits -> [N, V] float32 probabilities after temperature, top-k, top-p.

    Greedy (temperature 0) gives one-hot rows at the argmax.
    """
    logits = logits.float()
    if s.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    logits = logits / s.temperature
    if s.top_k and s.top_k < logits.shape[-1]:
        kth = torch.topk(logits, s.top_k, dim=-1).values[..., -1:]  # [N, 1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if s.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # [N, V]
        cum = sorted_logits.softmax(-1).cumsum(-1)
        # drop a token when the tokens ranked above it already hold top_p; keep at least one
        drop_sorted = (cum - sorted_logits.softmax(-1)) >= s.top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits.softmax(-1)


def sample(probs: torch.Tensor, s: SamplingParams, generator: Optional[torch.Generator]) -> torch.Tensor:
    """[N, V] probabilities -> [N] token ids (argmax when greedy)."""
    if s.greedy:
        return probs.argmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def next_token(logits: torch.Tensor, s: SamplingParams, generator: Optional[torch.Generator]) -> int:
    """[V] logits -> one token id (the target-only baseline step)."""
    if s.greedy:
        return int(logits.argmax())
    return int(sample(probs_from_logits(logits[None], s), s, generator)[0])


def draft_token(logits: torch.Tensor, s: SamplingParams, generator: Optional[torch.Generator]) -> tuple[int, Optional[torch.Tensor]]:
    """One draft position: [1, V] logits -> (token, q [1, V] it was sampled from; None when greedy)."""
    if s.greedy:
        return int(logits[0].argmax()), None
    q = probs_from_logits(logits.cpu(), s)  # [1, V]
    return int(sample(q, s, generator)[0]), q


def top1_prob(logits: torch.Tensor, q: Optional[torch.Tensor]) -> float:
    """The draft's confidence at one position: the top-1 probability of q [1, V], the distribution
    its token is drawn from; when greedy (q None), of softmax(logits [1, V]) at temperature 1."""
    return float(q.max()) if q is not None else float(logits.float().softmax(-1).max())


def accept_greedy(draft_ids: torch.Tensor, target_logits: torch.Tensor) -> tuple[int, int]:
    """Greedy verification. draft_ids [g], target_logits [g+1, V] -> (n_accepted, next token)."""
    target_ids = target_logits.argmax(-1)  # [g+1]
    g = draft_ids.shape[0]
    mismatch = (draft_ids != target_ids[:g]).nonzero()
    k = int(mismatch[0]) if mismatch.numel() else g
    return k, int(target_ids[k])


def accept_sampled(
    draft_ids: torch.Tensor,  # [g]
    q: torch.Tensor,  # [g, V] draft probabilities the draft tokens were sampled from
    p: torch.Tensor,  # [g+1, V] target probabilities, same transform
    s: SamplingParams,
    generator: Optional[torch.Generator],
) -> tuple[int, int]:
    """Speculative sampling verification -> (n_accepted, next token: correction or bonus)."""
    g = draft_ids.shape[0]
    idx = torch.arange(g, device=p.device)
    p_d = p[idx, draft_ids]  # [g]
    q_d = q[idx, draft_ids]  # [g]
    r = torch.rand(g, generator=generator, device=p.device)  # [g]
    rejected = (r * q_d > p_d).nonzero()  # r > p/q, written without dividing by q
    if not rejected.numel():
        return g, int(sample(p[g:], s, generator)[0])  # all accepted: bonus from the last row
    k = int(rejected[0])
    residual = (p[k] - q[k]).clamp_min(0)  # [V]
    if residual.sum() <= 0:  # p == q up to rounding: the residual is undefined, p itself is exact
        residual = p[k]
    return k, int(torch.multinomial(residual / residual.sum(), 1, generator=generator))


def forced(rates: tuple[float, ...]):
    """The accept rule of forced acceptance (calibration): draft position i (0-based) is accepted
    with probability rates[min(i, len - 1)] whatever the tokens, until the first rejection; the
    token after is the target's own choice there (argmax when greedy, a sample from p otherwise).
    -> a function with verify's signature."""

    def accept(draft_ids, q, target_logits, s, generator) -> tuple[int, int]:
        n, k = 0, draft_ids.shape[0]
        while n < k and float(torch.rand((), generator=generator)) < rates[min(n, len(rates) - 1)]:
            n += 1
        return n, next_token(target_logits[n], s, generator)

    return accept


def verify(
    draft_ids: torch.Tensor,  # [g]
    q: Optional[torch.Tensor],  # [g, V] or None when greedy
    target_logits: torch.Tensor,  # [g+1, V]
    s: SamplingParams,
    generator: Optional[torch.Generator],
) -> tuple[int, int]:
    """One verification step in either mode -> (n_accepted, next token). With no drafts (the
    baseline, or a last round with no room to draft) it is a plain target step."""
    if draft_ids.shape[0] == 0:
        return 0, next_token(target_logits[-1], s, generator)
    if s.greedy:
        return accept_greedy(draft_ids, target_logits)
    p = probs_from_logits(target_logits, s)
    return accept_sampled(draft_ids, q, p, s, generator)
