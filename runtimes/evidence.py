"""Why a greedy speculative output left its baseline's: the evidence, recomputed on the true prefix
with the runtime's own target (a loop.Model: the same library, weights and kernels), after the
measurement and outside every clock.

At the first position j where the ids differ, the target's logits are computed twice over the
common prefix: one token at a time, as the baseline computed them, and inside a batch of the shape
of the verify pass that emitted j (the round's newest token and its k drafts), as speculation
computed them. From the two vectors: each pass's top-1 - top-2 margin and its choice, and the
largest absolute difference between them. If that difference is at least the one-token margin,
the passes can disagree about the winner by numerics alone (batched and one-token kernels round
differently, quantized ones the more): a *near-tie flip*. Otherwise the numerics cannot explain the
speculative token, and the mismatch is a *suspected bug* (the seed's off-by-one verifier crop is
one: its verify pass sees a rejected draft where the correction belongs).

Each logits vector is computed once per model object and inputs: the same mismatch met again by
another drafter of the same runtime (the same prompt and prefix), or a one-token pass a server's
baseline already ran for its entropy (step_logits), is read from a small memo on the model. The
prompt's prefill is not repeated either: where the cache still starts with the prompt as the last
feed_prompt prefilled it (the generation just measured, or this module's last look), it is
cropped back to it (on a long input the prefill was most of the evidence's time).

What it does not do: decide when to look (the runner asks for greedy rows that do not match) or
print (harness/summary.py, reports/).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Optional

import torch

from spec_harness.core import metrics
from spec_harness.core.records import RoundRecord
from spec_harness.runtimes.loop import Model, feed_prompt

NEAR_TIE, SUSPECTED_BUG = metrics.NEAR_TIE, metrics.SUSPECTED_BUG
MEMO_SIZE = 256  # logits vectors kept per model (about 200 KB each at a 49k vocabulary)


def _recall(model: Model, key: tuple) -> Optional[torch.Tensor]:
    memo = getattr(model, "_evidence_memo", None)
    return None if memo is None else memo.get(key)


def _remember(model: Model, key: tuple, logits: torch.Tensor) -> torch.Tensor:
    memo = getattr(model, "_evidence_memo", None)
    if memo is None:
        memo = model._evidence_memo = OrderedDict()
    memo[key] = logits
    memo.move_to_end(key)
    while len(memo) > MEMO_SIZE:
        memo.popitem(last=False)
    return logits


def top2(logits: torch.Tensor) -> tuple[int, float]:
    """[V] -> (argmax, top-1 minus top-2 logit)."""
    v, i = logits.float().topk(2)
    return int(i[0]), float(v[0] - v[1])


def _hold_prompt(model: Model, prompt: list[int]) -> None:
    """The cache holding prompt[:-1] from one pass, as the loop prefills it: cropped back to it
    where the model's last feed_prompt prefilled it and nothing below it changed since, else fed."""
    if getattr(model, "prefilled", None) == tuple(prompt[:-1]) and len(model) >= len(prompt) - 1:
        model.crop(len(prompt) - 1)
    else:
        feed_prompt(model, prompt)


@torch.inference_mode()
def one_token_logits(model: Model, prompt: list[int], out: list[int], j: int) -> torch.Tensor:
    """The target's logits for output position j as a baseline computes them: the prompt (less its
    last token) in one pass, then one token per pass. -> [V]"""
    key = ("one", tuple(prompt), tuple(out[:j]))
    known = _recall(model, key)
    if known is not None:
        return known
    _hold_prompt(model, prompt)
    logits = None
    for t in [prompt[-1]] + out[:j]:
        logits = model.forward([t], 1)
    return _remember(model, key, logits[-1].float().clone())


@torch.inference_mode()
def step_logits(model: Model, prompt: list[int], out: list[int]) -> torch.Tensor:
    """The target's logits at every output position, one token per pass as a baseline computes
    them (for a runtime whose own logits cannot be read, e.g. a server). -> [len(out), V]"""
    _hold_prompt(model, prompt)
    rows = [_remember(model, ("one", tuple(prompt), tuple(out[:i])), model.forward([t], 1)[-1].float().clone())
            for i, t in enumerate([prompt[-1]] + out[:-1])]
    return torch.stack(rows) if rows else torch.zeros(0, 1)


@torch.inference_mode()
def batched_logits(model: Model, prompt: list[int], out: list[int], j: int, start: int, drafted: int) -> torch.Tensor:
    """The logits for position j inside a verify pass over positions start..start+drafted: the cache
    holds prompt[:-1] (one pass, as the loop prefills it) and then prompt[-1] + out[:start-1] (one
    pass, where the loop's rounds made several), the batch is the newest token and `drafted` tokens
    after it (out's own where it has them). -> [V]"""
    key = ("batched", tuple(prompt), tuple(out), j, start, drafted)
    known = _recall(model, key)
    if known is not None:
        return known
    seq = prompt + out
    _hold_prompt(model, prompt)
    held = len(prompt) + start - 1  # what the target caches at the round's start: seq[:-1]
    if held > len(model):
        model.forward(seq[len(model):held], 1)
    batch = seq[held : held + drafted + 1]
    batch += [batch[-1]] * (drafted + 1 - len(batch))  # past the end of out: filler, causally unseen by row j
    logits = model.forward(batch, drafted + 1)  # [drafted + 1, V]
    return _remember(model, key, logits[j - start].float().clone())


def _round_of(rounds: list[RoundRecord], j: int) -> tuple[int, int]:
    """(start, drafted) of the round whose verify pass emitted output position j."""
    start = 0
    for r in rounds:
        if j < start + r.emitted:
            return start, r.drafted
        start += r.emitted
    return start, 0


def greedy_mismatch(model: Model, prompt: list[int], base_ids: list[int], spec_ids: list[int], rounds: list[RoundRecord],
                    decode: Callable[[list[int]], str]) -> Optional[dict]:
    """The evidence of a greedy mismatch, or None when the ids are equal."""
    j = metrics.first_difference(base_ids, spec_ids)
    if j is None:
        return None
    common = base_ids[:j]
    one = one_token_logits(model, prompt, common, j)
    start, drafted = _round_of(rounds, j)
    batched = batched_logits(model, prompt, spec_ids[: j + drafted + 1], j, start, drafted)
    (pick_1, margin_1), (pick_b, margin_b) = top2(one), top2(batched)
    diff = float((one - batched).abs().max())
    token = {"baseline": base_ids[j] if j < len(base_ids) else None, "speculative": spec_ids[j] if j < len(spec_ids) else None}
    return {
        "position": j,
        "baseline_token": token["baseline"], "speculative_token": token["speculative"],
        "baseline_text": None if token["baseline"] is None else decode([token["baseline"]]),
        "speculative_text": None if token["speculative"] is None else decode([token["speculative"]]),
        "margin_one_token": margin_1, "margin_batched": margin_b,
        "choice_one_token": pick_1, "choice_batched": pick_b,
        "max_abs_diff": diff, "verify_round": {"start": start, "drafted": drafted},
        "verdict": NEAR_TIE if diff >= margin_1 else SUSPECTED_BUG,
    }
