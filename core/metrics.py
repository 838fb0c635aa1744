"""Every metric of docs/DESIGN.md, defined once. Runtimes report rounds and phases; this turns
them into rates. Reports and the CLI summary read these functions, never their own formulas.

Round records are dicts with at least: drafted, accepted, emitted (see core/records.py).
`accepted` is the outcome of the ratio test; `emitted` is what reached the output after
truncation at max_new_tokens or EOS, so sum(emitted) == new_tokens.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

from spec_harness.core.timing import PHASE_FIELDS

TIME_FIELDS = ("wall_s",) + PHASE_FIELDS  # a generation's wall and its five parts
SPEC_ONLY = (
    "n_drafted",
    "n_accepted",
    "acceptance_rate",
    "alpha_hat",
    "mean_accepted_len",
    "per_position_acceptance",
    "per_position_marginal",
    "acceptance_length",
    "accept_histogram",
    "mean_drafted",
    "drafted_histogram",
)
FIELDS = ("new_tokens", "tokens_per_s", "e2e_tokens_per_s", "n_rounds") + SPEC_ONLY


def _div(a: float, b: float) -> Optional[float]:
    return a / b if b else None


def acceptance_rate(rounds: Sequence[dict]) -> Optional[float]:
    """n_accepted / n_drafted: the llama.cpp / vLLM convention (biased low as an estimate of alpha)."""
    return _div(sum(r["accepted"] for r in rounds), sum(r["drafted"] for r in rounds))


def alpha_hat(rounds: Sequence[dict]) -> Optional[float]:
    """Leviathan's alpha: accepted / (accepted + rejections).

    Each draft position is a Bernoulli(alpha) trial until the first rejection; positions after it
    are never tried, so they must not count. A round that accepts everything has no rejection.
    """
    drafted = [r for r in rounds if r["drafted"] > 0]
    accepted = sum(r["accepted"] for r in drafted)
    rejections = sum(1 for r in drafted if r["accepted"] < r["drafted"])
    return _div(accepted, accepted + rejections)


def mean_accepted_len(rounds: Sequence[dict]) -> Optional[float]:
    """tau: tokens emitted per round (accepted drafts + the correction or bonus token)."""
    return _div(sum(r["emitted"] for r in rounds), len(rounds))


def per_position_acceptance(rounds: Sequence[dict], gamma: int) -> list[Optional[float]]:
    """For draft position i (1..gamma): P(accept i | positions < i accepted and i was drafted)."""
    out = []
    for i in range(1, gamma + 1):
        reached = [r for r in rounds if r["drafted"] >= i and r["accepted"] >= i - 1]
        out.append(_div(sum(1 for r in reached if r["accepted"] >= i), len(reached)))
    return out


def per_position_marginal(rounds: Sequence[dict], gamma: int) -> list[Optional[float]]:
    """For draft position i (1..gamma): P(accept i) over every round that drafted, whether or not
    it reached i (the share of drafting rounds that accepted at least i drafts; SPEED-Bench's
    per-position acceptance). Their sum plus 1 is acceptance_length."""
    drafting = [r for r in rounds if r["drafted"] > 0]
    return [_div(sum(1 for r in drafting if r["accepted"] >= i), len(drafting)) for i in range(1, gamma + 1)]


def acceptance_length(rounds: Sequence[dict]) -> Optional[float]:
    """Accepted drafts + 1 per round that drafted (SPEED-Bench's acceptance length): tau over the
    drafting rounds, before a last round's output is cut at max_new_tokens or EOS."""
    drafting = [r for r in rounds if r["drafted"] > 0]
    return _div(sum(r["accepted"] + 1 for r in drafting), len(drafting))


def accept_histogram(rounds: Sequence[dict], gamma: int) -> list[int]:
    """Counts of rounds that accepted 0, 1, ..., gamma draft tokens."""
    hist = [0] * (gamma + 1)
    for r in rounds:
        if r["drafted"] > 0:
            hist[min(r["accepted"], gamma)] += 1
    return hist


def mean_drafted(rounds: Sequence[dict]) -> Optional[float]:
    """Draft tokens proposed per round: gamma under a fixed policy (less in a round cut at
    max_new_tokens), the policy's choice under the others."""
    return _div(sum(r["drafted"] for r in rounds), len(rounds))


def positions(rounds: Sequence[dict], gamma: Optional[int]) -> int:
    """Draft positions to report: gamma, or the longest round drafted when a schedule passed it
    (transformers' heuristic has no maximum)."""
    return max([gamma or 0] + [r["drafted"] for r in rounds])


def drafted_histogram(rounds: Sequence[dict], gamma: int) -> list[int]:
    """Counts of rounds that drafted 0, 1, ..., gamma tokens (0: the draft stopped at once, or a
    round with no tokens left to draft)."""
    hist = [0] * (gamma + 1)
    for r in rounds:
        hist[min(r["drafted"], gamma)] += 1
    return hist


def expected_alpha_acceptance_rate(alpha: float, gamma: int) -> float:
    """What acceptance_rate reads, in expectation, when each position is accepted with prob alpha.

    E[accepted] / gamma with E[accepted] = sum_{i=1..g} alpha^i. Documents the bias alpha_hat removes.
    """
    return sum(alpha**i for i in range(1, gamma + 1)) / gamma


def mean_entropy(logits) -> Optional[float]:
    """Mean entropy (nats) of softmax(logits) over rows: the target's uncertainty per generated
    token at temperature 1. logits: [N, V] torch tensor."""
    if logits is None or logits.shape[0] == 0:
        return None
    logp = logits.float().log_softmax(-1)
    return float(-(logp.exp() * logp).sum(-1).mean())


def first_difference(a: Sequence[int], b: Sequence[int]) -> Optional[int]:
    """The first index where two id sequences differ (the shorter one's length when one is a
    prefix of the other); None when they are equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def top2_margins(logits) -> Optional[list[float]]:
    """Top-1 minus top-2 logit of each row: how near to a tie each greedy choice was.
    logits: [N, V] torch tensor."""
    if logits is None or logits.shape[0] == 0:
        return None
    v = logits.float().topk(2, -1).values  # [N, 2]
    return [round(float(x), 5) for x in v[:, 0] - v[:, 1]]


def tokens_per_s(new_tokens: int, wall_s: float, prefill_s: float) -> Optional[float]:
    """Decode rate: new tokens over the time after prefill."""
    return _div(new_tokens, wall_s - prefill_s)


def e2e_tokens_per_s(new_tokens: int, wall_s: float) -> Optional[float]:
    return _div(new_tokens, wall_s)


# an open-loop rate whose sends' lag p99 (woken - planned) is above this was not kept by the client:
# said, and left out of decisions and plots (runtimes/open_loop.py measures the lag)
LAG_KEPT_S = 0.005


def tpot(e2e_s: float, ttft_s: Optional[float], new_tokens: int) -> Optional[float]:
    """Time per output token after the first, as serving benchmarks define it: (E2E - TTFT) /
    (tokens - 1); None below 2 tokens or without a first token."""
    if ttft_s is None or new_tokens < 2:
        return None
    return (e2e_s - ttft_s) / (new_tokens - 1)


def speedup(base_wall_s: float, base_tokens: int, spec_wall_s: float, spec_tokens: int) -> Optional[float]:
    """Baseline wall per token / speculative wall per token (same runtime, prompt, settings, seed)."""
    if not (base_tokens and spec_tokens and spec_wall_s):
        return None
    return (base_wall_s / base_tokens) / (spec_wall_s / spec_tokens)


def decode_speedup(base: dict, spec: dict) -> Optional[float]:
    """speedup() over the time after prefill of pooled rows (pooled()): what speculation does to
    decoding alone, which a long input's prefill hides in the end-to-end speedup."""
    return speedup(decode_s(base), base["new_tokens"], decode_s(spec), spec["new_tokens"])


def generation_metrics(phases: dict, rounds: Sequence[dict], new_tokens: int, speculative: bool, gamma: int) -> dict:
    """All per-generation metrics of the results.jsonl contract, from phases and round records."""
    row = {
        "new_tokens": new_tokens,
        "tokens_per_s": tokens_per_s(new_tokens, phases["wall_s"], phases["prefill_s"] or 0.0),
        "e2e_tokens_per_s": e2e_tokens_per_s(new_tokens, phases["wall_s"]),
        "n_rounds": len(rounds),
    }
    if speculative:
        row.update(
            n_drafted=sum(r["drafted"] for r in rounds),
            n_accepted=sum(r["accepted"] for r in rounds),
            acceptance_rate=acceptance_rate(rounds),
            alpha_hat=alpha_hat(rounds),
            mean_accepted_len=mean_accepted_len(rounds),
            per_position_acceptance=per_position_acceptance(rounds, gamma),
            per_position_marginal=per_position_marginal(rounds, gamma),
            acceptance_length=acceptance_length(rounds),
            accept_histogram=accept_histogram(rounds, gamma),
            mean_drafted=mean_drafted(rounds),
            drafted_histogram=drafted_histogram(rounds, gamma),
        )
    else:
        row.update(dict.fromkeys(SPEC_ONLY))
    return row


def median(xs: Iterable[float]) -> Optional[float]:
    v = sorted(x for x in xs if x is not None and not math.isnan(x))
    if not v:
        return None
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2


# The verdicts on a greedy mismatch (runtimes/evidence.py decides, reports/mismatch.py says them).
NEAR_TIE = "near-tie flip"  # batched and one-token logits differ by more than the target's top-2 margin
SUSPECTED_BUG = "suspected bug"  # they do not: numerics cannot explain the speculative token

GREEDY_MISMATCH = ("greedy speculative output differs from the baseline's: a correctness bug on float32 weights; "
                   "on quantized GGUF (llama.cpp) or float16/bfloat16 weights, batched (verify) and one-token "
                   "(baseline) logits differ slightly and near-ties can flip")


GROUP_FIELDS = ("runtime", "pair", "mode", "gamma", "temperature", "top_p", "top_k", "max_new_tokens", "concurrency",
                "request_rate")


def one_at_a_time(row: dict) -> bool:
    """Whether a row's generation ran one request at a time: not one request of a cell under load
    (--concurrency above 1) nor of an open-loop load (--request-rate, whatever its slots)."""
    return (row.get("concurrency") or 1) == 1 and row.get("request_rate") is None


def group_value(row: dict, k: str):
    """A row's value of a GROUP_FIELDS field (rows written before `concurrency` existed ran at 1)."""
    return (row.get(k) or 1) if k == "concurrency" else row.get(k)


def quantile(xs: Iterable[Optional[float]], f: float) -> Optional[float]:
    """The f-quantile (0 <= f <= 1) of the non-null values, linear interpolation; None when empty."""
    v = sorted(x for x in xs if x is not None and not math.isnan(x))
    if not v:
        return None
    i = f * (len(v) - 1)
    lo = int(i)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (i - lo)


def quartiles(xs: Iterable[Optional[float]]) -> tuple[Optional[float], Optional[float], Optional[float]]:
    """(q1, median, q3) of the non-null values, linear interpolation; (None,)*3 when empty."""
    v = [x for x in xs if x is not None and not math.isnan(x)]
    return quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75)


