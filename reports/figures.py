"""The figures of each run folder, one record per speculative setting: alpha_hat, acceptance, tau,
c_measured, speedup, speculative and baseline tokens/s, greedy match. `harness report` writes them
to figures.csv and report.json, and to report.md when it reads several folders, so runs of one pair
can be compared at a glance (docs/default-pair.md does). Numbers come from core/metrics.py; what
it does not do: pool rows across folders (tables.py does).
"""

from __future__ import annotations

from pathlib import Path

from spec_harness.core import metrics


def run_figures(rows: list[dict]) -> list[dict]:
    """One record per (run folder, runtime, pair, temperature, gamma, ...) speculative setting."""
    out = []
    for source in dict.fromkeys(r["source"] for r in rows):
        mine = [r for r in rows if r["source"] == source]
        cells = metrics.summarize(mine)
        for s in cells:
            if s["mode"] != "speculative":
                continue
            def same_setting(x: dict) -> bool:  # as s but for mode and gamma
                return all(metrics.group_value(x, k) == s[k] for k in metrics.GROUP_FIELDS if k not in ("mode", "gamma"))

            same = [r for r in mine if not r.get("error") and same_setting(r)]
            spec = [rd for r in same if r["mode"] == "speculative" and r["gamma"] == s["gamma"] for rd in r["rounds"] or []]
            base = [rd for r in same if r["mode"] == "baseline" for rd in r["rounds"] or []]
            base_cell = next((c for c in cells if c["mode"] == "baseline" and same_setting(c)), None)
            out.append({"run": Path(source).name, "runtime": s["runtime"], "pair": s["pair"], "T": s["temperature"],
                        "gamma": s["gamma"], "alpha_hat": s["alpha_hat"], "acceptance": s["acceptance_rate"],
                        "tau": s["mean_accepted_len"], "c_measured": metrics.c_measured(spec, base),
                        "speedup": s["speedup"], "spec_tok_s": s["tokens_per_s"],
                        "base_tok_s": base_cell["tokens_per_s"] if base_cell else None, "greedy_match": s.get("greedy_match")})
    return out
