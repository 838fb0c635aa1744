"""The sampler's fast path (core.sampling.nucleus: top-k candidates, widened for top-p) against
the sort-based reference (_probs_sorted): the same support and probabilities within float32's
rounding on many rows; the reference against the sampler as it was before (a full float32 sort,
its float32 softmax's error bound apart, whatever the SIMD width); the draws."""

import itertools
import math

import pytest
import torch

from spec_harness.core import sampling
from spec_harness.core.config import SamplingParams
from spec_harness.harness.bench_sampling import probs_before  # the sampler before the fast path
from tests.numerics import U32, softmax_rtol

V = 49152  # SmolLM2's vocabulary
TEMPERATURES = (0.3, 0.7, 1.5)
TOP_PS = (0.5, 0.9, 0.99, 1.0)
TOP_KS = (0, 1, 20, 5000)


def lm_rows(vocab: int, seed: int) -> torch.Tensor:
    """[9, vocab] logit rows: Zipf-like (an LM's shape, flat to peaked), with ties, flat, peaked,
    and with -inf entries (a draft vocabulary placed in the target's, as EAGLE-3's head is)."""
    g = torch.Generator().manual_seed(seed)
    ranks = torch.arange(1, vocab + 1, dtype=torch.float32)
    rows = []
    for scale in (0.5, 1.0, 2.0, 3.3):
        row = -scale * ranks.log() + torch.randn(vocab, generator=g) * 0.5
        rows.append(row[torch.randperm(vocab, generator=g)])
    rows.append(torch.randint(0, 6, (vocab,), generator=g).float())  # ties everywhere, at every boundary
    rows.append((-1.0 * ranks.log()).round()[torch.randperm(vocab, generator=g)])  # Zipf-like, ties in the tail
    rows.append(torch.randn(vocab, generator=g) * 0.01)  # flat: the nucleus is most of the vocabulary
    peaked = torch.randn(vocab, generator=g)
    peaked[int(torch.randint(vocab, (1,), generator=g))] += 30.0
    rows.append(peaked)
    masked = -1.5 * ranks.log() + torch.randn(vocab, generator=g)
    masked[torch.rand(vocab, generator=g) < 0.3] = float("-inf")
    rows.append(masked[torch.randperm(vocab, generator=g)])
    return torch.stack(rows)


def rounding_rtol(logits: torch.Tensor, s: SamplingParams) -> torch.Tensor:
    """[N, 1]: how far, relative, two float64 softmaxes of the same rows may be apart once each is
    rounded to float32 (u each), where one path divides by the temperature in float64 (the fast
    path's quick rows) and the other in float32 (u |x / T| in each exponent, twice)."""
    x = (logits.float() / s.temperature).abs()
    return 2 * U32 * (1 + 2 * x.masked_fill(x.isinf(), 0).amax(-1, keepdim=True))


def mismatch(fast: torch.Tensor, ref: torch.Tensor, rtol, floor: float = 0.0) -> str:
    """'' when fast and ref [N, V] have the same support (tokens above floor) and each probability
    within rtol of ref's, relative (rtol a number or [N, 1]), else why."""
    support = (fast > floor) != (ref > floor)
    if support.any():
        return f"support differs in rows {support.any(-1).nonzero().flatten().tolist()} ({int(support.sum())} tokens)"
    over = ((fast - ref).abs() / (rtol * ref)).masked_fill(ref <= floor, 0)
    worst = float(over.max())
    return f"probabilities differ by {worst:.1f}x the tolerance" if worst > 1 else ""


SETTINGS = [SamplingParams(temperature=t, top_p=p, top_k=k) for t, p, k in itertools.product(TEMPERATURES, TOP_PS, TOP_KS)]


@pytest.mark.parametrize("vocab", [V, 300, 10])
def test_fast_distribution_equals_the_reference(vocab):
    """Every setting of the grid on every kind of row, all rows of a setting in one batched call."""
    rows = torch.cat([lm_rows(vocab, seed) for seed in range(2)])
    bad = []
    for s in SETTINGS:
        why = mismatch(sampling.probs_from_logits(rows, s), sampling._probs_sorted(rows, s), rounding_rtol(rows, s))
        if why:
            bad.append(f"{s}: {why}")
    assert not bad, bad