def summarize(rows: Sequence[dict]) -> list[dict]:
    """Pool results rows per setting (GROUP_FIELDS: runtime, pair, mode, gamma, sampling, length):
    sums of tokens and phases, pooled rates, and speedup against the baseline of the same runtime,
    pair and sampling settings.

    Pooled rates are ratios of sums (not means of ratios), so long generations weigh more.
    """
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("error"):
            continue
        groups.setdefault(tuple(group_value(r, k) for k in GROUP_FIELDS), []).append(r)
    out = []
    for key, rs in groups.items():
        mode = rs[0]["mode"]
        wall = sum(r["wall_s"] for r in rs)
        tokens = sum(r["new_tokens"] for r in rs)
        s = {**dict(zip(GROUP_FIELDS, key)), "n": len(rs), "new_tokens": tokens, "wall_s": wall}
        for ph in PHASE_FIELDS:
            vals = [r[ph] for r in rs]
            s[ph] = None if any(v is None for v in vals) else sum(vals)
        s["tokens_per_s"] = tokens_per_s(tokens, wall, s["prefill_s"] or 0.0)
        rounds = [rd for r in rs for rd in (r.get("rounds") or [])]
        if mode == "speculative":
            s["acceptance_rate"] = acceptance_rate(rounds)
            s["alpha_hat"] = alpha_hat(rounds)
            s["mean_accepted_len"] = mean_accepted_len(rounds)
            s["mean_drafted"] = mean_drafted(rounds)
            base = groups.get(tuple(None if k == "gamma" else "baseline" if k == "mode" else s[k] for k in GROUP_FIELDS), [])
            s["speedup"] = speedup(
                sum(r["wall_s"] for r in base), sum(r["new_tokens"] for r in base), wall, tokens
            )
            matches = [r["greedy_match"] for r in rs if r.get("greedy_match") is not None]
            s["greedy_match"] = all(matches) if matches else None
        out.append(s)
    return out


