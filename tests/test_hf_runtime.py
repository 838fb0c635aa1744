"""The `hf` runtime on the tiny pair (CPU, seconds): correctness against its own baseline and against
the `torch` runtime, round counts, the phase identity, and that its hooks never outlive a call."""

from __future__ import annotations

import sys

import pytest

from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.core.errors import RuntimeUnavailable
from tests.phases import check_phases

PROMPTS = ["The quick brown fox", "Speculative decoding is", "def fib(n):"]
GREEDY = SamplingParams()
SAMPLED = SamplingParams(temperature=0.8, top_p=0.9, top_k=20)
NS = 1e-9


def settings(gamma=4, n=20, sampling=GREEDY, seed=0, ignore_eos=True) -> GenerationSettings:
    return GenerationSettings(sampling, gamma, n, seed, ignore_eos)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, and much faster than two on a busy machine."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def hf_rt(tiny_pair):
    from spec_harness.runtimes.hf import HFRuntime

    rt = HFRuntime(RuntimeSettings(device="cpu"))
    rt.load(tiny_pair)
    yield rt
    rt.close()


def counts(g) -> list[tuple[int, int, int]]:
    return [(r.drafted, r.accepted, r.emitted) for r in g.rounds]


def test_registered():
    from spec_harness import runtimes
    from spec_harness.runtimes.hf import HFRuntime

    assert runtimes.parse_names("torch,hf") == ["torch", "hf"]
    assert runtimes.get("hf") is HFRuntime
    everything = runtimes.parse_names("all")  # off Apple Silicon, mlx only when named
    assert {"torch", "hf", "vllm", "llama-server"} <= set(everything) and ("mlx" in everything) == (sys.platform == "darwin")
    assert runtimes.parse_names("mlx") == ["mlx"]


@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_greedy_matches_baseline_and_torch(hf_rt, torch_rt, gamma):
    """Speculative == target-only in hf, and hf == torch token for token and round for round."""
    for prompt in PROMPTS:
        ids = hf_rt.encode(prompt)
        assert ids == torch_rt.encode(prompt)
        gen = settings(gamma)
        spec, base = hf_rt.generate_speculative(ids, gen), hf_rt.generate_baseline(ids, gen)
        t_spec = torch_rt.generate_speculative(ids, gen)
        assert len(spec.token_ids) == gen.max_new_tokens
        assert spec.token_ids == base.token_ids == t_spec.token_ids
        assert base.token_ids == torch_rt.generate_baseline(ids, gen).token_ids
        assert counts(spec) == counts(t_spec)  # same drafts, same acceptances


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_rounds_add_up(hf_rt, sampling):
    gen = settings(gamma=3, sampling=sampling)
    ids = hf_rt.encode(PROMPTS[0])
    spec, base = hf_rt.generate_speculative(ids, gen), hf_rt.generate_baseline(ids, gen)
    for g in (spec, base):
        assert sum(r.emitted for r in g.rounds) == len(g.token_ids) == gen.max_new_tokens
    assert all(0 <= r.accepted <= r.drafted <= gen.gamma and r.emitted == r.accepted + 1 for r in spec.rounds)
    left = gen.max_new_tokens
    for r in spec.rounds:  # never drafts past the end: min(gamma, tokens left - 1), as torch
        assert r.drafted == min(gen.gamma, left - 1)
        left -= r.emitted
    assert counts(base) == [(0, 0, 1)] * gen.max_new_tokens


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_phase_identity(hf_rt, sampling):
    """Also with logits processors run over gamma+1 positions per verification (sampled)."""
    ids = hf_rt.encode(PROMPTS[1])
    gen = settings(gamma=4, sampling=sampling)
    check_phases(lambda: hf_rt.generate_speculative(ids, gen), speculative=True)
    check_phases(lambda: hf_rt.generate_baseline(ids, gen), speculative=False)


def test_sampling_is_seeded(hf_rt):
    ids = hf_rt.encode(PROMPTS[2])
    a, b = (hf_rt.generate_speculative(ids, settings(sampling=SAMPLED, seed=7)) for _ in range(2))
    assert a.token_ids == b.token_ids