def test_one_row_at_a_time_equals_the_batch():
    """A verify pass's rows together (some settled by 64 candidates, some widened, one for the
    reference) give what each row gives alone."""
    rows = lm_rows(V, 7)
    s = SamplingParams(temperature=0.7, top_p=0.99)
    batch = sampling.probs_from_logits(rows, s)
    for i in range(rows.shape[0]):
        row = rows[i:i + 1]
        assert not mismatch(batch[i:i + 1], sampling.probs_from_logits(row, s), rounding_rtol(row, s)), i


def nucleus_row(size: int, vocab: int = V, seed: int = 0) -> torch.Tensor:
    """[1, vocab] logits whose 0.9-nucleus at temperature 1 holds about `size` tokens."""
    g = torch.Generator().manual_seed(seed)
    row = torch.randn(vocab, generator=g) * 0.1 - 12.0
    row[torch.randperm(vocab, generator=g)[: size + size // 8]] = torch.randn(size + size // 8, generator=g) * 0.1
    return row[None]


@pytest.fixture
def calls(monkeypatch):
    """Counts of torch.topk widths and reference rows the fast path uses."""
    seen = {"topk": [], "reference_rows": 0}
    topk, ref = torch.topk, sampling._probs_sorted

    def spy_topk(x, k, *a, **kw):
        seen["topk"].append(k)
        return topk(x, k, *a, **kw)

    def spy_ref(logits, s):
        seen["reference_rows"] += logits.shape[0]
        return ref(logits, s)

    monkeypatch.setattr(sampling.torch, "topk", spy_topk)
    monkeypatch.setattr(sampling, "_probs_sorted", spy_ref)
    yield seen
    monkeypatch.undo()


def test_a_row_that_needs_widening_is_exact(calls):
    """A nucleus of ~200 tokens: the 64 candidates do not hold 0.9, the next 512 do."""
    s = SamplingParams(temperature=1.0, top_p=0.9)
    row = nucleus_row(200)
    fast = sampling.probs_from_logits(row, s)
    assert calls["topk"] == [sampling.CANDIDATES, sampling.CANDIDATES * sampling.WIDEN] and calls["reference_rows"] == 0
    assert 64 < int((fast > 0).sum()) <= 512
    assert not mismatch(fast, sampling._probs_sorted(row, s), rounding_rtol(row, s))


def test_a_flat_row_goes_to_the_reference_and_is_exact(calls):
    """Flat logits at top-p 0.99: the nucleus is most of the vocabulary (widened, then sorted)."""
    s = SamplingParams(temperature=1.0, top_p=0.99)
    row = torch.randn(1, V, generator=torch.Generator().manual_seed(3)) * 0.01
    fast = sampling.probs_from_logits(row, s)
    assert calls["reference_rows"] == 1 and int((fast > 0).sum()) > V // 2
    assert not mismatch(fast, sampling._probs_sorted(row, s), rounding_rtol(row, s))


def test_a_boundary_within_rounding_goes_to_the_reference(calls):
    """Masses 0.5, 0.25, 0.25 at top-p 0.5: the second token's mass before is exactly top_p (dropped)."""
    row = torch.tensor([[0.5, 0.25, 0.25] + [0.0] * 97]).clamp_min(1e-30).log()
    row[0, 3:] = float("-inf")
    s = SamplingParams(temperature=1.0, top_p=0.5)
    fast = sampling.probs_from_logits(row, s)
    assert calls["reference_rows"] == 1 and not mismatch(fast, sampling._probs_sorted(row, s), rounding_rtol(row, s))


def test_ties_at_the_boundary_keep_every_tied_token():
    """Four equal tokens at top-p 0.5: the first two hold 0.5, the tie keeps all four (as top-k does)."""
    row = torch.tensor([[2.0, 2.0, 2.0, 2.0, 0.0, -1.0]])
    for s in (SamplingParams(temperature=1.0, top_p=0.3), SamplingParams(temperature=1.0, top_k=2)):
        for fn in (sampling.probs_from_logits, sampling._probs_sorted):
            assert ((fn(row, s)[0] > 0).tolist() == [True] * 4 + [False] * 2), (s, fn)


def against_reference(logits: torch.Tensor, s: SamplingParams) -> str:
    """mismatch of the fast path against the reference, as the tests above compare them."""
    return mismatch(sampling.probs_from_logits(logits, s), sampling._probs_sorted(logits, s), rounding_rtol(logits, s))


def test_the_comparison_catches_a_wrong_rule(monkeypatch):
    """The check above must be able to fail: a fast path that trusts 64 candidates without
    widening, one that drops the ties at the boundary, top-p before top-k, and a temperature 1 %
    off all differ."""
    rows = torch.cat([lm_rows(V, 0), nucleus_row(200)])
    s = SamplingParams(temperature=1.0, top_p=0.9)
    settle, settle_rows = sampling._settle, sampling._settle_rows
    tied, s_tied = torch.tensor([[2.0, 2.0, 2.0, 2.0, 0.0, -1.0]]), SamplingParams(temperature=1.0, top_p=0.3)
    full = SamplingParams(temperature=1.0)
    warmer = sampling.probs_from_logits(rows, SamplingParams(temperature=1.01))
    assert "probabilities differ" in mismatch(warmer, sampling._probs_sorted(rows, full), rounding_rtol(rows, full))

    def fewer(vals, total, top_p, vocab, temperature=1.0):  # the quick path keeping one token too few
        rows = settle_rows(vals, total, top_p, vocab, temperature)
        return None if rows is None else [[x / sum(r[:-1]) for x in r[:-1]] if len(r) > 1 else r for r in rows]

    monkeypatch.setattr(sampling, "_settle_rows", fewer)
    assert "support differs" in against_reference(tied, s_tied)
    monkeypatch.setattr(sampling, "_settle_rows", lambda *a: None)  # the general path from here

    def no_widening(vals, total, top_p, complete):
        keep, settled, edge = settle(vals, total, top_p, complete)
        return keep, torch.ones_like(settled), edge

    monkeypatch.setattr(sampling, "_settle", no_widening)
    assert "support differs" in against_reference(rows, s)

    def prefix_only(vals, total, top_p, complete):  # the tokens tied with the last kept one dropped
        keep, settled, edge = settle(vals, total, top_p, complete)
        w = (vals.double() - vals[:, :1].double()).exp()
        p = w / (w.sum(-1, keepdim=True) if total is None else total)
        return keep & ((p.cumsum(-1) - p) < top_p), settled, edge

    monkeypatch.setattr(sampling, "_settle", prefix_only)
    assert "support differs" in against_reference(tied, s_tied)
    monkeypatch.setattr(sampling, "_settle", settle)
    both = SamplingParams(temperature=1.0, top_p=0.5, top_k=20)
    p_first = sampling.probs_from_logits(sampling.probs_from_logits(rows, SamplingParams(temperature=1.0, top_p=0.5))
                                         .log(), SamplingParams(temperature=1.0, top_k=20))
    assert mismatch(p_first, sampling._probs_sorted(rows, both), rounding_rtol(rows, both))


def exact_boundary_gap(row: torch.Tensor, s: SamplingParams) -> float:
    """How close, in float64, the nucleus boundary of one row [V] is to top_p (inf without top-p)."""
    if s.top_p >= 1:
        return float("inf")
    x = row.double() / s.temperature
    if s.top_k and s.top_k < x.shape[0]:
        x = x.masked_fill(x < torch.topk(x, s.top_k).values[-1], float("-inf"))
    p = x.sort(descending=True).values.softmax(-1)
    before = p.cumsum(-1) - p
    return float((before[p > 0] - s.top_p).abs().min())


# The sampler before normalised in float32: its probabilities above FLOOR (float32's exp underflows
# where float64's gives ~1e-45) are those of logits at most -log(FLOOR) nats below the largest, each
# within softmax_rtol of the reference's float64 softmax, whatever the SIMD width summed it.
FLOOR = 1e-30
BEFORE_RTOL = softmax_rtol(V, -math.log(FLOOR))
# Its mass before a token is off by at most its probabilities' relative error (the exponent's
# rounding adds u times the mean distance below the largest, at most log V), plus 2 u: the float64
# cumsum rounded to float32, and the subtraction of the token's own probability.
BEFORE_GAP = softmax_rtol(V, math.log(V)) + 2 * U32


def test_the_reference_is_the_sampler_as_it_was():
    """Rows without ties, whose boundary is not within float32's rounding of top_p (BEFORE_GAP):
    the reference keeps exactly the tokens the sampler kept before the fast path, and their
    probabilities within that sampler's float32 error; a temperature 1 % off is well beyond it."""
    rows = torch.cat([lm_rows(V, seed)[[0, 1, 2, 3, 7, 8]] for seed in range(2)])
    checked = 0
    for s in SETTINGS:
        for row in rows:
            if exact_boundary_gap(row, s) < BEFORE_GAP:
                continue
            assert not mismatch(probs_before(row[None], s), sampling._probs_sorted(row[None], s), BEFORE_RTOL, FLOOR), s
            checked += 1
    assert checked > 0.5 * len(SETTINGS) * rows.shape[0], checked
    s = SamplingParams(temperature=1.5)
    warmer = probs_before(rows, SamplingParams(temperature=1.5 * 1.01))
    assert "probabilities differ" in mismatch(warmer, sampling._probs_sorted(rows, s), BEFORE_RTOL, FLOOR)


def test_draws_follow_the_distribution_and_never_a_zero():
    from scipy.stats import chisquare

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0]])
    g = torch.Generator().manual_seed(0)
    n = 20000
    draws = torch.cat([sampling._draw(probs.expand(1000, -1), g) for _ in range(n // 1000)])
    counts = torch.bincount(draws, minlength=6)
    assert counts[[0, 2, 5]].sum() == 0
    assert chisquare(counts[[1, 3, 4]].numpy(), (probs[0, [1, 3, 4]] * n).numpy()).pvalue > 1e-4
    # unnormalised weights (the residual), and a nucleus's candidate columns padded with zeros
    assert set(sampling._draw(torch.tensor([[0.0, 3.0, 0.0]]).expand(200, -1), g).tolist()) == {1}
    nuc = sampling.Nucleus(torch.tensor([[7, 2, 0, 0]]), torch.tensor([[0.25, 0.75, 0.0, 0.0]]), 9)
    got = torch.cat([nuc.sample(g) for _ in range(2000)])
    assert set(got.tolist()) == {7, 2} and 0.7 < float((got == 2).float().mean()) < 0.8
    assert nuc.dense().tolist() == [[0.0, 0.0, 0.75, 0.0, 0.0, 0.0, 0.0, 0.25, 0.0]]


def test_draft_and_next_token_draw_from_the_nucleus():
    rows = lm_rows(V, 1)
    s = SamplingParams(temperature=0.7, top_p=0.9)
    g = torch.Generator().manual_seed(0)
    for row in rows:
        p = sampling._probs_sorted(row[None], s)
        t, q = sampling.draft_token(row[None], s, g)
        assert not mismatch(q.dense(), p, rounding_rtol(row[None], s))  # q: the nucleus it was drawn from
        assert p[0, t] > 0
        assert p[0, sampling.next_token(row, s, g)] > 0


def test_greedy_is_unchanged():
    rows = lm_rows(V, 2)
    greedy = SamplingParams()
    assert (sampling.probs_from_logits(rows, greedy).argmax(-1) == rows.argmax(-1)).all()
    assert sampling.draft_token(rows[:1], greedy, None) == (int(rows[0].argmax()), None)
    assert sampling.next_token(rows[3], greedy, None) == int(rows[3].argmax())