def draft_step_times(rounds: Sequence[dict]) -> list[float]:
    """Seconds per draft token in each speculative round: draft_s / drafted (rounds that drafted)."""
    return [r["draft_s"] / r["drafted"] for r in rounds if r["drafted"] > 0 and r.get("draft_s") is not None]


def target_step_times(rounds: Sequence[dict]) -> list[float]:
    """Seconds of each single-token target step: verify_s of baseline rounds (drafted 0)."""
    return [r["verify_s"] for r in rounds if r["drafted"] == 0 and r.get("verify_s") is not None]


def c_measured(spec_rounds: Sequence[dict], base_rounds: Sequence[dict]) -> Optional[float]:
    """Leviathan's c as measured: median draft per-token step time / median target single-token
    step time, from speculative and baseline rounds of the same runtime and settings.
    None when either side is missing (e.g. a runtime that cannot see its draft phase)."""
    d, t = median(draft_step_times(spec_rounds)), median(target_step_times(base_rounds))
    return None if d is None or t is None else _div(d, t)


def verify_cost_ratio(spec_rounds: Sequence[dict], base_rounds: Sequence[dict]) -> Optional[float]:
    """Median verify pass of a speculative round (gamma+1 tokens) in target single-token steps.

    Leviathan's ceiling assumes 1.0 (verifying gamma+1 tokens costs one step); above 1 is part of
    what the ceiling cannot see.
    """
    v = median(r["verify_s"] for r in spec_rounds if r["drafted"] > 0 and r.get("verify_s") is not None)
    t = median(target_step_times(base_rounds))
    return None if v is None or t is None else _div(v, t)


