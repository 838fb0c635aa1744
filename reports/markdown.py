"""The report's words and numbers as markdown: the columns, paragraphs and row views of each
section of report.md (the verdict, reports/verdict.py, with verdict.png, first; then speed,
acceptance, ceiling, where the time goes and the rest), each table at most ten columns (the CSVs
keep every column), each cell once; what did not run is listed as skipped, never as rows. Also
the explain and roofline sections, laid out here as lines, which `harness explain` prints too.

The speed section's headline names the fastest runtime and by how much, where its time goes, how
far its best speculative setting is from Leviathan's ceiling, and what theory suggests trying next.
What it does not do: compute numbers (tables.py, core.metrics, core.theory), draw, or choose the
sections and their order (build.py lists them as reports/sections.py's Section, which lays them out).
"""

from __future__ import annotations

from typing import Optional

from spec_harness.core import theory
from spec_harness.reports.tables import PHASES, label, varying

MISMATCH_TEXT = (
    "Where a greedy speculative output leaves its own baseline's, the target's logits at the first differing token "
    "were recomputed on the common prefix twice, one token per pass (as the baseline) and inside a batch shaped like "
    "the verify pass that emitted it (as speculation). When the largest difference between the two logit vectors is at "
    "least the one-token top-2 margin, batched numerics alone can swap the winner: a near-tie flip, not the algorithm. "
    "Otherwise numerics cannot explain the speculative token: a suspected bug.")


