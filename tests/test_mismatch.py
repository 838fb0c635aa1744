"""Greedy mismatches carry their evidence (runtimes/evidence.py), and the evidence tells numerics
from a bug: a near tie that batched passes flip is a near-tie flip; the seed's off-by-one verifier
crop, put back into the shared loop, is a suspected bug."""

from __future__ import annotations

import pytest

from spec_harness import runtimes
from spec_harness.core.config import GenerationSettings, RuntimeSettings
from spec_harness.runtimes import evidence
from spec_harness.runtimes.loop import DraftModel, Loop, Model
from tests.extras import installed
from tests.toy_runtime import Bigram, ToyRuntime

GREEDY = GenerationSettings(gamma=3, max_new_tokens=12, ignore_eos=True)


class BatchedNudge(Bigram):
    """A bigram whose passes of more than one token raise one token's logit a little: a model whose
    batched and one-token numerics differ, as quantized kernels do."""

    def __init__(self, table, token: int, nudge: float):
        super().__init__(table)
        self.token, self.nudge = token, nudge

    def forward(self, ids, n_logits):
        out = super().forward(ids, n_logits)
        if len(ids) > 1:
            out = out.clone()
            out[:, self.token] += self.nudge
        return out


class NearTieToy(ToyRuntime):
    """After byte 'x' the target's top two are 1e-3 apart; its batched passes nudge the runner-up by 3e-3."""

    def load(self, pair):
        super().load(pair)
        table = self.target.table.clone()
        x = ord("x")
        first, second = table[x].topk(2).indices.tolist()
        table[x, second] = table[x, first] - 1e-3
        self.runner_up = second
        self.target = BatchedNudge(table, second, 3e-3)
        self.draft = Bigram(table)


def test_a_near_tie_flipped_by_batched_numerics_is_a_near_tie_flip(monkeypatch, tmp_path):
    from spec_harness.harness.prompts import Prompt
    from spec_harness.harness.run_config import RunConfig
    from spec_harness.harness.runner import Runner
    from spec_harness.models.presets import resolve_pair

    monkeypatch.setitem(runtimes.REGISTRY, "toy-near-tie", "tests.test_mismatch:NearTieToy")
    cfg = RunConfig(["toy-near-tie"], [resolve_pair("tiny")], [Prompt("p", "custom", "abx")], gammas=[3],
                    max_new_tokens=[8], warmup=0, out=tmp_path / "o")
    rows = Runner(cfg).run()
    spec = next(r for r in rows if r["mode"] == "speculative")
    assert spec["greedy_match"] is False
    m = spec["mismatch"]
    assert m["position"] == 0 and m["verdict"] == evidence.NEAR_TIE
    assert m["margin_one_token"] == pytest.approx(1e-3, abs=1e-5) and m["max_abs_diff"] == pytest.approx(3e-3, abs=1e-5)
    assert m["choice_batched"] == m["speculative_token"] != m["baseline_token"] == m["choice_one_token"]
    base = next(r for r in rows if r["mode"] == "baseline")
    assert base["step_margins"][0] == pytest.approx(1e-3, abs=1e-5)


class Recording(Bigram):
    """A bigram that records each pass: its tokens and what the cache held before it."""

    def __init__(self, table):
        super().__init__(table)
        self.passes = []

    def forward(self, ids, n_logits):
        self.passes.append((tuple(self.seen), tuple(ids)))
        return super().forward(ids, n_logits)


