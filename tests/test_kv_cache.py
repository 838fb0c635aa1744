"""KV caches stay correct on both sides in every case, through the shared loop (torch runtime).

A shadow of each cache (the tokens fed to it, cut back on every crop) must, after every
rollback, be a prefix of the true sequence, and every cached pass must give the logits a
cache-free pass gives. The two defects of the first seed's code (seeds/README.md) are put back by
monkeypatching and must be caught:
  1. target cache cropped one position too late after a rejection;
  2. draft never ingests the last draft token when every draft is accepted.
"""

import pytest
import torch

from spec_harness.core.config import GenerationSettings, SamplingParams
from spec_harness.runtimes.loop import DraftModel, Loop, Model
from tests.numerics import apart


class Shadowed(Model):
    """A TorchKV that mirrors what it was fed and checks each pass against a cache-free pass; after
    each crop (the loop's rollback) it logs what the cache holds."""

    def __init__(self, kv, role: str, log: list):
        self.kv, self.role, self.log = kv, role, log
        self.vocab, self.sync = kv.vocab, kv.sync
        self.shadow: list[int] = []

    def forward(self, ids, n_logits):
        seen = self.shadow + list(ids)
        logits = self.kv.forward(ids, n_logits)
        assert len(self.kv) == len(seen), "cache length differs from what was fed"
        with torch.inference_mode():
            ref = self.kv.model(input_ids=torch.tensor([seen])).logits[0, -n_logits:, : self.vocab]  # cache-free
        assert not apart(logits, ref, self.kv.model.config, len(seen)), f"{self.role} at {len(seen)} positions"
        self.shadow = seen
        return logits

    def crop(self, length):
        self.kv.crop(length)
        del self.shadow[length:]
        self.log.append((self.role, list(self.shadow)))

    def reset(self):
        self.kv.reset()
        self.shadow = []

    def __len__(self):
        return len(self.kv)


def run_checked(rt, text, gamma, temperature=0.0, n=30):
    ids = rt.encode(text)
    gen = GenerationSettings(SamplingParams(temperature=temperature), gamma=gamma, max_new_tokens=n, seed=3, ignore_eos=True)
    held = []
    loop = Loop(Shadowed(rt.target, "target", held), DraftModel(Shadowed(rt.draft, "draft", held)), rt.is_eos)
    out = loop.generate(ids, gen)
    full = ids + out.token_ids
    assert held
    for role, cached in held:
        assert cached == full[: len(cached)], f"{role} cache held a token that is not in the output"
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
    def late_rollback(self, seq, keep):
        self.target.crop(keep + 1)  # the rejected draft's KV stays where the correction belongs
        self.drafter.accepted(seq, keep)

    monkeypatch.setattr(Loop, "_rollback", late_rollback)
    with pytest.raises(AssertionError):
        run_checked(torch_rt, "The quick brown fox", gamma=4)


@pytest.fixture(scope="module")
def eager_rt(tiny_pair):
    from spec_harness.core.config import RuntimeSettings
    from spec_harness.runtimes.pytorch import TorchRuntime

    rt = TorchRuntime(RuntimeSettings(device="cpu", torch_forward="eager"))
    rt.load(tiny_pair)
    return rt


def test_defect_1_is_caught_by_the_kernels_boundary(torch_rt, monkeypatch):
    """The C++ step refuses the pass a cache out of step asks for (more logits than tokens)."""
    def late_rollback(self, seq, keep):
        self.target.crop(keep + 1)
        self.drafter.accepted(seq, keep)

    monkeypatch.setattr(Loop, "_rollback", late_rollback)
    monkeypatch.setattr(Loop, "_check", lambda self, seq: None)
    if torch_rt.describe().get("torch_forward") != "kernels":
        pytest.skip("the kernels do not build here: the eager test below covers the defect")
    with pytest.raises(ValueError, match="not a Llama pass"):
        run_checked(torch_rt, "The quick brown fox", gamma=4)


def test_defect_1_is_caught_by_the_shadow_alone(eager_rt, monkeypatch):
    """Without the loop's own invariant check, the shadow (cache-free logits, prefix) still catches
    it (PyTorch's own ops, which take the out-of-step pass without complaint)."""
    def late_rollback(self, seq, keep):
        self.target.crop(keep + 1)
        self.drafter.accepted(seq, keep)

    monkeypatch.setattr(Loop, "_rollback", late_rollback)
    monkeypatch.setattr(Loop, "_check", lambda self, seq: None)
    with pytest.raises(AssertionError):
        run_checked(eager_rt, "The quick brown fox", gamma=4)


def test_defect_2_draft_misses_last_draft_on_full_accept_is_caught(torch_rt, monkeypatch):
    orig = DraftModel.pending

    def forgetful_pending(self, seq):
        return orig(self, seq)[-1:]  # after a full accept, x_gamma is never fed to the draft

    monkeypatch.setattr(DraftModel, "pending", forgetful_pending)
    with pytest.raises(AssertionError):
        run_checked(torch_rt, "The quick brown fox", gamma=2)


def test_the_loop_refuses_a_target_cache_out_of_step(torch_rt, monkeypatch):
    """The invariant every runtime over the shared loop is held to: after each round the target
    holds the sequence minus its newest token."""
    def late_rollback(self, seq, keep):
        self.target.crop(keep + 1)
        self.drafter.accepted(seq, keep)

    monkeypatch.setattr(Loop, "_rollback", late_rollback)
    ids = torch_rt.encode("The quick brown fox")
    with pytest.raises(AssertionError, match="target KV cache out of step"):
        torch_rt.generate_speculative(ids, GenerationSettings(gamma=4, max_new_tokens=30, ignore_eos=True))