def _f(v, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if v is None else format(v, spec) + suffix


def md_table(records: list[dict], columns: list[tuple[str, str, str]]) -> list[str]:
    """columns: (key, header, format spec); a spec ending in 'x' or '%' appends that sign."""
    out = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for r in records:
        cells = []
        for key, _, spec in columns:
            v = r.get(key)
            if spec in ("", "s") or not isinstance(v, (int, float)) or isinstance(v, bool):
                cells.append("-" if v is None else str(v))
            else:
                unit = spec[-1] if spec[-1] in "x%" else ""
                cells.append(_f(v, spec.rstrip("x%"), unit))
        out.append("| " + " | ".join(cells) + " |")
    return out


# ---------------------------------------------------------------- headline


def _best(records: list[dict]) -> Optional[dict]:
    ok = [c for c in records if c["tokens_per_s"] is not None]
    return max(ok, key=lambda c: c["tokens_per_s"]) if ok else None


def _time_split(c: dict) -> str:
    parts = sorted(((c[f"{p[:-2]}_pct"], p[:-2]) for p in PHASES if c[f"{p[:-2]}_pct"] is not None), reverse=True)
    hidden = [p[:-2] for p in PHASES if c[p] is None]
    txt = ", ".join(f"{name} {pct:.0f}%" for pct, name in parts)
    return txt + (f" ({', '.join(hidden)} not visible to this runtime)" if hidden else "")


def _ceiling_line(c: dict) -> str:
    if c["theory_speedup_measured"] is None or c["speedup"] is None:
        return (f"**Ceiling:** unknown for {c['runtime']}: it needs its draft and verify time and a baseline "
                "with its target time under the same settings, which these rows lack.")
    pooled = " (from pooled phases: this runtime times no round)" if c.get("costs_from") == "pooled phases" else ""
    line = (f"**Ceiling:** at alpha_hat {c['alpha_hat']:.2f}, gamma {c['gamma']} and measured c {c['c_measured']:.3f}{pooled}, "
            f"Leviathan's formula allows {c['theory_speedup_measured']:.2f}x; measured {c['speedup']:.2f}x is "
            f"{100 * c['ceiling_fraction']:.0f}% of it")
    if c["ceiling_gap"] > 0:
        vr = c["verify_cost_ratio"]
        shares = ", ".join(f"{name} {_f(c[f'{name}_pct'], '.0f', '%')}" for name in ("prefill", "sampling", "unaccounted"))
        line += (f". The {c['ceiling_gap']:.2f}x gap is what the formula does not model: "
                 + (f"a verify pass costs {vr:.2f} target steps (the formula assumes 1); " if vr is not None else "")
                 + f"{shares} of wall")
    if c["theory_speedup_flops"] is not None:
        line += f". FLOPs-only ceiling: {c['theory_speedup_flops']:.2f}x (c_flops {c['c_flops']:.4f})"
    return line + "."


def _next_step(c: dict) -> Optional[str]:
    a, cm, g = c["alpha_hat"], c["c_measured"], c["gamma"]
    if a is None or cm is None:
        return None
    best = c["best_gamma_measured"]
    best_s = theory.expected_speedup(a, best, cm)
    if best_s <= 1:
        b = theory.breakeven_alpha(g, cm)
        if b is None:
            return (f"**Next:** a draft step costs more than a target step here (c measured {cm:.2f}), so no "
                    "acceptance rate can pay off: a cheaper draft (or a runtime where it is cheaper) comes first.")
        return (f"**Next:** no gamma wins at this acceptance and cost (best {best_s:.2f}x at gamma {best}); gamma {g} "
                f"needs alpha above {b:.2f} (now {a:.2f}): a better-matched draft or more predictable content.")
    if best != g:
        return f"**Next:** theory's best gamma at this alpha and measured c is {best} ({best_s:.2f}x expected vs {c['theory_speedup_measured']:.2f}x at gamma {g})."
    return None


def headline(cells: list[dict]) -> list[str]:
    spec = [c for c in cells if c["mode"] == "speculative"]
    best = _best(cells)
    if best is None:
        return ["No successful generations to report."]
    vary = varying(cells)
    by_rt = {rt: _best([c for c in cells if c["runtime"] == rt]) for rt in dict.fromkeys(c["runtime"] for c in cells)}
    lead = f"**Fastest: {best['runtime']}** ({label(best, vary)}), {best['tokens_per_s']:.1f} tok/s"
    others = sorted((c for rt, c in by_rt.items() if rt != best["runtime"] and c), key=lambda c: -c["tokens_per_s"])
    if others:
        lead += f", {best['tokens_per_s'] / others[0]['tokens_per_s']:.2f}x the next runtime, {others[0]['runtime']} ({others[0]['tokens_per_s']:.1f} tok/s)"
    mine = [c for c in spec if c["runtime"] == best["runtime"] and c["tokens_per_s"] is not None]
    focus = _best(mine)
    if best["mode"] == "speculative":
        lead += f"; {_f(best['speedup'])}x over its own baseline."
    elif focus is not None:
        lead += f", target-only: no speculative setting beats it (best {label(focus, vary)} at {_f(focus['speedup'])}x)."
    else:
        lead += " (baseline only: no speculative rows)."
    lines = [lead]
    if focus is not None:
        lines.append(f"**Time ({label(focus, vary)}):** {_time_split(focus)} of wall.")
        lines.append(_ceiling_line(focus))
        nxt = _next_step(focus)
        if nxt:
            lines.append(nxt)
    return lines


# ---------------------------------------------------------------- the sections' columns, text and rows


SPEED_COLS = [("label", "cell", "s"), ("device", "device", "s"), ("against", "against the baseline of", "s"),
              ("n", "gens", ""), ("new_tokens", "tokens", ""), ("tokens_per_s", "tok/s", ".1f"),
              ("speedup", "speedup", ".2fx"), ("speedup_median", "median speedup", ".2fx"), ("speedup_iqr", "IQR", ".2f")]
ACCEPTANCE_COLS = [("label", "cell", "s"), ("acceptance_rate", "accepted/drafted", ".3f"), ("alpha_hat", "alpha_hat", ".3f"),
                   ("mean_accepted_len", "tokens/round", ".2f"),
                   ("acceptance_length", "acceptance length, per step", ".2f"),
                   ("acceptance_length_per_request", "per request", ".2f"), ("mean_drafted", "drafted/round", ".2f"),
                   ("drafted_text", "rounds by drafted length (length:rounds)", "s")]
SPEED_TEXT = (
    "Speedup: baseline wall per token / speculative wall per token, same runtime and settings; a drafting "
    "(e.g. `torch [eagle3]`) is set against its runtime's baseline, listed once.")
TUNE_TEXT = (
    "Predicted from the probe (gamma 1, or 2 for vLLM, and the largest; the draft model also at 2 and "
    "stopping under confidence 0.5), confirmed beside the baseline; the rest of this report pools the probe's and the "
    "confirm runs' rows.")
POSITION_COLS = [("label", "cell", "s"), ("position", "draft position", ""),
                 ("acceptance", "accepted, given the ones before", ".3f"), ("marginal", "accepted, of every round", ".3f")]
ACCEPTANCE_TEXT = (
    "tokens/round is tau over every round (a round's emitted tokens, the last one cut at max_new_tokens or EOS); the "
    "acceptance length is SPEED-Bench's, accepted drafts + 1 per round that drafted, per step (pooled over the cell's "
    "rounds) and per request (the mean of each generation's own). Per position: conditional (accepted at i given "
    "1..i-1 accepted, what alpha_hat pools) and marginal (accepted at i over every drafting round); the acceptance "
    "length is 1 + the sum of the marginals.")
CEILING_COLS = [("label", "cell", "s"), ("c_measured", "c measured", ".3f"), ("c_flops", "c FLOPs", ".4f"),
                ("verify_cost_ratio", "verify / target step", ".2f"), ("theory_speedup_flops", "ceiling (c FLOPs)", ".2fx"),
                ("theory_speedup_measured", "ceiling (c measured)", ".2fx"), ("speedup", "measured", ".2fx"),
                ("ceiling_gap", "gap to ceiling", ".2fx")]
CEILING_TEXT = (
    "alpha_hat is Leviathan's alpha (accepted / (accepted + rejections)); the ceilings are his "
    "E[speedup] = (1 - a^(g+1)) / ((1 - a)(g c + 1)) at alpha_hat, with c from FLOPs per token and with c "
    "measured (median draft step / median target step); the gap is the measured-c ceiling minus the "
    "measured speedup.")
PHASE_COLS = [("label", "cell", "s"), ("wall_s", "wall s", ".3f")] + [(f"{p[:-2]}_text", f"{p[:-2]} s (% of wall)", "s") for p in PHASES]
CATEGORY_COLS = [("label", "cell", "s"), ("category", "category", "s"), ("n", "gens", ""),
                 ("acceptance_rate", "accepted/drafted", ".3f"), ("alpha_hat", "alpha_hat", ".3f"),
                 ("mean_accepted_len", "tokens/round", ".2f"), ("speedup", "speedup", ".2fx")]
PLOTS = [("phases.png", "Where the time goes"), ("speedup_vs_gamma.png", "Measured speedup vs ceiling"),
         ("acceptance_vs_gamma.png", "Acceptance per prompt category"), ("per_position.png", "Per-position acceptance")]
VERDICT_PNG = "verdict.png"


FIGURE_COLS = [("run", "run", "s"), ("runtime", "runtime", "s"), ("pair", "pair", "s"), ("T", "T", ""),
               ("gamma", "gamma", ""), ("alpha_hat", "alpha_hat", ".3f"), ("speedup", "speedup", ".2fx"),
               ("spec_tok_s", "speculative tok/s", ".1f"), ("base_tok_s", "baseline tok/s", ".1f"),
               ("greedy_match", "greedy match", "")]


MISMATCH_COLS = [("runtime", "runtime", "s"), ("prompt", "prompt", "s"), ("gamma", "gamma", ""), ("position", "token", ""),
                 ("baseline", "baseline chose", "s"), ("speculative", "speculative chose", "s"),
                 ("margin_one_token", "top-2 margin, one-token pass", ".3f"), ("margin_batched", "top-2 margin, batched pass", ".3f"),
                 ("max_abs_diff", "max logit difference", ".3f"), ("verdict", "verdict", "s")]
AGREEMENT_COLS = [("prompt", "prompt", "s"), ("a", "runtime A", "s"), ("b", "runtime B", "s"), ("agree", "same ids", ""),
                  ("position", "first different token", ""), ("token_a", "A chose", ""), ("margin_a", "A's top-2 margin", ".3f"),
                  ("token_b", "B chose", ""), ("margin_b", "B's top-2 margin", ".3f")]
SKIPPED_COLS = [("runtime", "runtime", "s"), ("what", "", "s"), ("reason", "reason", "s")]
MODELS_COLS = [("label", "cell", "s"), ("rule", "rule", "s"), ("source", "draft", "s"), ("tested", "tested drafts", ""),
               ("alpha", "alpha_hat", ".3f"), ("alpha_expected", "the models' alpha", ".3f"),
               ("interval", "expected interval", "s"), ("verdict", "verdict", "s"), ("z", "sampled tokens' z", ".1f")]
MODELS_TEXT = (
    "What each cell should have accepted with its models and its verification rule: every tested draft position "
    "(the accepted drafts of each round and its first rejected one) teacher-forced through the pair in torch float32 "
    "on the row's own tokens, its acceptance probability from the rule (greedy-match: the argmaxes agree; leviathan: "
    "sum min(p, q); sample-match: p of the draft's argmax, or sum p q where the draft is sampled) at the row's "
    "temperature, top-p and top-k. The accepted count minus the expected one has mean 0 and variance sum a(1 - a) "
    "whatever the rounds' stopping; the interval is 3.3 standard deviations, a greedy test within 0.25 logits of a "
    "tie counted as a fair coin. Outside it, the runtime accepts otherwise than its models and rule predict: not the models. "
    "Sampled cells also set their tokens against the target's own samples: the sum of log p_T(token) over the output "
    "(the target at the temperature) against its mean and variance under the sampling distribution; z below -3.3 means "
    "tokens the target would rarely draw, a sampler drawing from another distribution (and acceptance measured along "
    "such tokens says little).")


def acceptance_records(cells: list[dict]) -> list[dict]:
    """A record per speculative cell whose rows were checked against the models (runtimes/expected.py)."""
    out = []
    for c in cells:
        chk = c.get("acceptance_check")
        if c["mode"] == "speculative" and chk:
            out.append({"label": c["label"], **chk, "interval": f"{chk['alpha_lo']:.2f}-{chk['alpha_hi']:.2f}",
                        "z": (c.get("output_check") or {}).get("z")})
    return out


def phase_texts(cells: list[dict]) -> list[dict]:
    """Each phase as "seconds (percent of wall)", one column per phase."""
    return [{**c, **{f"{p[:-2]}_text": "-" if c[p] is None else f"{c[p]:.3f} ({_f(c[f'{p[:-2]}_pct'], '.1f')}%)"
                     for p in PHASES}} for c in cells]


def against(cells: list[dict]) -> list[dict]:
    """Speculative cells name the baseline they are set against (their runtime's: a drafting view
    such as "torch [eagle3]" has no baseline rows of its own)."""
    return [{**c, "against": c["runtime_name"] if c["mode"] == "speculative" else ""} for c in cells]


def opening(cells: list[dict]) -> list[str]:
    """The report's title and its pairs."""
    pairs = list(dict.fromkeys(c.get("pair_label") or c["pair"] for c in cells))
    return ["# Speculative decoding report", "", f"**Pair{'s' if len(pairs) > 1 else ''}:** {'; '.join(pairs)}"]


def verdict_text(verdict: list[str], plots: list[str]) -> list[str]:
    """reports/verdict.markdown's lines, then verdict.png where it was drawn."""
    return verdict + (["", f"![Speed of each runtime and drafter, and why]({VERDICT_PNG})"] if VERDICT_PNG in plots else [])


def tune_text(console: list[str]) -> list[str]:
    """What `harness tune` printed (its tune.json), after a paragraph on where it comes from."""
    return [TUNE_TEXT, "", "```", *console, "```"]


def plot_text(plots: list[str]) -> list[str]:
    """A `###` heading and the image of each of PLOTS that was drawn."""
    out = []
    for name, title in PLOTS:
        if name in plots:
            out += ([""] if out else []) + [f"### {title}", "", f"![{title}]({name})"]
    return out


def bullets(lines: list[str]) -> list[str]:
    return [f"- {line}" for line in lines]


def sources_line(sources: list[str]) -> str:
    return "Sources: " + ", ".join(f"`{s}`" for s in sources)


# ---------------------------------------------------------------- explain (reports/explain.py)


FACTOR_COLS = [("tau", "tau", ".2fx"), ("draft", "× draft", ".3f"), ("verify", "× verify", ".3f"),
               ("overhead", "× sampling+orch.", ".3f"), ("costs", "× costs (not separable)", ".3f"),
               ("baseline", "× baseline overhead", ".3f"), ("prefill", "× prefill", ".3f"),
               ("residual", "× residual", ".3f"), ("measured", "= measured", ".2fx")]
COST_COLS = [("label", "cell", "s"), ("alpha_hat", "alpha_hat", ".3f"), ("c", "c", ".3f"), ("v", "v", ".2f"),
             ("o", "o", ".2f"), ("o_base", "o_base", ".2f"), ("target_step_ms", "target step ms", ".3f")]
WHAT_IF_COLS = [("label", "cell", "s"), ("breakeven_alpha", "breakeven alpha (this gamma)", ".3f"),
                ("breakeven_alpha_any_gamma", "lowest breakeven alpha (any gamma)", ".3f"), ("best_gamma", "best gamma", ""),
                ("model_speedup", "model now", ".2fx"), ("model_speedup_best", "model at best gamma", ".2fx"),
                ("run_speedup_best", "run at best gamma", ".2fx")]
EXPLAIN_TEXT = (
    "Each factor multiplies: tau = (1 - a^(d+1)) / (1 - a) at alpha_hat, averaged over the rounds' drafted "
    "lengths d, is the speedup if drafting and verifying were free; g is the mean drafted length per round (gamma "
    "under a fixed policy, less in a last round cut short; the policy's choice otherwise); × 1/(g c + 1) prices the draft (Leviathan's E[speedup]); × (g c + 1)/(g c + v) a verify pass of "
    "g + 1 tokens costing v target steps; × (g c + v)/(g c + v + o) the sampling and orchestration per round; "
    "× (1 + o_base) the baseline's own overhead per step, which slows the baseline alike; × prefill the prompt "
    "processing of both sides. c, v, o and o_base are pooled (sums over the cell's generations) in units of the "
    "baseline's mean target step, so the product differs from the measured speedup only by the residual, which "
    "is the acceptance model's error (and noise). What-if: breakeven alpha and best fixed gamma from "
    "the same costs, assuming c, o and o_base independent of gamma and v linear in the batch from 1 at gamma 0 "
    "through the v measured at each cell's mean drafted length (extrapolated with the last slope); 'run at best gamma' scales the "
    "measured speedup by the model's ratio, holding prefill and residual; a breakeven of '-' means no alpha reaches "
    "1.00x at that gamma."
)


def _waterfall_record(e: dict) -> dict:
    rec = {"label": e["label"], "product": e["product"], "measured": e["measured"]}
    rec.update({f["key"]: f["factor"] for f in e["factors"]})
    return rec


def explain_section(expls: list[dict], comparisons: list[str], plot: Optional[str] = None) -> list[str]:
    """The report's explain section (also what `harness explain` prints)."""
    out = ["## Why this speedup: factors from tau to measured", ""]
    done = [e for e in expls if not e["unavailable"]]
    if done:
        recs = [_waterfall_record(e) for e in done]
        cols = [c for c in FACTOR_COLS if any(r.get(c[0]) is not None for r in recs)]
        out += md_table(recs, [("label", "cell", "s")] + cols) + [""]
        out += md_table(done, COST_COLS) + [""]
        out += md_table([{**e, **(e["what_if"] or {})} for e in done], WHAT_IF_COLS) + [""]
    out += [f"- **{e['label']}:** " + " ".join(x for x in (e["verdict"], e["what_if_text"], e["residual_text"], e["noise_text"]) if x)
            for e in expls]
    out += [f"- {line}" for line in comparisons]
    out += ["", EXPLAIN_TEXT, ""]
    if plot:
        out += [f"![Speedup waterfall]({plot})", ""]
    return out


# ---------------------------------------------------------------- against the machine (reports/roofline.py)


ROOFLINE_COLS = [("label", "cell", "s"), ("step", "step", "s"), ("tokens", "tokens", ".3g"), ("context", "context", ".0f"),
                 ("measured_ms", "measured ms", ".3g"), ("memory_bound_ms", "memory bound ms", ".3g"),
                 ("compute_bound_ms", "compute bound ms", ".3g"), ("fraction", "fraction of bound", ".2f"),
                 ("binds", "limit", "s"), ("kinds", "weights / compute", "s")]
ROOFLINE_TEXT = (
    "A one-token step cannot be faster than reading the model's weights and its KV cache so far once from memory "
    "(memory bound: bytes / this machine's read bandwidth), and a pass over several tokens cannot be cheaper than "
    "its arithmetic (compute bound: FLOPs, the attention term included, / the GEMM throughput of the model's compute "
    "kind, int8 for llama.cpp's quantized weights). The fraction is the larger bound / the measured step: 1 is this "
    "machine's limit; the read bandwidth is a high estimate, so the fraction is strict. Steps: the baseline's "
    "target step (verify_s / rounds), the draft's (draft_s / drafted) and the verify pass of drafted + 1 tokens "
    "(verify_s / rounds), pooled over the cell; context: the prompt plus half the generated tokens.")


def roofline_section(records: list[dict], notes: list[str], limits: list[str]) -> list[str]:
    """The report's "Against this machine's limits" section (also what `harness explain` prints):
    the limits, a table of the steps, one sentence each, and what could not be set against them."""
    out = ["## Against this machine's limits", ""]
    out += [f"- Limits: {line}" for line in limits]
    if records:
        kinds = [{**r, "kinds": f"{r.get('weights') or '-'} / {r.get('compute') or '-'}"} for r in records]
        out += [""] + md_table(kinds, ROOFLINE_COLS) + [""]
    out += [f"- {r['sentence']}" for r in records] + [f"- {n}" for n in notes]
    out += ["", ROOFLINE_TEXT, ""] if records else [""]
    return out