def test_the_evidence_prefills_a_prompt_once_and_not_again_after_the_generation_that_did():
    import torch

    from spec_harness.core.records import RoundRecord
    from spec_harness.runtimes.loop import feed_prompt

    model = Recording(torch.randn(20, 20, generator=torch.Generator().manual_seed(1)))
    prompt, base = [1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]
    rounds = [RoundRecord(3, 2, 3, *[None] * 5), RoundRecord(3, 3, 4, *[None] * 5)]  # the second emits 3 .. 6

    def look(j: int) -> dict:  # a speculative output that leaves base at j
        model.passes.clear()
        return evidence.greedy_mismatch(model, prompt, base, base[:j] + [0, 13, 14, 15], rounds, str)

    def prefills() -> int:  # passes from an empty cache
        return sum(1 for before, _ in model.passes if not before)

    first = look(4)
    assert prefills() == 1  # one prefill serves the one-token and the batched pass
    batch_before, batch = model.passes[-1]
    assert batch_before == tuple(prompt + base[:2]) and batch == (base[2], base[3], 0, 13)  # round 2: start 3, 3 drafts
    assert (tuple(prompt[:-1]), (prompt[-1],) + tuple(base[:2])) in model.passes  # its cache: the prompt's pass, then the rest
    feed_prompt(model, prompt)  # a generation of the same prompt
    model.forward([6, 7, 8], 1)
    assert look(5)["position"] == 5 and prefills() == 0  # cropped back to the generation's prefill
    feed_prompt(model, [2, 3])  # another prompt
    assert look(3)["position"] == 3 and prefills() == 1
    assert first["position"] == 4 and first["verify_round"] == {"start": 3, "drafted": 3}


class LateCrop(Model):
    """The seed's defect as a test double around a target: after a rejection its cache is cropped one
    position too late, so the rejected draft's KV stays where the correction belongs and every later
    token sits one position off. It reports the length the loop asked for, so the loop goes on."""

    def __init__(self, kv):
        self.kv, self.vocab, self.sync, self.extra = kv, kv.vocab, kv.sync, 0

    def forward(self, ids, n_logits):
        return self.kv.forward(ids, n_logits)

    def crop(self, length):
        if length < len(self):
            self.kv.crop(length + self.extra + 1)
            self.extra += 1

    def reset(self):
        self.kv.reset()
        self.extra = 0

    def __len__(self):
        return len(self.kv) - self.extra


def test_the_off_by_one_verifier_crop_is_a_suspected_bug(torch_rt):
    ids = torch_rt.encode("The quick brown fox")
    base = torch_rt.generate_baseline(ids, GREEDY)
    spec = Loop(LateCrop(torch_rt.target), DraftModel(torch_rt.draft), torch_rt.is_eos).generate(ids, GREEDY)
    assert spec.token_ids != base.token_ids, "the defect must change the output for this test to mean anything"
    m = torch_rt.mismatch_evidence(ids, base.token_ids, spec)
    assert m["verdict"] == evidence.SUSPECTED_BUG
    assert m["max_abs_diff"] < 1e-3 < m["margin_one_token"]  # float32: the two passes agree, the margin is real
    assert m["choice_batched"] == m["choice_one_token"] == m["baseline_token"] != m["speculative_token"]


@pytest.mark.parametrize("name", [n for n in runtimes.names() if n != "vllm"])  # vLLM returns no logits: no evidence
def test_every_runtime_recomputes_its_own_evidence(name):
    """On the float32 tiny pair every runtime's one-token and batched passes agree: the evidence of a
    pretended mismatch (speculative ids altered at token 5) finds no numerics to blame."""
    from spec_harness.models.presets import resolve_pair

    if not installed(name):
        pytest.skip(f"{name}'s optional extra is not installed")
    rt = runtimes.get(name)(RuntimeSettings(device="cpu", n_threads=1, n_ctx=256))
    rt.load(resolve_pair("tiny"))
    try:
        ids = rt.encode("def f(x):")
        base, spec = rt.generate_baseline(ids, GREEDY), rt.generate_speculative(ids, GREEDY)
        assert spec.token_ids == base.token_ids
        bent = list(spec.token_ids)
        bent[5] = (bent[5] + 1) % 256
        spec.token_ids = bent
        m = rt.mismatch_evidence(ids, base.token_ids, spec)
    finally:
        rt.close()
    assert m["position"] == 5 and m["speculative_token"] == bent[5] and m["baseline_token"] == base.token_ids[5]
    assert m["choice_one_token"] == m["choice_batched"] == base.token_ids[5]
    assert m["max_abs_diff"] < 0.01 * m["margin_one_token"] and m["verdict"] == evidence.SUSPECTED_BUG
    assert m["margin_one_token"] == pytest.approx(m["margin_batched"], rel=1e-2)


def test_first_difference():
    from spec_harness.core.metrics import first_difference

    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2
