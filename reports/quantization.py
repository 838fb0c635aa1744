"""The report's "Target quantization" section and quantization.csv: per runtime and target variant
(`--target-quant`, models/quantize.py; the rows' `target_quant`, null for the pair as given), the
target's one-token step, baseline tokens/s, the best speculative tokens/s with its setting (gamma,
drafter), its speedup, its verify pass in target steps (v, core.metrics.step_costs, as explain
prices it) and alpha_hat, so that which target is fastest with and without speculation reads off
one table. Only where the rows hold more than one target quantization (the pair as given counts as
one: torch's float weights beside llama.cpp's variants).

What it does not do: compute metrics (core/metrics.py), group rows into cells (tables.py) or lay
out the rest of the report (markdown.py).
"""

from __future__ import annotations

from typing import Optional

from spec_harness.core import metrics
from spec_harness.reports import tables
from spec_harness.reports.runs import drafting

COLS = [("runtime", "runtime", "s"), ("target", "target", "s"), ("target_step_ms", "target step ms", ".2f"),
        ("baseline_tok_s", "baseline tok/s", ".1f"), ("best_tok_s", "best speculative tok/s", ".1f"),
        ("best_setting", "its setting", "s"), ("speedup", "its speedup", ".2fx"),
        ("v", "its verify pass, target steps (v)", ".2f"), ("alpha_hat", "its alpha_hat", ".3f")]
TEXT = (
    "Each target variant is the pair's target made by llama.cpp's own quantizer from the highest-precision source the "
    "harness has (`harness models quantize`); the runtimes that read the float weights run the pair once, as given. "
    "Target step: the baseline's verify time per token (one target pass). The best speculative setting is the fastest "
    "cell of the runtime on that target (every gamma and drafter run); v is its verify pass in target steps, "
    "explain's pooled cost.")
OTHER = [k for k in tables.SETTINGS if k not in ("runtime", "pair", "device", "dtype")]  # settings a record names when they vary


def has_variants(rows: list[dict]) -> bool:
    """Whether the measured rows hold more than one target quantization (the pair as given is one)."""
    return len({r.get("target_quant") for r in rows if not r.get("error")}) > 1


def records(rows: list[dict]) -> list[dict]:
    """One record per runtime (as run.json names it), target variant and other settings, in the
    order the rows have them; [] where the rows hold one target quantization."""
    if not has_variants(rows):
        return []
    out: dict[tuple, dict] = {}
    for base, spec, g in tables.cell_groups(rows):
        first = (spec or base)[0]
        runtime = first.get("runtime_name") or first["runtime"]
        key = (runtime, first["pair"], first.get("target_quant"), *(str(first.get(k)) for k in OTHER))
        rec = out.setdefault(key, _record(runtime, first, base))
        if not spec or not base:
            continue
        cell = tables.cell_record(base, spec, g)
        if cell["tokens_per_s"] is None or (rec["best_tok_s"] is not None and cell["tokens_per_s"] <= rec["best_tok_s"]):
            continue
        k = metrics.step_costs(metrics.pooled(spec), metrics.pooled(base))
        how = drafting(first) or "draft model"
        rec.update(best_tok_s=cell["tokens_per_s"], gamma=g, drafting=how, best_setting=f"gamma {g}, {how}", speedup=cell["speedup"],
                   v=k["v"], c=k["c"], alpha_hat=cell["alpha_hat"])
    recs = list(out.values())
    vary = [k for k in OTHER if len({str(r.get(k)) for r in recs}) > 1]
    for r in recs:
        rest = tables.settings_label(r, vary)
        r["runtime"] = r["runtime_name"] + (f" · {rest}" if rest else "")
    return recs


def _record(runtime: str, first: dict, base: list[dict]) -> dict:
    tq = first.get("target_quant")
    rec = {"runtime_name": runtime, "pair": first["pair"], "pair_label": first.get("pair_label") or first["pair"],
           "target_quant": tq, "dtype": first.get("dtype"),
           "target": tq or f"as given ({first.get('dtype') or '-'})", **{k: first.get(k) for k in OTHER},
           "target_step_ms": None, "baseline_tok_s": None, "best_tok_s": None, "best_setting": None, "gamma": None,
           "drafting": None, "speedup": None, "v": None, "c": None, "alpha_hat": None}
    if base:
        pooled = metrics.pooled(base)
        step = metrics.target_step_s(pooled)
        rec["target_step_ms"] = None if step is None else 1000 * step
        rec["baseline_tok_s"] = tables.cell_record(base, [], None)["tokens_per_s"]
    return rec


def _fastest(recs: list[dict], key: str) -> Optional[dict]:
    ok = [r for r in recs if r[key] is not None]
    return max(ok, key=lambda r: r[key]) if ok else None


def lines(recs: list[dict]) -> list[str]:
    """Per runtime with more than one target: its fastest target without and with speculation."""
    out = []
    for runtime in dict.fromkeys(r["runtime"] for r in recs):
        mine = [r for r in recs if r["runtime"] == runtime]
        if len(mine) < 2:
            continue
        b, s = _fastest(mine, "baseline_tok_s"), _fastest(mine, "best_tok_s")
        words = [f"**{runtime}:** fastest target-only: {b['target']} ({b['baseline_tok_s']:.1f} tok/s)" if b else
                 f"**{runtime}:** no baseline measured"]
        if s:
            words.append(f"fastest with speculation: {s['target']} at {s['best_setting']} ({s['best_tok_s']:.1f} tok/s, "
                         f"{s['speedup']:.2f}x its own baseline)" if s["speedup"] is not None else
                         f"fastest with speculation: {s['target']} at {s['best_setting']} ({s['best_tok_s']:.1f} tok/s)")
        out.append("; ".join(words) + ".")
    return out


def markdown(recs: list[dict]) -> list[str]:
    """The section's lines ([] without records)."""
    from spec_harness.reports.markdown import md_table

    if not recs:
        return []
    return (["## Target quantization", ""] + [f"- {line}" for line in lines(recs)] + [""]
            + md_table(recs, COLS) + ["", TEXT, ""])
