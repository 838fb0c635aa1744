"""Draft-length policies (DraftPolicy in core/config.py; DraftModel and DraftLength in runtimes/loop.py):
the policy spec, confidence stopping at the first position under the threshold (on a scripted
model, and on the real tiny pair against a recomputation from scratch), the heuristic schedule
as a recurrence over the real rounds, and greedy losslessness for every drafter and policy in
every in-process runtime that runs it, with the runtimes that cannot run one saying why.
llama-server's policies are tested with the real server in tests/test_llama_server.py, the
sampled distribution under confidence stopping in tests/test_sampling_distribution.py."""

from __future__ import annotations

import itertools

import pytest
import torch

from spec_harness.core.config import DraftPolicy, GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.core.errors import HarnessError
from spec_harness.core.results import make_row
from spec_harness.core.timing import PhaseTimer
from spec_harness.runtimes.loop import DraftModel, Model, feed_prompt

PROMPT = "one two three four, one two three four, one two three"
GREEDY = SamplingParams()


def test_policy_spec():
    assert DraftPolicy.parse("fixed") == DraftPolicy("fixed") and DraftPolicy.parse("heuristic") == DraftPolicy("heuristic")
    assert DraftPolicy.parse("confidence:0.4") == DraftPolicy("confidence", 0.4)
    assert DraftPolicy.parse("library-default").library_default and DraftPolicy.parse("confidence:0.4").confidence == 0.4
    assert DraftPolicy.parse("heuristic").confidence is None and not DraftPolicy.parse("fixed").library_default
    for text in ("fixed", "heuristic", "library-default", "confidence:0.4", "confidence:0.05", "confidence:0.123456789"):
        assert str(DraftPolicy.parse(text)) == text  # rows and run.json carry the flag's text
        assert str(GenerationSettings(draft_policy=text).draft_policy) == text
    for bad in ("confidence", "confidence:0", "confidence:1", "confidence:x", "dynamic", "fixed:2"):
        with pytest.raises(HarnessError, match="--draft-policy"):
            GenerationSettings(draft_policy=bad)
    assert GenerationSettings(gamma=5, draft_policy="confidence:0.4").gamma_max == 5
    assert GenerationSettings(gamma=5, draft_policy="library-default").gamma_max is None


class Scripted(Model):
    """A model whose next-token distribution at cache length L puts probability conf[L] on token
    L % vocab (the rest spread evenly): the confidence of each draft position is known."""

    vocab = 4

    def __init__(self, conf: dict[int, float]):
        self.conf, self.n = conf, 0

    def forward(self, ids, n_logits):
        self.n += len(ids)
        p = self.conf.get(self.n, 0.9)
        probs = torch.full((1, self.vocab), (1 - p) / (self.vocab - 1))
        probs[0, self.n % self.vocab] = p
        return probs.log()

    def crop(self, length):
        self.n = min(self.n, length)

    def reset(self):
        self.n = 0

    def __len__(self):
        return self.n


@pytest.mark.parametrize("stop_at", [0, 1, 3, 5])
def test_confidence_stops_before_the_first_position_under_the_threshold(stop_at):
    seq = [0, 1, 2]
    conf = {3 + i: (0.39 if i == stop_at else 0.41 + 0.01 * i) for i in range(6)}  # position i sees cache 3 + i
    model = Scripted(conf)
    feed_prompt(model, seq)
    draft = DraftModel(model, confidence=0.4).propose(seq, 6, GREEDY, torch.Generator(), PhaseTimer())
    assert draft.tokens == [(3 + i) % 4 for i in range(min(stop_at, 6))]
    assert len(model) == len(seq) + len(draft.tokens)  # the stopping position's pass ran, its token was not fed
    feed_prompt(model, seq)
    assert len(DraftModel(model, confidence=0.38).propose(seq, 6, GREEDY, torch.Generator(), PhaseTimer()).tokens) == 6


@pytest.fixture(scope="module")
def runtimes(tiny_gguf):
    from spec_harness.runtimes.hf import HFRuntime
    from spec_harness.runtimes.llamacpp import LlamaCppRuntime
    from spec_harness.runtimes.llamacpp_native import LlamaCppNativeRuntime
    from spec_harness.runtimes.pytorch import TorchRuntime

    out = {}
    for cls in (TorchRuntime, LlamaCppRuntime, HFRuntime, LlamaCppNativeRuntime):
        rt = cls(RuntimeSettings(device="cpu", n_threads=1, n_ctx=512))
        rt.load(tiny_gguf)
        out[cls.name] = rt
    yield out
    for rt in out.values():
        rt.close()


def expected_drafted(model: Model, seq: list[int], g: int, p_min: float) -> int:
    """From scratch: the draft's greedy continuation of seq, stopped before the first position
    whose top-1 probability is under p_min, at most g."""
    feed_prompt(model, seq)
    ids = [seq[-1]]
    for i in range(g):
        probs = model.forward(ids, 1)[0].float().softmax(-1)
        if float(probs.max()) < p_min:
            return i
        ids = [int(probs.argmax())]
    return g


