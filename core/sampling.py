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

The transform (temperature, then top-k, then top-p) is defined by `_probs_sorted`, a full sort of
each row; `nucleus` gives the same distribution without one, as a `Nucleus` (each row's candidate
ids and their probabilities; `dense()` for [N, V]):
- top-p without top-k, the common case (`_quick`): torch.topk(CANDIDATES) on the raw logits and
  the row's mass, two passes over the vocabulary; the nucleus among the candidates on Python floats
  (`_settle_rows`: a few tokens a row as LM distributions go, where each tensor op would cost more
  than the arithmetic).
- otherwise, or where a row's nucleus is not among its first candidates: top-k's torch.topk(k + 1)
  is the candidate set itself (the extra one shows a tie at the k-th value; such a row, where
  top-k keeps every tied token, goes to the reference); top-p's candidates are widened x WIDEN for
  the rows they do not settle, and the reference takes the rows still unsettled at a quarter of
  the vocabulary (a very flat row). Every row of a call goes through the same batched ops.
A draft token's q is its Nucleus (`draft_token`; `stack` gives a round's, `point_masses` prompt
lookup's), the verify pass's p one Nucleus of k + 1 rows, so the ratio test, the residual
max(0, p - q) (zero wherever p is) and the bonus touch only the candidates (`_accept_rows`).
The nucleus is the smallest prefix of the tokens by descending probability whose mass before each
token is < top_p (at least one token), then every token tied with its least likely token: with
ties at the boundary the kept set does not depend on how a sort orders equal values (a full sort's
order of ties is arbitrary; top-k keeps ties the same way). Masses are float64 in both; a boundary
within EDGE of top_p (a float rounding could decide it) is left to the reference, so both give the
same support. Tokens are drawn by inversion of the CDF over the nucleus's candidates in the order
of their ids (one uniform per row), not by torch.multinomial over all V ids: two runtimes whose
numerics order a near tie differently draw the same token for the same uniform.
Sampled paths run on one torch thread (`one_thread`); greedy paths on the caller's threads.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from spec_harness.core.config import SamplingParams
from spec_harness.core.limits import torch_threads

CANDIDATES = 64  # top-p without top-k: the first candidate set per row
WIDEN = 8  # each retry takes this many times more candidates (64, 512, 4096, then the reference)
EDGE = 1e-6  # a nucleus boundary closer than this to top_p is decided by the reference


def one_thread():
    """torch on one CPU thread for the block, restored afterwards (core.limits.torch_threads).
    Sampled paths run in it: their ops are O(V) at most, where two OpenMP threads save little and,
    on a core shared with other work, wait for each other."""
    return torch_threads(1)


