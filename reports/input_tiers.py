"""The report's "Input length" section and input_lengths.csv, for runs with --input-len: per
speculative cell (the Acceptance table's, apart from the input length) and length, the baseline's
prefill per generation, the target's one-token step, the verify and draft costs v and c in target
steps (core.metrics.step_costs), alpha_hat, and the decode and end-to-end speedups; then where
speculation stops paying (the decode speedup falls under 1):

- measured: between the two measured lengths where the decode speedup crosses 1, linearly in the
  length;
- predicted: Leviathan's tokens per round over the round's cost, (1 + o_base) tau(alpha, gamma) /
  (gamma c + v + o) (reports/explain.py's waterfall without prefill and residual), with v, c, o,
  o_base and alpha each a least-squares line in the input length through every measured length,
  solved for 1 (a grid up to PREDICT_UP_TO times the longest length, then bisection). Where
  drafting and verifying are one phase (vLLM's rounds), the round's whole cost in target steps is
  the line instead of gamma c + v + o; where neither is measured at two lengths, no prediction.

What it does not do: build the prompts (harness/input_len.py), define a cost or a rate
(core/metrics.py, core/theory.py) or lay out the report (sections.py).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from spec_harness.core import metrics, theory
from spec_harness.reports import tables

PREDICT_UP_TO = 4  # the prediction looks this many times past the longest measured length
COLS = [("label", "cell", "s"), ("input_len", "input", ""), ("prefill_ms", "prefill ms", ".0f"),
        ("step_ms", "step ms", ".1f"), ("v", "v", ".2f"), ("c", "c", ".3f"), ("alpha_hat", "alpha_hat", ".2f"),
        ("decode_speedup", "decode", ".2fx"), ("speedup", "end to end", ".2fx")]
TEXT = ("Each input length the prompts were built to (--input-len): the baseline's prefill per generation, the "
        "target's one-token step, v and c in target steps, alpha_hat, and two speedups: decode (the time after "
        "prefill) and end to end (the whole wall, prefill included, which long inputs pull towards 1).")
FIT_KEYS = ("v", "c", "o", "o_base", "alpha_hat")  # fitted as lines in the input length for the prediction
ROUND_KEYS = ("cost_per_round", "o_base", "alpha_hat")  # the same where a round's draft and verify are one phase


def present(rows: list[dict]) -> bool:
    """Whether the measured rows were built to more than one input length."""
    return len({r.get("input_len") for r in rows if not r.get("error") and r.get("input_len")}) > 1


def records(rows: list[dict]) -> list[dict]:
    """One record per speculative cell and input length, cells in table order, lengths ascending."""
    out = []
    for base, spec, gamma in tables.cell_groups(rows):
        if not spec or not spec[0].get("input_len"):
            continue
        b, s = metrics.pooled(base), metrics.pooled(spec)
        k = metrics.step_costs(s, b)
        rec = {**tables.settings(spec[0]), "gamma": gamma, "drafter": spec[0].get("drafter"),
               "n": len(spec), "prompt_tokens": _mean(r.get("prompt_tokens") for r in spec),
               "prefill_ms": _mean(1000 * r["prefill_s"] for r in base if r.get("prefill_s") is not None),
               "step_ms": None if k["target_step_s"] is None else 1000 * k["target_step_s"],
               "v": k["v"], "c": k["c"], "o": k["o"], "o_base": k["o_base"], "cost_per_round": k["cost_per_round"],
               "alpha_hat": metrics.alpha_hat([rd for r in spec for rd in r.get("rounds") or []]),
               "decode_speedup": metrics.decode_speedup(b, s),
               "speedup": metrics.speedup(b["wall_s"], b["new_tokens"], s["wall_s"], s["new_tokens"])}
        out.append(rec)
    vary = [k for k in tables.varying(out) if k != "input_len"]
    for r in out:
        r["label"] = tables.label(r, vary)
    order = {}
    for r in out:
        order.setdefault(r["label"], len(order))
    return sorted(out, key=lambda r: (order[r["label"]], r["input_len"]))


def breakevens(recs: list[dict]) -> list[dict]:
    """Per cell: the input length where the decode speedup falls under 1, measured and predicted."""
    out = []
    for label in dict.fromkeys(r["label"] for r in recs):
        tiers = [r for r in recs if r["label"] == label]
        out.append({"label": label, "measured": measured_breakeven(tiers), "predicted": predicted_breakeven(tiers),
                    "fitted": _fit(tiers)[0], "lengths": [r["input_len"] for r in tiers]})
    return out


def measured_breakeven(tiers: Sequence[dict]) -> Optional[float]:
    """Where the measured decode speedup first crosses from >= 1 to < 1 between two lengths
    (linear in the length); the shortest length when it is under 1 there already; None: it pays
    at every measured length (or nothing is measured)."""
    pts = [(r["input_len"], r["decode_speedup"]) for r in tiers if r["decode_speedup"] is not None]
    if not pts:
        return None
    if pts[0][1] < 1:
        return float(pts[0][0])
    for (l0, s0), (l1, s1) in zip(pts, pts[1:]):
        if s0 >= 1 > s1:
            return l0 + (s0 - 1) / (s0 - s1) * (l1 - l0)
    return None


def _fit(tiers: Sequence[dict]) -> tuple[Optional[tuple], list[dict]]:
    """(the inputs to fit, the tiers that have them): FIT_KEYS, else ROUND_KEYS, measured at two
    lengths or more; (None, []) where neither is."""
    for keys in (FIT_KEYS, ROUND_KEYS):
        fits = [r for r in tiers if all(r.get(k) is not None for k in keys) and r.get("gamma")]
        if len({r["input_len"] for r in fits}) >= 2:
            return keys, fits
    return None, []


def predicted_breakeven(tiers: Sequence[dict]) -> Optional[float]:
    """Where the cost model with its inputs fitted as lines in the input length gives a decode
    speedup under 1, searched from the shortest length to PREDICT_UP_TO x the longest; None where
    it stays at 1 or above, or two lengths with the inputs are not there to fit (_fit)."""
    keys, fits = _fit(tiers)
    if keys is None:
        return None
    lengths = np.array([r["input_len"] for r in fits], dtype=float)
    lines = {k: np.polyfit(lengths, [r[k] for r in fits], 1) for k in keys}
    gamma = fits[0]["gamma"]
    pays = lambda n: predicted_speedup({k: float(np.polyval(lines[k], n)) for k in keys}, gamma) >= 1  # noqa: E731
    grid = np.linspace(lengths.min(), PREDICT_UP_TO * lengths.max(), 400)
    first = next((i for i, n in enumerate(grid) if not pays(n)), None)
    if first is None or first == 0:
        return None if first is None else float(grid[0])
    lo, hi = grid[first - 1], grid[first]
    for _ in range(40):  # bisection between the grid's last paying point and its first losing one
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if pays(mid) else (lo, mid)
    return float(hi)


def predicted_speedup(at: dict, gamma: int) -> float:
    """(1 + o_base) tau(alpha, gamma) / (gamma c + v + o), or over `cost_per_round` where `at` has
    it instead, each input held to its physical range: alpha in [0, 1], c >= 0, v >= 1 and
    o >= o_base (a round costs at least a baseline step, 1 + o_base), so that no prediction passes tau."""
    alpha = min(max(at["alpha_hat"], 0.0), 1.0)
    o_base = max(at["o_base"], 0.0)
    if "cost_per_round" in at:
        cost = max(at["cost_per_round"], 1 + o_base)
    else:
        cost = gamma * max(at["c"], 0.0) + max(at["v"], 1.0) + max(at["o"], o_base)
    return (1 + o_base) * theory.expected_tokens(alpha, gamma) / cost


def lines(recs: list[dict]) -> list[str]:
    """The sentences after the table: each cell's measured and predicted break-even length."""
    out = []
    for b in breakevens(recs):
        low, top = min(b["lengths"]), max(b["lengths"])
        measured = ("pays at every measured length" if b["measured"] is None
                    else f"does not pay from the shortest length ({low}) on" if b["measured"] <= low
                    else f"stops paying at about {b['measured']:.0f} input tokens")
        if b["fitted"] is None:
            out.append(f"- {b['label']}: decoding {measured} (measured); not predicted: the round's costs and "
                       "alpha_hat are not measured at two lengths.")
            continue
        predicted = (f"pays up to {PREDICT_UP_TO * top} tokens" if b["predicted"] is None
                     else f"not from {low} tokens on" if b["predicted"] <= low
                     else f"about {b['predicted']:.0f} tokens")
        inputs = "v, c" if b["fitted"] == FIT_KEYS else "the round's whole cost"
        out.append(f"- {b['label']}: decoding {measured} (measured); predicted from {inputs} and alpha_hat as lines "
                   f"in the input length: {predicted}.")
    return out


def _mean(xs) -> Optional[float]:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None