def test_eos_rule_matches_torch(hf_rt, torch_rt, monkeypatch):
    """Stop right after EOS, or run to max_new_tokens with ignore_eos, in both runtimes alike."""
    ids = hf_rt.encode(PROMPTS[0])
    full = hf_rt.generate_baseline(ids, settings(n=16)).token_ids
    eos = full[5]  # pretend a token that occurs mid-output is EOS
    monkeypatch.setattr(hf_rt, "eos_id", eos)
    monkeypatch.setattr(torch_rt, "eos_id", eos)
    stop = full[: full.index(eos) + 1]
    for gen in (settings(n=16, ignore_eos=False), settings(n=16, ignore_eos=True)):
        want = full if gen.ignore_eos else stop
        for g in (hf_rt.generate_speculative(ids, gen), hf_rt.generate_baseline(ids, gen),
                  torch_rt.generate_speculative(ids, gen)):
            assert g.token_ids == want
            assert sum(r.emitted for r in g.rounds) == len(want)


def _clean(rt, saved_config: dict) -> None:
    """No hook, wrapper or generation_config change of the hf runtime is left on either model."""
    for m in (rt.target, rt.draft):
        assert not m._forward_hooks and not m._forward_pre_hooks
        assert not {"_get_candidate_generator", "_get_logits_processor", "_get_stopping_criteria"} & set(vars(m))
    assert {k: getattr(rt.draft.generation_config, k) for k in saved_config} == saved_config


def test_hooks_removed_after_call(hf_rt):
    saved = {k: getattr(hf_rt.draft.generation_config, k) for k in ("num_assistant_tokens", "assistant_confidence_threshold")}
    ids = hf_rt.encode(PROMPTS[0])
    hf_rt.generate_speculative(ids, settings(n=6))
    hf_rt.generate_baseline(ids, settings(n=6))
    _clean(hf_rt, saved)


def test_hooks_removed_when_generate_raises(hf_rt, monkeypatch):
    from transformers.generation.candidate_generator import AssistedCandidateGenerator

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    saved = {k: getattr(hf_rt.draft.generation_config, k) for k in ("num_assistant_tokens", "assistant_confidence_threshold")}
    monkeypatch.setattr(AssistedCandidateGenerator, "update_candidate_strategy", boom)
    with pytest.raises(RuntimeError, match="boom"):
        hf_rt.generate_speculative(hf_rt.encode(PROMPTS[0]), settings(n=6))
    _clean(hf_rt, saved)


def test_self_draft_accepts_everything(tiny_pair):
    """--draft self: the calibration case, every draft accepted, same ids as the baseline."""
    from spec_harness.core.config import PairSpec
    from spec_harness.runtimes.hf import HFRuntime

    rt = HFRuntime(RuntimeSettings(device="cpu"))
    rt.load(PairSpec("tiny-self", tiny_pair.target, tiny_pair.target))
    ids, gen = rt.encode(PROMPTS[1]), settings(gamma=3, n=12)
    spec = check_phases(lambda: rt.generate_speculative(ids, gen), speculative=True)
    assert spec.token_ids == rt.generate_baseline(ids, gen).token_ids
    assert all(r.accepted == r.drafted for r in spec.rounds)


def test_missing_seam_says_version(monkeypatch):
    import transformers
    from transformers.generation.utils import GenerationMixin

    from spec_harness.runtimes.hf import require_seams

    require_seams()  # the installed version has them all
    monkeypatch.delattr(GenerationMixin, "_get_candidate_generator")
    with pytest.raises(RuntimeUnavailable, match=f"transformers {transformers.__version__} lacks .*_get_candidate_generator") as e:
        require_seams()
    assert "\n" not in str(e.value)


def test_foreign_logits_processor_refused(hf_rt, monkeypatch):
    """A model generation_config that adds a transform the other runtimes do not apply is refused."""
    monkeypatch.setattr(hf_rt.target.generation_config, "min_p", 0.1, raising=False)
    with pytest.raises(RuntimeUnavailable, match="MinPLogitsWarper"):
        hf_rt.generate_baseline(hf_rt.encode(PROMPTS[0]), settings(n=4, sampling=SAMPLED))


def test_padded_embeddings_declined():
    """Different embedding sizes would switch transformers to another algorithm: declined at load."""
    from spec_harness.models.tiny import ensure_pair
    from spec_harness.core.config import PairSpec
    from spec_harness.runtimes.hf import HFRuntime

    t, d = ensure_pair("tiny-padded")
    with pytest.raises(RuntimeUnavailable, match="embedding rows"):
        HFRuntime(RuntimeSettings(device="cpu")).load(PairSpec("tiny-padded", str(t), str(d)))