def top_k_masked(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """[N, V] logits with every value below each row's top_k-th at -inf (top_k 0 or >= V: as they are)."""
    if not top_k or top_k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # [N, 1]
    return logits.masked_fill(logits < kth, float("-inf"))


def _probs_sorted(logits: torch.Tensor, s: SamplingParams) -> torch.Tensor:
    """The reference transform, a full sort of each row: [N, V] logits -> [N, V] float32
    probabilities after temperature, top-k, top-p. The fast path (`nucleus`) must equal it; the
    tests compare them. Greedy (temperature 0) gives one-hot rows at the argmax. The masses that
    decide the nucleus are float64 (float32's error, ~1e-5, could move the boundary token), the
    tokens tied with the least likely kept one are kept too (a sort orders ties arbitrarily), and
    the probabilities are normalised in float64 (a float32 softmax of a peaked row drops its many
    small terms against the large one: 3e-6 off at top-k 5000)."""
    logits = logits.float()
    if s.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    logits = top_k_masked(logits / s.temperature, s.top_k)
    if s.top_p < 1.0:
        sorted_logits, _ = torch.sort(logits, dim=-1, descending=True)  # [N, V]
        p = sorted_logits.double().softmax(-1)
        # drop a token when the tokens ranked above it already hold top_p; keep at least one
        drop_sorted = (p.cumsum(-1) - p) >= s.top_p
        least = sorted_logits.masked_fill(drop_sorted, float("inf")).amin(-1, keepdim=True)  # [N, 1]
        logits = logits.masked_fill(logits < least, float("-inf"))
    return _softmax(logits)


def _softmax(x: torch.Tensor) -> torch.Tensor:
    """Float32 probabilities normalised in float64 (rows [N, K])."""
    return x.double().softmax(-1).float()


class Nucleus:
    """Rows of a sampling distribution: ids [N, K] (None: every id, in order) and their float32
    probabilities [N, K], zero outside each row's support (`nucleus`'s result)."""

    __slots__ = ("ids", "probs", "vocab", "rows")

    def __init__(self, ids: Optional[torch.Tensor], probs: torch.Tensor, vocab: int,
                 rows: Optional[list[list[float]]] = None):
        self.ids, self.probs, self.vocab = ids, probs, vocab
        self.rows = rows  # the probabilities as Python floats, where the quick path made them

    def dense(self) -> torch.Tensor:
        """-> [N, V] probabilities (what the accept rule and the residual take)."""
        if self.ids is None:
            return self.probs
        out = torch.zeros(self.probs.shape[0], self.vocab, dtype=self.probs.dtype, device=self.probs.device)
        return out.scatter_add_(1, self.ids, self.probs)  # add: padded columns (prob 0) may repeat an id

    def sample(self, generator: Optional[torch.Generator]) -> torch.Tensor:
        """-> [N] token ids, one draw per row."""
        if self.ids is None:
            return _draw(self.probs, generator)
        return torch.tensor([self.token(i, generator) for i in range(self.probs.shape[0])])

    def __getitem__(self, rows: slice) -> "Nucleus":
        """Some rows of it (p[g:], the bonus row)."""
        return Nucleus(None if self.ids is None else self.ids[rows], self.probs[rows], self.vocab,
                       None if self.rows is None else self.rows[rows])

    def token(self, row: int, generator: Optional[torch.Generator]) -> int:
        """One draw from one row, in the order of the token ids (as a draw over all V ids is: a
        near tie that two runtimes' numerics order differently moves no draw)."""
        if self.ids is None:
            return int(_draw(self.probs[row:row + 1], generator)[0])
        probs = self.rows[row] if self.rows is not None else self.probs[row].tolist()
        return _invert_by_id(self.ids[row].tolist()[: len(probs)], probs, generator)


def _draw(weights: torch.Tensor, generator: Optional[torch.Generator]) -> torch.Tensor:
    """[N, K] non-negative weights (each row's sum > 0, not necessarily 1) -> [N] column indices,
    column j with probability weights[j] / sum, by inverting the float64 CDF with one uniform per
    row. u is in (0, total], and the first column whose CDF reaches u is one where the CDF rises,
    so a zero weight is never drawn."""
    cdf = weights.double().cumsum(-1)  # [N, K]
    r = torch.rand(weights.shape[0], 1, dtype=torch.float64, generator=generator).to(cdf.device)
    u = (1.0 - r) * cdf[:, -1:]  # [N, 1] in (0, total]
    return torch.searchsorted(cdf, u).squeeze(1).clamp_max_(weights.shape[1] - 1)


def _quick(logits: torch.Tensor, s: SamplingParams) -> tuple[Optional[Nucleus], Optional[tuple]]:
    """The common case, top-p without top-k, where every row's nucleus lies among its first
    CANDIDATES tokens: two passes over the vocabulary (topk on the raw logits, whose order is the
    same at any temperature, and the sum of exp((l - max) / T)), the rest on those few tokens.
    -> (the nucleus, or None where a row needs more: then `nucleus` takes its general path from
    the candidates found here, (top raw logits [N, K], ids [N, K]))."""
    V = logits.shape[-1]
    if 0 < s.top_k < V or s.top_p >= 1.0:
        return None, None
    raw = logits if logits.dtype == torch.float32 else logits.float()
    top, ids = torch.topk(raw, min(CANDIDATES, V), dim=-1)  # [N, K]
    total = (raw - top[:, :1]).mul_(1.0 / s.temperature).exp_().sum(-1, keepdim=True, dtype=torch.float64)  # [N, 1]
    rows = _settle_rows(top, total, s.top_p, V, s.temperature)
    if rows is None:
        return None, (top, ids)
    width = max(len(r) for r in rows)
    probs = torch.tensor([r + [0.0] * (width - len(r)) for r in rows], dtype=torch.float32)
    return Nucleus(ids[:, :width], probs, V, rows), None


def _settle_rows(vals: torch.Tensor, total: torch.Tensor, top_p: float, vocab: int,
                 temperature: float = 1.0) -> Optional[list[list[float]]]:
    """_settle for the first candidates of every row at once, on Python floats (a few per row, as
    LM distributions go: each tensor op costs more than the arithmetic here) -> each row's
    nucleus probabilities over its first candidates, or None when some row is not settled among
    them or its boundary is within EDGE of top_p (then `nucleus` widens or refers). total [N, 1]:
    each row's sum of exp((x - max) / T)."""
    rows = []
    for v, z in zip(vals.tolist(), total.squeeze(1).tolist()):
        row = _row_nucleus([x / temperature for x in v] if temperature != 1.0 else v, z, top_p, vocab)
        if row is None:
            return None
        rows.append(row)
    return rows


def _row_nucleus(v: list[float], z: float, top_p: float, vocab: int) -> Optional[list[float]]:
    """One row's nucleus among its K candidates v (descending, at the temperature), z the row's
    mass relative to its largest: the kept probabilities, or None (not settled, or at the edge)."""
    K = len(v)
    w: list[float] = []
    before, n = 0.0, 0
    while n < K and before < top_p:
        if before >= top_p - EDGE:
            return None
        if n == len(w):
            w.append(math.exp(v[n] - v[0]))
        before += w[n] / z
        n += 1
    if (n < K and before <= top_p + EDGE) or (n == K and K < vocab):
        return None  # the first dropped candidate sits at the edge, or more may be needed
    m = n
    while m < K and v[m] == v[n - 1]:  # every candidate tied with the least likely kept one
        m += 1
    if m == K and K < vocab:
        return None  # the ties may go on past the candidates
    kept = [w[j] if j < len(w) else w[n - 1] for j in range(m)]
    norm = math.fsum(kept)
    return [x / norm for x in kept]


def _invert_by_id(ids: list[int], weights: list[float], generator: Optional[torch.Generator]) -> int:
    """A token drawn from weights over ids (a few), inverted in the order of the ids."""
    pairs = sorted(zip(ids, weights))
    return pairs[_invert([w for _, w in pairs], generator)][0]


def _invert(weights: list[float], generator: Optional[torch.Generator]) -> int:
    """_draw for one row of Python floats: the first index whose cumulative weight reaches
    (1 - r) x the total, r one float64 uniform drawn as _draw draws it."""
    r = float(torch.rand(1, 1, dtype=torch.float64, generator=generator))
    u = (1.0 - r) * math.fsum(weights)
    acc = 0.0
    for j, w in enumerate(weights):
        acc += w
        if acc >= u and w > 0:
            return j
    return max(j for j, w in enumerate(weights) if w > 0)


def _settle(vals: torch.Tensor, total: Optional[torch.Tensor], top_p: float, complete: bool):
    """The nucleus among candidates vals [r, K] (descending; vals[:, 0] is the row's largest).
    total [r, 1]: the whole row's sum of exp(x - max), float64 (None: the candidates are the whole
    support, as after top-k). -> (keep [r, K], settled [r], edge [r]): settled when every token of
    the row at least as likely as the least likely kept one is a candidate, edge when a float
    rounding could move the boundary (the row goes to the reference)."""
    v = vals.double()
    w = (v - v[:, :1]).exp_()  # [r, K]
    p = w / (w.sum(-1, keepdim=True) if total is None else total)
    before = p.cumsum(-1) - p  # the mass ranked above each candidate
    n = (before < top_p).sum(-1, keepdim=True)  # [r, 1], >= 1: before[:, 0] is 0 < top_p
    least = vals.gather(1, n - 1)  # [r, 1] the least likely kept value
    keep = vals >= least  # the prefix and every candidate tied with its last
    K = vals.shape[1]
    after = before.gather(1, n.clamp_max(K - 1))  # the first dropped candidate's mass before (n < K)
    edge = (before.gather(1, n - 1) >= top_p - EDGE) | ((n < K) & (after <= top_p + EDGE))
    settled = torch.ones_like(edge) if complete else least > vals[:, -1:]
    return keep, settled.squeeze(1), edge.squeeze(1)


def nucleus(logits: torch.Tensor, s: SamplingParams) -> Nucleus:
    """[N, V] logits -> the sampling distribution of each row (temperature, top-k, top-p; not
    greedy), equal to _probs_sorted's without sorting the vocabulary (the module docstring)."""
    quick, first = _quick(logits, s)
    if quick is not None:
        return quick
    x = logits.float() / s.temperature  # [N, V]
    N, V = x.shape
    k = s.top_k if 0 < s.top_k < V else 0
    if not k and s.top_p >= 1.0:
        return Nucleus(None, _softmax(x), V)
    parts = []  # (rows [r], ids [r, K], probs [r, K]) settled by candidates
    refer = torch.zeros(N, dtype=torch.bool, device=x.device)  # rows the reference decides
    if k:
        vals, ids = torch.topk(x, k + 1, dim=-1) if k + 1 <= V else torch.topk(x, k, dim=-1)
        if vals.shape[1] > k:
            refer |= vals[:, k] == vals[:, k - 1]  # a tie at the k-th value: top-k keeps them all
            vals, ids = vals[:, :k], ids[:, :k]
        keep = torch.ones_like(vals, dtype=torch.bool)
        if s.top_p < 1.0:
            keep, _, edge = _settle(vals, None, s.top_p, complete=True)
            refer |= edge
        parts.append((torch.arange(N, device=x.device), ids, _softmax(vals.masked_fill(~keep, float("-inf")))))
    else:
        vals, ids = (first[0] / s.temperature, first[1]) if first else torch.topk(x, min(CANDIDATES, V), dim=-1)
        total = (x - vals[:, :1]).exp_().sum(-1, keepdim=True, dtype=torch.float64)  # [N, 1]
        rows, K = torch.arange(N, device=x.device), vals.shape[1]
        while True:
            keep, settled, edge = _settle(vals, total, s.top_p, complete=K >= V)
            refer[rows] |= edge
            done = settled & ~edge
            if bool(done.all()):
                parts.append((rows, ids, _softmax(vals.masked_fill(~keep, float("-inf")))))
                break
            if bool(done.any()):
                parts.append((rows[done], ids[done], _softmax(vals[done].masked_fill(~keep[done], float("-inf")))))
            wider = ~settled & ~edge
            if not bool(wider.any()):
                break
            K *= WIDEN
            if K > V // 4:  # a flat row: its full sort is as cheap
                refer[rows[wider]] = True
                break
            rows, total = rows[wider], total[wider]
            vals, ids = torch.topk(x[rows], K, dim=-1)
    if not bool(refer.any()) and len(parts) == 1 and parts[0][0].shape[0] == N:
        return Nucleus(parts[0][1], parts[0][2], V)
    if not bool(refer.any()):  # rows settled at different widths: pad to the widest (prob 0)
        K = max(p[1].shape[1] for p in parts)
        ids = torch.zeros(N, K, dtype=torch.long, device=x.device)
        probs = torch.zeros(N, K, device=x.device)
        for rows, i, pr in parts:
            ids[rows, : i.shape[1]], probs[rows, : i.shape[1]] = i, pr
        return Nucleus(ids, probs, V)
    dense = torch.zeros(N, V, device=x.device)
    for rows, i, pr in parts:
        dense[rows] = torch.zeros(rows.shape[0], V, device=x.device).scatter_(1, i, pr)
    ref = refer.nonzero().squeeze(1)
    dense[ref] = _probs_sorted(logits[ref], s)
    return Nucleus(None, dense, V)


def probs_from_logits(logits: torch.Tensor, s: SamplingParams) -> torch.Tensor:
    """[N, V] logits -> [N, V] float32 probabilities after temperature, top-k, top-p (the same
    distribution as _probs_sorted, without sorting the vocabulary: `nucleus`).

    Greedy (temperature 0) gives one-hot rows at the argmax.
    """
    if s.greedy:
        logits = logits.float()
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    with one_thread():
        return nucleus(logits, s).dense()


def sample(probs, s: SamplingParams, generator: Optional[torch.Generator]) -> torch.Tensor:
    """[N, V] probabilities, or a Nucleus of N rows -> [N] token ids (argmax when greedy)."""
    if isinstance(probs, Nucleus):
        with one_thread():
            return probs.sample(generator)
    if s.greedy:
        return probs.argmax(-1)
    with one_thread():
        return _draw(probs, generator)


def next_token(logits: torch.Tensor, s: SamplingParams, generator: Optional[torch.Generator]) -> int:
    """[V] logits -> one token id (the target-only baseline step)."""
    if s.greedy:
        return int(logits.argmax())
    with one_thread():
        return int(nucleus(logits[None], s).sample(generator)[0])


def draft_token(logits: torch.Tensor, s: SamplingParams, generator: Optional[torch.Generator]) -> tuple[int, Optional[Nucleus]]:
    """One draft position: [1, V] logits -> (token, the q it was sampled from, a Nucleus of one
    row; None when greedy)."""
    if s.greedy:
        return int(logits[0].argmax()), None
    with one_thread():
        nuc = nucleus(logits.cpu(), s)
        return nuc.token(0, generator), nuc


def point_masses(tokens: list[int], vocab: int) -> Nucleus:
    """q of a drafter that proposes without a distribution (prompt lookup): all mass on each token."""
    return Nucleus(torch.tensor(tokens, dtype=torch.long)[:, None], torch.ones(len(tokens), 1), vocab,
                   [[1.0] for _ in tokens])


def stack(qs: list) -> Optional[object]:
    """The q of a round's drafts, one per position: Nuclei of one row each -> one Nucleus of their
    rows; [1, V] tensors -> [k, V]; none -> None."""
    if not qs:
        return None
    if not all(isinstance(q, Nucleus) and q.ids is not None for q in qs):
        return torch.cat([q.dense() if isinstance(q, Nucleus) else q for q in qs])
    width = max(q.probs.shape[1] for q in qs)
    ids = torch.zeros(len(qs), width, dtype=torch.long)
    probs = torch.zeros(len(qs), width)
    for i, q in enumerate(qs):
        ids[i, : q.ids.shape[1]], probs[i, : q.probs.shape[1]] = q.ids[0], q.probs[0]
    rows = [q.rows[0] for q in qs] if all(q.rows is not None for q in qs) else None
    return Nucleus(ids, probs, qs[0].vocab, rows)


def top1_prob(logits: torch.Tensor, q) -> float:
    """The draft's confidence at one position: the top-1 probability of q (a Nucleus or [1, V]),
    the distribution its token is drawn from; when greedy (q None), of softmax(logits [1, V]) at
    temperature 1."""
    if q is None:
        return float(logits.float().softmax(-1).max())
    if isinstance(q, Nucleus):
        return max(q.rows[0]) if q.rows is not None else float(q.probs.max())
    with one_thread():
        return float(q.max())


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
    p,  # [g+1, V] target probabilities, same transform, or their Nucleus
    s: SamplingParams,
    generator: Optional[torch.Generator],
) -> tuple[int, int]:
    """Speculative sampling verification -> (n_accepted, next token: correction or bonus)."""
    with one_thread():
        if isinstance(p, Nucleus) and p.ids is not None:
            return _accept_nucleus(draft_ids, q, p, generator)
        dense = lambda x: x.dense() if isinstance(x, Nucleus) else x  # noqa: E731
        return _accept_sampled(draft_ids, dense(q), dense(p), s, generator)