@pytest.mark.parametrize("name", ["torch", "llamacpp"])
def test_confidence_rounds_equal_a_recomputation_from_scratch(runtimes, name):
    rt = runtimes[name]
    ids = rt.encode(PROMPT)
    gen = GenerationSettings(GREEDY, 6, 40, ignore_eos=True, draft_policy="confidence:0.5")
    g = rt.generate_speculative(ids, gen)
    assert g.token_ids == rt.generate_baseline(ids, gen).token_ids
    done, lengths = 0, []
    with torch.inference_mode():
        for r in g.rounds:
            left = min(gen.gamma, gen.max_new_tokens - done - 1)
            if left > 0:
                lengths.append(r.drafted)
                assert r.drafted == expected_drafted(rt.draft, ids + g.token_ids[:done], left, 0.5), done
            done += r.emitted
    assert 0 in lengths and gen.gamma in lengths and set(lengths) - {0, gen.gamma}  # stopping varied


def heuristic_lengths(rounds, gamma: int, max_new: int, cap: bool) -> list[int]:
    """Hugging Face's schedule replayed over the rounds' outcomes: the length each round may draft."""
    n, done, out = gamma, 0, []
    for r in rounds:
        out.append(max(0, min(n, max_new - done - 1)))
        if r.drafted:
            n = n + 2 if r.accepted == r.drafted else max(1, n - 1)
            n = min(n, gamma) if cap else n
        done += r.emitted
    return out


@pytest.mark.parametrize("name", ["torch", "llamacpp", "hf"])
def test_heuristic_schedule_follows_its_recurrence(runtimes, name):
    rt = runtimes[name]
    ids = rt.encode(PROMPT)
    gen = GenerationSettings(GREEDY, 3, 40, ignore_eos=True, draft_policy="heuristic")
    g = rt.generate_speculative(ids, gen)
    rounds = [r for r in g.rounds]
    # the shared loop caps the schedule at gamma; transformers' own schedule has no maximum
    assert [r.drafted for r in rounds] == heuristic_lengths(rounds, 3, 40, cap=name != "hf")
    assert len({r.drafted for r in rounds}) >= 3  # it moved
    row = make_row({"runtime": name, "mode": "speculative", "pair": "tiny", "prompt_id": "p", "category": "c", "repeat": 0},
                   gen, "cpu", "float32", g)
    longest = max(r.drafted for r in rounds)
    assert row["gamma"] == 3 and row["drafted_histogram"] == [sum(r.drafted == k for r in rounds) for k in range(max(3, longest) + 1)]



def test_transformers_heuristic_passes_gamma_and_the_row_counts_it(tiny_self):
    """Self-drafting accepts everything: transformers' schedule grows 3, 5, 7, ... past gamma (ours
    stays at gamma); the row's histogram reaches the longest round."""
    from spec_harness.runtimes.hf import HFRuntime
    from spec_harness.runtimes.pytorch import TorchRuntime

    gen = GenerationSettings(GREEDY, 3, 40, ignore_eos=True, draft_policy="heuristic")
    lengths = {}
    for cls in (HFRuntime, TorchRuntime):
        rt = cls(RuntimeSettings(device="cpu"))
        rt.load(tiny_self)
        g = rt.generate_speculative(rt.encode(PROMPT), gen)
        lengths[cls.name] = [r.drafted for r in g.rounds]
        row = make_row({"runtime": cls.name, "mode": "speculative", "pair": "s", "prompt_id": "p", "category": "c",
                        "repeat": 0}, gen, "cpu", "float32", g)
        assert len(row["drafted_histogram"]) == max(3, max(lengths[cls.name])) + 1
        rt.close()
    assert lengths["hf"][:4] == [3, 5, 7, 9] and set(lengths["torch"][:-2]) == {3}


POLICIES = ["fixed", "confidence:0.5", "heuristic", "library-default"]
DRAFTERS = ["model", "ngram", "ngram:1,3"]
# (runtime, policy, drafter) each runtime runs; everything else must be skipped with a reason
RUNS = {
    "torch": {(p, d) for p in POLICIES[:3] for d in DRAFTERS} - {("confidence:0.5", "ngram"), ("confidence:0.5", "ngram:1,3")},
    "hf": {(p, "model") for p in POLICIES} | {("fixed", d) for d in DRAFTERS},
    "llamacpp-native": {("fixed", d) for d in DRAFTERS},
}
RUNS["llamacpp"] = RUNS["torch"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["torch", "llamacpp", "hf", "llamacpp-native"])
def test_greedy_is_lossless_for_every_drafter_and_policy_a_runtime_runs(runtimes, name):
    rt = runtimes[name]
    ids = rt.encode(PROMPT)
    base = rt.generate_baseline(ids, GenerationSettings(GREEDY, 4, 32, ignore_eos=True))
    ran = set()
    for policy, drafter in itertools.product(POLICIES, DRAFTERS):
        gen = GenerationSettings(GREEDY, 4, 32, ignore_eos=True, draft_policy=policy, drafter=drafter)
        if rt.supports(gen):  # a reason: the runner writes it as a "skipped" row
            continue
        g = rt.generate_speculative(ids, gen)
        assert g.token_ids == base.token_ids, (policy, drafter)
        assert sum(r.emitted for r in g.rounds) == 32 and g.phases.draft_s is not None and g.phases.draft_s > 0
        ran.add((policy, drafter))
    assert ran == RUNS[name]