def test_timer_begin_end():
    from spec_harness.core.timing import PhaseTimer

    timer = PhaseTimer()
    timer.start()
    timer.begin_round()
    timer.begin("draft")
    with pytest.raises(RuntimeError):
        timer.begin("verify")  # one phase at a time
    timer.end()
    rt = timer.end_round()
    total = timer.stop()
    assert rt.ns["draft"] == total.ns["draft"] > 0
    assert rt.unaccounted_ns >= 0 and total.unaccounted_ns >= 0
    with pytest.raises(RuntimeError):
        timer.end()


def test_cursor_books_nested_calls_once(monkeypatch):
    """gamma+1 logits-processor calls inside one open sampling phase book that phase once."""
    import itertools

    from spec_harness.core import timing
    from spec_harness.runtimes.hf_hooks import PhaseCursor

    clock = itertools.count(0, 10)  # every clock read advances 10 ns
    monkeypatch.setattr(timing.time, "perf_counter_ns", lambda: next(clock))
    timer = timing.PhaseTimer()
    cursor = PhaseCursor(timer)
    timer.start()  # t=0
    cursor.switch("verify")  # t=10
    cursor.switch("sampling")  # t=20 (verify closed), t=30 (sampling opened)
    for _ in range(5):
        cursor.switch("sampling")  # already open: no clock read, nothing booked
    cursor.switch(None)  # t=40
    total = timer.stop()  # t=50
    assert total.ns["verify"] == 10 and total.ns["sampling"] == 10
    assert total.wall_ns == 50 and total.unaccounted_ns == 30


def test_library_default_is_transformers_own_and_confidence_maps_to_its_threshold(hf_rt):
    """library-default sets nothing on the assistant: transformers' defaults (20 tokens, stopped
    below 0.4) are what the candidate generator took, and the row's gamma is its 20."""
    from spec_harness.core.results import make_row

    ids = hf_rt.encode(PROMPTS[1])
    lib = GenerationSettings(GREEDY, 4, 30, 0, True, "library-default")
    g = hf_rt.generate_speculative(ids, lib)
    assert g.extra["draft_settings"] == {"num_assistant_tokens": 20, "num_assistant_tokens_schedule": "constant",
                                         "assistant_confidence_threshold": 0.4}
    assert g.token_ids == hf_rt.generate_baseline(ids, lib).token_ids
    assert max(r.drafted for r in g.rounds) > 4 and len({r.drafted for r in g.rounds}) > 2  # not our gamma 4
    identity = {"runtime": "hf", "mode": "speculative", "pair": "tiny", "prompt_id": "p", "category": "c", "repeat": 0}
    row = make_row(identity, lib, "cpu", "float32", g)
    assert row["gamma"] == 20 and len(row["drafted_histogram"]) == 21 and row["mean_drafted"] < 20
    conf = hf_rt.generate_speculative(ids, GenerationSettings(GREEDY, 6, 30, 0, True, "confidence:0.5"))
    assert conf.extra["draft_settings"]["assistant_confidence_threshold"] == 0.5
    assert hf_rt.draft.generation_config.assistant_confidence_threshold != 0.5  # restored after the call


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_prompt_lookup_is_transformers_own(hf_rt, sampling):
    ids = hf_rt.encode("one two three four, one two three four, one two three")
    gen = GenerationSettings(sampling, 4, 30, 0, True, drafter="ngram:2,3")
    g = check_phases(lambda: hf_rt.generate_speculative(ids, gen), speculative=True)
    assert g.extra["draft_settings"] == {"num_output_tokens": 3, "max_matching_ngram_size": 2}
    assert sum(r.emitted for r in g.rounds) == len(g.token_ids) == 30
    assert max(r.drafted for r in g.rounds) == 3 and g.phases.draft_s > 0  # the lookup is the draft phase
    assert hf_rt.verify_rule(gen) == ("greedy-match" if sampling.greedy else "sample-match")
    if sampling.greedy:
        assert g.token_ids == hf_rt.generate_baseline(ids, gen).token_ids