def _accept_sampled(draft_ids, q, p, s, generator) -> tuple[int, int]:
    g = draft_ids.shape[0]
    idx = torch.arange(g, device=p.device)
    p_d = p[idx, draft_ids]  # [g]
    q_d = q[idx, draft_ids]  # [g]
    r = torch.rand(g, generator=generator, device=p.device)  # [g]
    rejected = (r * q_d > p_d).nonzero()  # r > p/q, written without dividing by q
    if not rejected.numel():
        return g, int(sample(p[g:], s, generator)[0])  # all accepted: bonus from the last row
    k = int(rejected[0])
    residual = (p[k] - q[k]).clamp_min_(0)  # [V], drawn from unnormalised
    if not residual.sum() > 0:  # p == q up to rounding: the residual is undefined, p itself is exact
        residual = p[k]
    return k, int(_draw(residual[None], generator)[0])


def _accept_nucleus(draft_ids: torch.Tensor, q, p: Nucleus, generator) -> tuple[int, int]:
    """_accept_sampled with the target's rows as a nucleus (ids [g+1, K], probs): the same test,
    the bonus drawn from the last row's nucleus, the residual max(0, p - q) over p's candidates
    (where p is 0 the residual is too), so nothing beyond the ratio test touches all V ids. With
    q a nucleus too and both as Python floats (the quick path's), on those few floats."""
    if isinstance(q, Nucleus):
        if q.rows is not None and p.rows is not None:
            return _accept_rows(draft_ids.tolist(), q, p, generator)
        q = q.dense()
    g = draft_ids.shape[0]
    hit = p.ids[:g] == draft_ids[:, None]  # [g, K]: where each draft token sits among its row's candidates
    p_d = (p.probs[:g] * hit).sum(-1)  # [g]: 0 where the draft is outside the nucleus
    q_d = q[torch.arange(g), draft_ids]  # [g]
    r = torch.rand(g, generator=generator, device=q.device)  # [g]
    rejected = (r * q_d > p_d).nonzero()  # r > p/q, written without dividing by q
    if not rejected.numel():
        return g, p.token(g, generator)  # all accepted: the bonus from the last row
    k = int(rejected[0])
    ids, pk = p.ids[k], p.probs[k]  # [K]
    residual = (pk - q[k, ids]).clamp_min_(0)  # [K], drawn from unnormalised
    if not residual.sum() > 0:  # p == q up to rounding: the residual is undefined, p itself is exact
        residual = pk
    return k, _invert_by_id(ids.tolist(), residual.tolist(), generator)


