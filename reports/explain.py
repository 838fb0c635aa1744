"""`harness explain`: each measured speedup as a product of factors, from tau down to measured.

For a speculative cell and the baseline rows of the same runtime and settings, in units of the
target's one-token step T (core.metrics.step_costs, all ratios of sums):

    measured = tau                        tokens per round from alpha_hat and each round's drafted
                                          length d (Eq. 1 per round, averaged): the speedup if
                                          drafting and verifying were free
             x 1 / (g c + 1)              draft cost: Leviathan's E[speedup] (Theorem 3.8)
             x (g c + 1) / (g c + v)      verify cost: a pass over g + 1 tokens costs v steps, not 1
             x (g c + v) / (g c + v + o)  sampling and orchestration: o steps per round
             x (1 + o_base)               the baseline's own sampling and orchestration per step
                                          (it slows the baseline, so it favours speculation)
             x prefill                    (baseline wall / decode) / (speculative wall / decode):
                                          prompt processing, the draft's included
             x residual                   measured / the product above, reported, never hidden

where g is the mean drafted length per round (n_drafted / n_rounds: gamma under a fixed policy
except a last round cut at max_new_tokens; the policy's choice under confidence stopping, the
heuristic schedule, prompt lookup or a library default), so the waterfall stays exact when
rounds draft different lengths.

Why the residual is not 1, split into what is known: the rounds' measured tokens per round
differ from Eq. 1 at alpha_hat (acceptance is not i.i.d. across positions and prompts, and the
last round of a generation is cut at max_new_tokens or EOS). What remains ("other") is 1 up to
rounding when every phase is visible, since decode time is exactly T (n_drafted c + n_rounds (v + o)).
A runtime that hides its draft or verify phase gets one combined cost factor in their place.

What-if, from the same measured costs (core.theory.RoundCosts): the breakeven alpha at this
gamma and at any gamma, the best gamma, and the speedup the run would have had there. The
assumptions: c and o_base do not depend on gamma; v grows linearly with the batch from 1 at
gamma 0 through the v measured at each gamma run under the same settings (extrapolated with the
last slope), never below 1; o is held at the measured value per round (linear between measured
gammas when several were run), never below o_base; so a round costs at least a baseline step and
the model's speedup at a gamma is at most tau there. The run at another gamma keeps its prefill
time and its residual: its decode time per token scales by the model's cost per token there
(what_if_run), so a long prompt's prefill, which dilutes a loss toward 1x, dilutes a gain too.

Across runtimes on the same pair and settings (and across pairs or devices for one runtime),
`compare` says which factors differ: alpha_hat differing points at the models or sampling,
c, v, o at the runtime or the hardware.

It writes the sentences of its own findings (verdict, residual_sentence, noise_sentence,
what_if_sentence, compare). What it does not do: measure or hold formulas (core.metrics,
core.theory), group rows (tables.py), draw (plots.py) or lay out the report (markdown.py).
"""

from __future__ import annotations

from typing import Optional

from spec_harness.core import metrics, theory
from spec_harness.reports import tables

RESIDUAL_TOLERANCE = 0.05  # |residual - 1| above this is called out in the text
DIFFERS_RATIO = 1.15  # costs (c, v, o, o_base) that differ by more than this factor "differ"
DIFFERS_ALPHA = 0.05  # alpha_hat values further apart than this "differ"
NOISE_RATIO = 1.25  # pooled c or v this far from the median: say the split is noisy

NAMES = {
    "tau": "tokens per round (alpha_hat, gamma)",
    "draft": "draft cost",
    "verify": "verify cost",
    "overhead": "sampling + orchestration",
    "costs": "draft + verify + overhead (not separable)",
    "baseline": "baseline's own overhead",
    "prefill": "prefill",
    "residual": "residual",
}


# ---------------------------------------------------------------- one cell


def _factor(key: str, factor: float, level: float, detail: str) -> dict:
    return {"key": key, "name": NAMES[key], "factor": factor, "level": level, "detail": detail}


def _cost_factors(gamma: float, k: dict) -> list[tuple[str, float, str]]:
    """(key, factor, detail) of the round's costs at g = gamma drafted tokens per round: draft,
    verify, overhead, or one combined."""
    c, v, o = k["c"], k["v"], k["o"]
    if c is None or v is None or o is None:
        hidden = "draft" if c is None else "verify"
        return [("costs", 1 / k["cost_per_round"],
                 f"{k['cost_per_round']:.2f} target steps per round; the runtime hides its {hidden} phase")]
    gc = gamma * c
    return [("draft", 1 / (gc + 1), f"c = {c:.3f} target steps per draft token: 1 / (g c + 1)"),
            ("verify", (gc + 1) / (gc + v), f"v = {v:.2f} target steps per verify pass: (g c + 1) / (g c + v)"),
            ("overhead", (gc + v) / (gc + v + o), f"o = {o:.2f} target steps per round: (g c + v) / (g c + v + o)")]