# ---------------------------------------------------------------- pooled costs, in target steps
#
# The speedup is a ratio of sums (wall per token over whole generations), so the costs that
# multiply back to it must be ratios of sums too: medians (c_measured, verify_cost_ratio) are
# robust summaries for tables, but would leave the skew of the timing distribution in the
# decomposition's residual. These are used by reports/explain.py.

COUNT_FIELDS = ("new_tokens", "n_rounds", "n_drafted")


def pooled(rows: Sequence[dict]) -> dict:
    """Sums over rows of the phases (None when any row hides a phase) and of new_tokens,
    n_rounds and n_drafted (None counts as 0: baseline rows have no drafts)."""
    out = {}
    for ph in TIME_FIELDS:
        vals = [r.get(ph) for r in rows]
        out[ph] = None if any(v is None for v in vals) else sum(vals)
    for k in COUNT_FIELDS:
        out[k] = sum(r.get(k) or 0 for r in rows)
    return out


def decode_s(t: dict) -> float:
    """Time after prefill (the whole wall when prefill is not visible, as in tokens_per_s)."""
    return t["wall_s"] - (t["prefill_s"] or 0.0)


def target_step_s(base: dict) -> Optional[float]:
    """Mean single-token target step of pooled baseline totals: verify_s / n_rounds."""
    return None if base["verify_s"] is None else _div(base["verify_s"], base["n_rounds"])


def step_costs(spec: dict, base: dict) -> dict:
    """Pooled costs of a speculative cell in units of its baseline's target step T.

    - c = (draft_s / n_drafted) / T: one draft token;
    - v = (verify_s / n_rounds) / T: one verify pass of up to gamma + 1 tokens;
    - o = ((decode - draft_s - verify_s) / n_rounds) / T: sampling and orchestration per round,
      including the time between rounds (so decode == T (n_drafted c + n_rounds (v + o)) exactly);
    - o_base = (baseline decode - verify_s) / verify_s: the baseline's sampling and orchestration
      per target step;
    - gamma_eff = n_drafted / n_rounds (below gamma when rounds were cut at max_new_tokens);
    - tau = new_tokens / n_rounds (tokens per round, measured).
    Each is None when the phases it needs are not visible or the counts are zero.
    """
    T = target_step_s(base)
    rounds, drafted = spec["n_rounds"], spec["n_drafted"]
    dec = decode_s(spec)
    seen = spec["draft_s"] is not None and spec["verify_s"] is not None

    def per_step(x: Optional[float], n: int) -> Optional[float]:
        return None if x is None or T is None or not n else x / n / T

    base_dec = decode_s(base) - (base["draft_s"] or 0.0)
    return {
        "target_step_s": T,
        "c": per_step(spec["draft_s"], drafted),
        "v": per_step(spec["verify_s"], rounds),
        "o": per_step(dec - spec["draft_s"] - spec["verify_s"], rounds) if seen else None,
        "cost_per_round": per_step(dec, rounds),
        "o_base": None if base["verify_s"] is None else _div(base_dec - base["verify_s"], base["verify_s"]),
        "gamma_eff": _div(drafted, rounds),
        "tau": _div(spec["new_tokens"], rounds),
    }
