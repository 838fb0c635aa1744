"""Speculative sampling leaves the target's distribution unchanged (Leviathan et al., Theorem 1).

On the 8-id `micro` pair, the exact target distribution of the first three tokens is computed by
enumeration (8^3 sequences); N speculative samples (one seed each) are compared with it by a
chi-square goodness-of-fit test. The threshold p < 1e-4 gives a false-failure rate below 1e-3.
The same test must reject a deliberately wrong rule ("always accept the draft").
"""


import pytest
import torch

from spec_harness.core import sampling
from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams

N = 3000
PROMPT = [1, 2, 3]
P_THRESHOLD = 1e-4


@pytest.fixture(scope="module")
def micro_rt():
    from spec_harness.models.tiny import ensure_pair
    from spec_harness.core.config import PairSpec
    from spec_harness.runtimes.pytorch import TorchRuntime

    t, d = ensure_pair("micro")
    rt = TorchRuntime(RuntimeSettings(device="cpu"))
    rt.load(PairSpec("micro", str(t), str(d)))
    return rt


def exact_target_distribution(model, s: SamplingParams) -> dict[tuple, float]:
    """P(x1, x2, x3 | PROMPT) under the target with the sampling transform, by enumeration."""
    V = 8
    probs = {}
    with torch.inference_mode():
        def step(prefix):
            logits = model(input_ids=torch.tensor([PROMPT + list(prefix)])).logits[0, -1, :V]
            return sampling.probs_from_logits(logits[None], s)[0]

        p1 = step(())
        for a in range(V):
            p2 = step((a,))
            for b in range(V):
                p3 = step((a, b))
                for c in range(V):
                    probs[(a, b, c)] = float(p1[a] * p2[b] * p3[c])
    return probs


def chi_square_p(samples: list[tuple], probs: dict[tuple, float]) -> float:
    from scipy.stats import chi2

    counts = {}
    for x in samples:
        counts[x] = counts.get(x, 0) + 1
    n = len(samples)
    obs, exp, rest_o, rest_e = [], [], 0, 0.0
    for x, p in probs.items():  # cells with expected count < 5 are pooled into one
        if n * p >= 5:
            obs.append(counts.get(x, 0))
            exp.append(n * p)
        else:
            rest_o += counts.get(x, 0)
            rest_e += n * p
    if rest_e > 0:
        obs.append(rest_o)
        exp.append(rest_e)
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
    return float(chi2.sf(stat, len(obs) - 1))


def speculative_samples(rt, s: SamplingParams, gamma: int, drafter: str = "model", policy: str = "fixed") -> list[tuple]:
    out = []
    for seed in range(N):
        g = rt.generate_speculative(PROMPT, GenerationSettings(s, gamma=gamma, max_new_tokens=3, seed=seed, ignore_eos=True,
                                                               drafter=drafter, draft_policy=policy))
        out.append(tuple(g.token_ids))
    return out


S = SamplingParams(temperature=1.0)


@pytest.mark.slow
def test_speculative_sampling_matches_target_distribution(micro_rt):
    probs = exact_target_distribution(micro_rt.target.model, S)
    samples = speculative_samples(micro_rt, S, gamma=2)
    assert chi_square_p(samples, probs) > P_THRESHOLD


@pytest.mark.slow
def test_prompt_lookup_drafting_keeps_the_target_distribution(micro_rt):
    """The n-gram drafter's q is a point mass on each proposed token (runtimes/ngram.py)."""
    probs = exact_target_distribution(micro_rt.target.model, S)
    samples = speculative_samples(micro_rt, S, gamma=2, drafter="ngram:1")
    assert chi_square_p(samples, probs) > P_THRESHOLD
    drafted = [r for seed in range(200) for r in micro_rt.generate_speculative(
        PROMPT, GenerationSettings(S, gamma=2, max_new_tokens=3, seed=seed, ignore_eos=True, drafter="ngram:1")).rounds
        if r.drafted]
    assert len(drafted) > 50 and 0 < sum(r.accepted for r in drafted) < sum(r.drafted for r in drafted)  # exercised


@pytest.mark.slow
def test_confidence_stopping_keeps_the_target_distribution(micro_rt):
    """Stopping depends on the draft's distribution at each position (runtimes/loop.py), which
    depends only on the tokens before it: every drafted position keeps Algorithm 1's guarantee.
    At 0.35 about 60 % of the micro draft's positions fall under the threshold."""
    probs = exact_target_distribution(micro_rt.target.model, S)
    samples = speculative_samples(micro_rt, S, gamma=2, policy="confidence:0.35")
    assert chi_square_p(samples, probs) > P_THRESHOLD
    cut = set()  # (drafts allowed, drafted) of rounds that could draft
    for seed in range(200):
        done = 0
        for r in micro_rt.generate_speculative(PROMPT, GenerationSettings(
                S, gamma=2, max_new_tokens=3, seed=seed, ignore_eos=True, draft_policy="confidence:0.35")).rounds:
            allowed = min(2, 3 - done - 1)
            cut |= {(allowed, r.drafted)} if allowed else set()
            done += r.emitted
    assert {(2, 1), (2, 2), (1, 0), (1, 1)} <= cut  # it stopped at each position, and ran through


@pytest.mark.slow
def test_wrong_rule_always_accept_is_detected(micro_rt, monkeypatch):
    def always_accept(draft_ids, q, p, s, generator):
        g = draft_ids.shape[0]
        return g, int(sampling.sample(p[g:], s, generator)[0])

    monkeypatch.setattr(sampling, "accept_sampled", always_accept)
    probs = exact_target_distribution(micro_rt.target.model, S)
    samples = speculative_samples(micro_rt, S, gamma=2)
    assert chi_square_p(samples, probs) < P_THRESHOLD


def test_micro_pair_disagrees_often_enough(micro_rt):
    """The test above is only meaningful if the draft's q differs from the target's p."""
    rounds = []
    for seed in range(50):
        g = micro_rt.generate_speculative(PROMPT, GenerationSettings(S, gamma=2, max_new_tokens=3, seed=seed, ignore_eos=True))
        rounds += [r for r in g.rounds if r.drafted]
    rate = sum(r.accepted for r in rounds) / sum(r.drafted for r in rounds)
    assert 0.2 < rate < 0.9, rate