def _prefill_factor(spec: dict, base: dict) -> float:
    """(baseline wall / its decode) / (speculative wall / its decode): 1 when no prefill is seen."""
    return (base["wall_s"] / metrics.decode_s(base)) / (spec["wall_s"] / metrics.decode_s(spec))


def _prefill_share(spec: dict) -> Optional[float]:
    """The share of the speculative wall before decoding (prefill: 0 when it is not seen)."""
    return None if not spec["wall_s"] else 1 - metrics.decode_s(spec) / spec["wall_s"]


def _residual_parts(tau_model: float, k: dict, residual: float) -> dict:
    """The residual split into known parts; their product with `other` is the residual."""
    acceptance = k["tau"] / tau_model
    return {"acceptance": acceptance, "other": residual / acceptance}


def drafted_lengths(spec_rows: list[dict]) -> list[int]:
    """Each speculative round's drafted count, over the cell's generations."""
    return [rd["drafted"] for r in spec_rows for rd in (r.get("rounds") or [])]


def decompose(spec_rows: list[dict], base_rows: list[dict], gamma: int, alpha: Optional[float]) -> dict:
    """The waterfall of one speculative cell: inputs, factors (each with the level it leads to),
    product, measured speedup, residual and its parts; `unavailable` says why when it cannot be done."""
    spec, base = metrics.pooled(spec_rows), metrics.pooled(base_rows)
    k = metrics.step_costs(spec, base)
    measured = metrics.speedup(base["wall_s"], base["new_tokens"], spec["wall_s"], spec["new_tokens"])
    out = {"gamma": gamma, "alpha_hat": alpha, "measured": measured, **k,
           "target_step_ms": None if k["target_step_s"] is None else 1000 * k["target_step_s"],
           "prefill_share": _prefill_share(spec)}
    del out["target_step_s"]
    why = _unavailable(base_rows, alpha, k, measured)
    if why:
        return {**out, "unavailable": why, "factors": [], "product": None, "residual": None, "residual_parts": None}
    tau_model = theory.expected_tokens_rounds(alpha, drafted_lengths(spec_rows))
    g = k["gamma_eff"]
    steps = [("tau", tau_model, f"alpha_hat {alpha:.3f}, {g:.2f} drafted per round: mean of (1 - a^(d+1)) / (1 - a)")]
    steps += _cost_factors(g, k)
    steps += [("baseline", 1 + k["o_base"], f"o_base = {k['o_base']:.2f} target steps per baseline step: 1 + o_base"),
              ("prefill", _prefill_factor(spec, base), "(baseline wall / decode) / (speculative wall / decode)")]
    factors, level = [], 1.0
    for key, f, detail in steps:
        level *= f
        factors.append(_factor(key, f, level, detail))
    residual = measured / level
    factors.append(_factor("residual", residual, measured, "measured / product of the factors above"))
    return {**out, "unavailable": None, "tau_model": tau_model, "factors": factors, "product": level,
            "residual": residual, "residual_parts": _residual_parts(tau_model, k, residual)}


def _unavailable(base_rows: list[dict], alpha, k: dict, measured) -> Optional[str]:
    if not base_rows:
        return "no baseline rows with the same settings"
    if measured is None:
        return "no speedup (a side generated no tokens)"
    if alpha is None:
        return "no per-round acceptance records (alpha_hat unknown)"
    if k["target_step_s"] is None:
        return "the baseline's target step time is not visible"
    if not k["tau"] or k["cost_per_round"] is None:
        return "no round counts in the speculative rows"
    return None


def factor(expl: dict, key: str) -> Optional[float]:
    return next((f["factor"] for f in expl["factors"] if f["key"] == key), None)


# ---------------------------------------------------------------- what would move it


def losses(expl: dict) -> dict[str, float]:
    """Factors below 1 that a user can act on; acceptance counts as tau / (g + 1), the share of
    the g + 1 tokens a round drafting g could yield."""
    out = {"acceptance": expl["tau_model"] / (expl["gamma_eff"] + 1)}
    out.update({f["key"]: f["factor"] for f in expl["factors"] if f["key"] not in ("tau", "residual", "baseline")})
    return {k: v for k, v in out.items() if v < 1}


