"""Greedy outputs that differ, said with their numbers: within a runtime (a speculative row against
its own baseline, with the evidence of runtimes/evidence.py in the row's `mismatch`), and across
runtimes on the same pair (their greedy baselines, with each one's top-2 margin at the first token
where they part, from the rows' `step_margins`). The console (harness/summary.py) and the report
(build.py, markdown.py) print these lines and tables. What it does not do: compute evidence.
"""

from __future__ import annotations

import itertools
from typing import Optional

from spec_harness.core import metrics
from spec_harness.reports.tables import turn

NEAR_TIE, SUSPECTED_BUG = metrics.NEAR_TIE, metrics.SUSPECTED_BUG


def _span(xs: list[float]) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.3f}" if abs(hi - lo) < 5e-4 else f"{lo:.3f}-{hi:.3f}"


def _prompt(prompt_id: str, turn_: int) -> str:
    """A prompt as the lines and the records' `prompt` name it: its id, and its turn past the first
    ("mt1 turn 2"); the records keep the turn as a number too."""
    return prompt_id if turn_ == 1 else f"{prompt_id} turn {turn_}"


def mismatch_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("mode") == "speculative" and r.get("greedy_match") is False]


def runtime_lines(rows: list[dict], runtime: str) -> list[str]:
    """What a runtime's greedy mismatches are: near-tie flips (numerics), suspected bugs, or, where
    a row carries no evidence (an older run, a runtime without a reference pass), the possible causes."""
    mine = [r for r in mismatch_rows(rows) if r["runtime"] == runtime]
    if not mine:
        return []
    ev = [r["mismatch"] for r in mine if isinstance(r.get("mismatch"), dict) and "verdict" in r["mismatch"]]
    bugs = [(r, r["mismatch"]) for r in mine if isinstance(r.get("mismatch"), dict) and r["mismatch"].get("verdict") == SUSPECTED_BUG]
    flips = [m for m in ev if m["verdict"] == NEAR_TIE]
    out = []
    if bugs:
        where = "; ".join(f"{_prompt(r['prompt_id'], turn(r))} token {m['position']}: margin {m['margin_one_token']:.3f} >= "
                          f"passes' difference {m['max_abs_diff']:.3f}" for r, m in bugs[:3])
        out.append(f"SUSPECTED BUG in {runtime}: {len(bugs)} greedy output(s) left the baseline where numerics cannot explain it "
                   f"({where}); the rows' `mismatch` field has the tokens and margins")
    if flips:
        out.append(f"{runtime}: {len(flips)} greedy mismatch(es), each a near-tie flip: at the first differing token the target's "
                   f"top-2 margin ({_span([m['margin_one_token'] for m in flips])}) is below the difference between its one-token "
                   f"and batched logits there ({_span([m['max_abs_diff'] for m in flips])}): numerics of batched passes, not the algorithm")
    if len(ev) < len(mine):
        out.append(f"{runtime}: {metrics.GREEDY_MISMATCH}")
    return out


def mismatch_table(rows: list[dict]) -> list[dict]:
    """One record per greedy mismatch that carries evidence."""
    out = []
    for r in mismatch_rows(rows):
        m = r.get("mismatch")
        if isinstance(m, dict) and "verdict" in m:
            out.append({"runtime": r["runtime"], "prompt": _prompt(r["prompt_id"], turn(r)), "turn": turn(r),
                        "gamma": r["gamma"], "position": m["position"],
                        "baseline": f"{m['baseline_text']!r} ({m['baseline_token']})",
                        "speculative": f"{m['speculative_text']!r} ({m['speculative_token']})",
                        "margin_one_token": m["margin_one_token"], "margin_batched": m["margin_batched"],
                        "max_abs_diff": m["max_abs_diff"], "verdict": m["verdict"]})
    return out


# ---------------------------------------------------------------- across runtimes


def _baselines(rows: list[dict]) -> dict[tuple, dict[str, dict]]:
    """(pair, prompt, turn, repeat, max_new_tokens, seed) -> runtime -> its greedy baseline row: the
    turns of one conversation apart (tables.turn: 1 where a row has none)."""
    out: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if r.get("mode") == "baseline" and not r.get("error") and r.get("temperature") == 0 and r.get("token_ids") is not None \
                and metrics.one_at_a_time(r):  # batched under load the ids may part anyway
            key = (r["pair"], r["prompt_id"], turn(r), r["repeat"], r["max_new_tokens"], r["seed"])
            out.setdefault(key, {})[r["runtime"]] = r
    return out


def _margin(r: dict, j: int) -> Optional[float]:
    m = r.get("step_margins") or []
    return m[j] if j < len(m) else None


def agreement(rows: list[dict]) -> list[dict]:
    """Per prompt (each turn of a conversation apart) and runtime pair of the same model pair: do
    their greedy baselines agree, and if not, where they part, what each chose and how near to a
    tie each was there."""
    out = []
    for (pair, prompt, turn_, repeat, _, _), by_rt in _baselines(rows).items():
        for a, b in itertools.combinations(by_rt, 2):
            ra, rb = by_rt[a], by_rt[b]
            j = metrics.first_difference(ra["token_ids"], rb["token_ids"])
            rec = {"pair": pair, "prompt": _prompt(prompt, turn_), "turn": turn_, "repeat": repeat, "a": a, "b": b,
                   "dtype_a": ra.get("dtype"), "dtype_b": rb.get("dtype"),
                   "tokens": min(len(ra["token_ids"]), len(rb["token_ids"])), "agree": j is None, "position": j}
            if j is not None:
                rec.update(token_a=ra["token_ids"][j] if j < len(ra["token_ids"]) else None,
                           token_b=rb["token_ids"][j] if j < len(rb["token_ids"]) else None,
                           margin_a=_margin(ra, j), margin_b=_margin(rb, j))
            out.append(rec)
    return out


def agreement_lines(records: list[dict]) -> list[str]:
    """One sentence per runtime pair: on how many prompts the greedy baselines agree, and where they
    do not, at which token and with which margins."""
    lines = []
    for (a, b), recs in _by(records, lambda r: (r["a"], r["b"])).items():
        head = f"{a} ({recs[0]['dtype_a']}) and {b} ({recs[0]['dtype_b']})"
        apart = [r for r in recs if not r["agree"]]
        if not apart:
            lines.append(f"{head}: the same greedy ids on all {len(recs)} prompts ({recs[0]['tokens']} tokens each).")
            continue
        where = ", ".join(f"{r['prompt']} token {r['position']}" for r in apart[:4])
        where += f" and {len(apart) - 4} more" if len(apart) > 4 else ""
        margins = [m for r in apart for m in (r["margin_a"], r["margin_b"]) if m is not None]
        tail = f"; top-2 margins there {_span(margins)} (the choice was near a tie)" if margins else ""
        lines.append(f"{head}: the same greedy ids on {len(recs) - len(apart)} of {len(recs)} prompts; they part at {where}{tail}.")
    return lines


def _by(records: list[dict], key) -> dict:
    out: dict = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out