def _accept_rows(drafts: list[int], q: Nucleus, p: Nucleus, generator) -> tuple[int, int]:
    """_accept_nucleus on Python floats: each position's p and q as {id: probability} over their
    few candidates; the same uniforms drawn in the same order."""
    g = len(drafts)
    p_ids, q_ids = p.ids.tolist(), q.ids.tolist()
    ps = [dict(zip(i, r)) for i, r in zip(p_ids, p.rows)]
    qs = [dict(zip(i, r)) for i, r in zip(q_ids, q.rows)]
    r = torch.rand(g, generator=generator).tolist()
    for k, d in enumerate(drafts):
        if r[k] * qs[k].get(d, 0.0) > ps[k].get(d, 0.0):  # r > p/q, written without dividing by q
            ids = p_ids[k][: len(p.rows[k])]
            residual = [max(0.0, pv - qs[k].get(i, 0.0)) for i, pv in zip(ids, p.rows[k])]
            if not sum(residual) > 0:  # p == q up to rounding: the residual is undefined, p itself is exact
                residual = p.rows[k]
            return k, _invert_by_id(ids, residual, generator)
    return g, p.token(g, generator)  # all accepted: the bonus from the last row


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
    with one_thread():
        return accept_sampled(draft_ids, q, nucleus(target_logits, s), s, generator)