def largest(expl: dict) -> Optional[tuple[str, float]]:
    ls = losses(expl)
    return min(ls.items(), key=lambda kv: kv[1]) if ls else None


def _n(x: float) -> str:
    """A count that may be a mean: 5, 4.7, 3.25."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _acceptance(e: dict, f: float) -> str:
    a, g, tau = e["alpha_hat"], e["gamma_eff"], e["tau_model"]
    return (f"Acceptance is the largest factor (x{f:.2f}): at alpha_hat {a:.2f} a round yields {tau:.2f} of the "
            f"{_n(g + 1)} tokens it could, which caps this setting at {tau:.2f}x even with free drafting and "
            "verification; a draft closer to the target or lower-entropy prompts would help more than a faster runtime.")


def _draft(e: dict, f: float) -> str:
    return (f"The draft's cost is the largest factor (x{f:.2f}): each of the {_n(e['gamma_eff'])} draft tokens per round costs "
            f"c = {e['c']:.2f} target steps; a cheaper draft (a smaller model, or a runtime with less fixed cost per "
            "call) or a smaller gamma would move it.")


def _verify(e: dict, f: float) -> str:
    return (f"Verification is the largest factor (x{f:.2f}): checking {_n(e['gamma_eff'] + 1)} tokens in one target pass "
            f"costs v = {e['v']:.2f} one-token steps where the paper assumes 1; the target does not batch for free on "
            "this device, so a smaller gamma or hardware with idle parallelism (a GPU) would move it.")


def _overhead(e: dict, f: float) -> str:
    return (f"Sampling and orchestration are the largest factor (x{f:.2f}): each round spends o = {e['o']:.2f} "
            "target steps outside the models; a leaner runtime loop (fewer copies, synchronizations and Python per "
            "round) would help more than a better draft.")


def _costs_text(e: dict, f: float) -> str:
    return (f"The runtime's cost per round is the largest factor (x{f:.2f}: {e['cost_per_round']:.2f} target steps "
            "per round, which this runtime does not split into draft, verify and overhead).")


def _prefill(e: dict, f: float) -> str:
    return (f"Prefill is the largest factor (x{f:.2f}): both models process the prompt, which weighs on short "
            "generations; longer outputs amortize it (it says nothing about decoding speed).")


VERDICTS = {"acceptance": _acceptance, "draft": _draft, "verify": _verify, "overhead": _overhead,
            "costs": _costs_text, "prefill": _prefill}


def verdict(expl: dict) -> str:
    """One sentence naming the largest factor and what would move it; before it, where the cell's
    acceptance is not what its models predict (core/acceptance.py), that first."""
    chk, out = expl.get("acceptance_check") or {}, expl.get("output_check") or {}
    off = "" if chk.get("verdict") not in ("below", "above") else (
        f"Acceptance is not the models': measured {chk['alpha']:.2f}, expected {chk['alpha_lo']:.2f}-{chk['alpha_hi']:.2f} "
        f"for this runtime's rule ({chk['rule']}) with {chk['source']}; the runtime, not the draft, sets it. ")
    if out.get("verdict") == "unlikely":
        off = (f"Its sampled tokens are not the target's samples (z = {out['z']:.1f}): its sampler draws from another "
               "distribution, and its acceptance along them says little. ") + off
    if expl["unavailable"]:
        return off + f"No decomposition: {expl['unavailable']}."
    top = largest(expl)
    if top is None:
        return off + "Nothing here costs speed: every factor is at or above 1."
    key, f = top
    return off + VERDICTS[key](expl, f)


def residual_sentence(expl: dict) -> Optional[str]:
    """What the residual is made of, always (a residual is reported, not hidden)."""
    if expl["unavailable"]:
        return None
    r, p = expl["residual"], expl["residual_parts"]
    parts = [f"rounds yielded {expl['tau']:.2f} tokens, not the {expl['tau_model']:.2f} of the i.i.d. model at "
             f"alpha_hat (x{p['acceptance']:.3f}: acceptance varies by position and prompt, and each generation's "
             "last round is cut at max_new_tokens or EOS)"]
    parts.append(f"x{p['other']:.3f} unexplained")
    head = "within" if abs(r - 1) <= RESIDUAL_TOLERANCE else "outside"
    return (f"Residual x{r:.3f} (measured / product, {head} {RESIDUAL_TOLERANCE:.0%}): " + "; ".join(parts) + ".")


def noise_sentence(expl: dict) -> Optional[str]:
    """A warning when pooled c or v stray from the medians of the report's table: a few slow
    rounds (contention, a page fault, a first call) weigh in the sums but not in the medians."""
    far = []
    for key, name in (("c", "c"), ("v", "v")):
        pooled, med = expl[key], expl[f"{key}_median"]
        if pooled and med and max(pooled, med) > NOISE_RATIO * min(pooled, med):
            far.append(f"{name} {pooled:.2f} pooled vs {med:.2f} median")
    if not far:
        return None
    return (f"Timing noise: {', '.join(far)}; a few slow rounds weigh in the pooled costs (which multiply back "
            "to the measured speedup) but not in the medians; repeat the run on a quieter machine to trust the split.")


def what_if(expl: dict, costs: theory.RoundCosts, max_gamma: int = theory.MAX_GAMMA) -> dict:
    """Breakeven alpha (this gamma, any gamma), best fixed gamma, and the speedups there: the
    costed model's (`costs`, with their floors), and the run's (what_if_run). "now" is the model of
    the rounds as run: tau_model over their drafted lengths and the costs they were measured to
    have at the mean drafted length (no floors: what they cost is what the run's time holds), so
    it also holds for policies whose rounds draft different lengths."""
    a, g = expl["alpha_hat"], expl["gamma"]
    best = theory.optimal_gamma(a, costs, max_gamma)
    now = expl["tau_model"] * (1 + expl["o_base"]) / (expl["gamma_eff"] * expl["c"] + expl["v"] + expl["o"])
    there = theory.costed_speedup(a, best, costs)
    anywhere = [b for b in (theory.breakeven_alpha(x, costs) for x in range(1, max_gamma + 1)) if b is not None]
    return {"breakeven_alpha": theory.breakeven_alpha(g, costs),
            "breakeven_alpha_any_gamma": min(anywhere) if anywhere else None,
            "best_gamma": best, "model_speedup": now, "model_speedup_best": there,
            "run_speedup_best": what_if_run(expl, now, there, best)}


def what_if_run(expl: dict, now: float, there: float, gamma: int) -> float:
    """The speedup the run would have had at `gamma`, where the model gives `there` against `now`
    as run: the baseline's wall per token as measured, and the speculative one's prefill time per
    token held (the prompt costs what it cost, whatever gamma follows) and its decode time per
    token times now / there (the model's cost per token there; the residual held with it).
    Prefill is held as time, not as the factor it was: a factor above 1 comes from a prefill that
    dilutes a slow decode toward 1x, and multiplied into a faster decode it would claim a gain no
    round can give (above tau at low acceptance).

    The result is at most tau(alpha_hat, gamma): a round costs at least a baseline step (the
    floors of _round_costs) and prefill only moves the speedup toward 1x. Only the residual can
    lift it past tau, where the rounds as run yielded more than Eq. 1 at alpha_hat (acceptance
    falling along the draft): held at another gamma that excess is not the model's to promise, so
    the ceiling is applied as a guard."""
    p = expl["prefill_share"] or 0.0
    run = expl["measured"] / (p + (1 - p) * now / there)
    return min(run, theory.expected_tokens(expl["alpha_hat"], gamma))


def what_if_sentence(expl: dict) -> Optional[str]:
    """The what-if in words: breakeven alpha here, the best gamma and what the run would have had."""
    w = expl["what_if"]
    if not w:
        return None
    g, b = expl["gamma"], w["breakeven_alpha"]
    here = (f"at gamma {g} no alpha reaches 1.00x with these costs" if b is None
            else f"breaking even at gamma {g} needs alpha_hat {b:.2f} (now {expl['alpha_hat']:.2f})")
    best = (f"gamma {w['best_gamma']} is best at these costs: the run would have had about "
            f"{w['run_speedup_best']:.2f}x" if w["best_gamma"] != g else f"gamma {g} is already the best at these costs")
    return f"What-if: {here}; {best}."


# ---------------------------------------------------------------- all cells of a run


def _round_costs(expl: dict, same: list[dict]) -> Optional[theory.RoundCosts]:
    """RoundCosts of a cell: its c and o_base; v and o through the cells measured in `same`, each
    at its mean drafted length per round (a verify pass checks that many drafts plus one).

    Each has the floor of the work it prices, which a pooled split can fall under by timing noise
    (one slow baseline step inflates o_base; a quiet spell shrinks v): a verify pass costs at least
    the one-token step it is measured in (v >= 1), and a round's sampling and orchestration at
    least a baseline step's (o >= o_base: it chooses at least one token in the same loop). So a
    round costs at least a baseline step, 1 + o_base, and the model's speedup stays at most tau."""
    if expl["unavailable"] or None in (expl["c"], expl["v"], expl["o"], expl["o_base"]):
        return None
    pts = [e for e in same if not e["unavailable"] and None not in (e["v"], e["o"]) and e["gamma_eff"]]
    v = theory.piecewise_linear({e["gamma_eff"]: e["v"] for e in pts}, anchor=1.0, floor=1.0)
    o = theory.piecewise_linear({e["gamma_eff"]: e["o"] for e in pts}, floor=max(0.0, expl["o_base"]))
    return theory.RoundCosts(expl["c"], v, o, expl["o_base"])


def explain(rows: list[dict]) -> list[dict]:
    """One explanation per speculative cell of `rows` (error rows left out), labelled as in the
    report's tables, with its waterfall, verdict, residual sentence and what-if."""
    groups = tables.cell_groups(rows)
    records = [tables.cell_record(b, s, g) for b, s, g in groups]
    vary = tables.varying(records)
    out = []
    for (base, spec, g), rec in zip(groups, records):
        if not spec:
            continue
        e = decompose(spec, base, g, rec["alpha_hat"])
        e.update({k: rec[k] for k in tables.SETTINGS}, pair_label=rec["pair_label"], label=tables.label(rec, vary),
                 c_median=rec["c_measured"], v_median=rec["verify_cost_ratio"], acceptance_check=rec["acceptance_check"],
                 output_check=rec["output_check"])
        out.append(e)
    for e in out:
        same = [x for x in out if all(str(x[k]) == str(e[k]) for k in tables.SETTINGS)]
        costs = _round_costs(e, same)
        e["what_if"] = what_if(e, costs) if costs else None
        e["v_points"] = sorted({x["gamma"] for x in same if x["v"] is not None})
        e["verdict"], e["residual_text"], e["noise_text"] = verdict(e), residual_sentence(e), noise_sentence(e)
        e["what_if_text"] = what_if_sentence(e)
    return out


# ---------------------------------------------------------------- across runtimes


COMPARED = [
    ("alpha_hat", "the models or their sampling (e.g. quantized weights, other numerics)"),
    ("c", "how fast the draft runs next to the target (kernels, fixed cost per call, quantization)"),
    ("v", "what a batched verify pass costs (kernels, threads, the device's spare parallelism)"),
    ("o", "the runtime's loop: sampling and orchestration per round"),
    ("o_base", "the runtime's loop: the baseline's own overhead per step"),
]


def _differs(key: str, vals: list[float]) -> bool:
    if key == "alpha_hat":
        return max(vals) - min(vals) > DIFFERS_ALPHA
    lo, hi = min(vals), max(vals)
    return hi > DIFFERS_RATIO * lo if lo > 0 else hi > 0


def _compare_group(title: str, by: str, group: list[dict]) -> str:
    same, diff = [], []
    for key, meaning in COMPARED:
        vals = {str(e[by]): e[key] for e in group if e[key] is not None}
        if len(vals) < 2:
            continue
        if _differs(key, list(vals.values())):
            listed = ", ".join(f"{who} {v:.2f}" for who, v in vals.items())
            diff.append(f"{key} differs ({listed}): {meaning}")
        else:
            same.append(key)
    if not diff:
        return f"{title}: every factor agrees within {DIFFERS_RATIO - 1:.0%} (alpha_hat within {DIFFERS_ALPHA})."
    agree = f"{', '.join(same)} agree; " if same else ""
    return f"{title}: {agree}" + "; ".join(diff) + "."


def compare(expls: list[dict]) -> list[str]:
    """Sentences: across runtimes on the same pair and settings, and for one runtime across pairs
    or devices, which factors differ and what that points at."""
    sampling = ["gamma", "temperature", "top_p", "top_k", "max_new_tokens"]
    ok = [e for e in expls if not e["unavailable"]]
    lines = []
    for by, fixed, what in (("runtime", ["pair"] + sampling, "runtimes"), ("pair", ["runtime", "device"] + sampling, "pairs"),
                            ("device", ["runtime", "pair"] + sampling, "devices")):
        for group in tables.groups(ok, fixed):
            if len({str(e[by]) for e in group}) < 2:
                continue
            head = group[0]
            fixed_txt = ", ".join(f"{k} {head[k]}" for k in fixed if k not in ("max_new_tokens",))
            lines.append(_compare_group(f"Across {what} ({fixed_txt})", by, group))
    return lines
