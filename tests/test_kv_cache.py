"""KV caches stay correct on both sides in every case.

A shadow of each cache (the tokens fed to it, cut back on every crop) must always be a prefix of
the true sequence, and every cached pass must give the logits a cache-free pass gives. The two
defects of the first seed's code (seeds/README.md) are put back by monkeypatching and must be
caught by the same check:
  1. target cache cropped one position too late after a rejection;
  2. draft never ingests the last draft token when every draft is accepted.
"""

import pytest
import torch

from harness.config import GenerationSettings, SamplingParams
from runtimes.pytorch import KVModel, SpeculativeEngine


class CacheChecker:
    """Wraps a runtime's engine: mirrors each cache and checks it against cache-free passes."""

    def __init__(self, engine: SpeculativeEngine):
        self.engine = engine
        self.shadow = {id(engine.target): [], id(engine.draft): []}
        self.passes = []  # (role, tokens the cache held at a round's first pass of that model)
        self._orig_crop = KVModel.crop
        self._orig_reset = KVModel.reset
        self.last_role = None

    def __enter__(self):
        checker = self

        def crop(m, length):
            checker._orig_crop(m, length)
            del checker.shadow[id(m)][length:]

        def reset(m):
            checker._orig_reset(m)
            checker.shadow[id(m)] = []

        def hook(role, m, ids, logits):
            seen = checker.shadow[id(m)] + list(ids)
            assert len(m) == len(seen), "cache length differs from what was fed"
            with torch.inference_mode():
                x = torch.tensor([seen])
                ref = m.model(input_ids=x).logits[0, -logits.shape[0]:, : m.vocab]  # cache-free
            torch.testing.assert_close(logits, ref, atol=1e-3, rtol=1e-3)
            if role != "draft" or checker.last_role != "draft":  # after rollback, before new drafts
                checker.passes.append((role, checker.shadow[id(m)]))
            checker.shadow[id(m)] = seen
            checker.last_role = role

        self._mp = pytest.MonkeyPatch()
        self._mp.setattr(KVModel, "crop", crop)
        self._mp.setattr(KVModel, "reset", reset)
        self.engine.forward_hook = hook
        return self

    def __exit__(self, *exc):
        self.engine.forward_hook = None
        self._mp.undo()

    def check_prefixes(self, full_sequence: list[int]):
        """What each cache held after each rollback must be a prefix of the final sequence."""
        for role, held in self.passes:
            assert held == full_sequence[: len(held)], f"{role} cache held a token that is not in the output"


def run_checked(rt, text, gamma, temperature=0.0, n=30):
    ids = rt.encode(text)
    gen = GenerationSettings(SamplingParams(temperature=temperature), gamma=gamma, max_new_tokens=n, seed=3, ignore_eos=True)
    with CacheChecker(rt.engine) as chk:
        out = rt.generate_speculative(ids, gen)
    chk.check_prefixes(ids + out.token_ids)
    return out


@pytest.mark.parametrize("gamma", [1, 3, 5])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_caches_match_cache_free_passes(torch_rt, gamma, temperature):
    out = run_checked(torch_rt, "The quick brown fox", gamma, temperature)
    accepted = {r.accepted for r in out.rounds if r.drafted == gamma}
    assert 0 in accepted or temperature > 0  # greedy: a first-position rejection happened


def test_rejection_at_every_position_is_rolled_back(torch_rt):
    seen = set()
    for text in ("The quick brown fox", "Photosynthesis is", "def f(x):", "Once upon a time"):
        out = run_checked(torch_rt, text, gamma=4)
        seen |= {r.accepted for r in out.rounds if r.drafted == 4}
    assert seen == {0, 1, 2, 3, 4}  # every rejection position and the full accept were checked


def test_defect_1_target_cropped_one_too_late_is_caught(torch_rt, monkeypatch):
    def late_rollback(self, keep):
        self.target.crop(keep + 1)  # the rejected draft's KV stays where the correction belongs
        self.draft.crop(keep)

    monkeypatch.setattr(SpeculativeEngine, "_rollback", late_rollback)
    with pytest.raises(AssertionError):
        run_checked(torch_rt, "The quick brown fox", gamma=4)


def test_defect_2_draft_misses_last_draft_on_full_accept_is_caught(torch_rt, monkeypatch):
    orig = SpeculativeEngine._pending

    def forgetful_pending(m, seq):
        ids = orig(m, seq)
        return ids[-1:]  # after a full accept, d_gamma is never fed to the draft

    monkeypatch.setattr(SpeculativeEngine, "_pending", staticmethod(forgetful_pending))
    with pytest.raises(AssertionError):
        run_checked(torch_rt, "The quick brown fox", gamma=2)
