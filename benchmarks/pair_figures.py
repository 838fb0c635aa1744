"""Print the default-pair figures (alpha_hat, acceptance, tau, c_measured, speedup, tokens/s) of
`harness run` output folders, one line per speculative setting. Reads results.jsonl; measures nothing.

    python benchmarks/pair_figures.py runs/a runs/b ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness import metrics


def figures(folder: Path) -> list[dict]:
    rows = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines() if x.strip()]
    out = []
    for s in metrics.summarize(rows):
        if s["mode"] != "speculative":
            continue
        same = [r for r in rows if r["runtime"] == s["runtime"] and r["pair"] == s["pair"]
                and r["temperature"] == s["temperature"]]
        spec = [rd for r in same if r["mode"] == "speculative" and r["gamma"] == s["gamma"] for rd in r["rounds"] or []]
        base = [rd for r in same if r["mode"] == "baseline" for rd in r["rounds"] or []]
        base_s = [r for r in metrics.summarize(same) if r["mode"] == "baseline"]
        out.append({"run": folder.name, "runtime": s["runtime"], "T": s["temperature"], "gamma": s["gamma"],
                    "alpha_hat": s["alpha_hat"], "acceptance": s["acceptance_rate"], "tau": s["mean_accepted_len"],
                    "c_measured": metrics.c_measured(spec, base), "speedup": s["speedup"],
                    "spec_tok_s": s["tokens_per_s"], "base_tok_s": base_s[0]["tokens_per_s"] if base_s else None,
                    "greedy_match": s.get("greedy_match")})
    return out


def main() -> None:
    for d in sys.argv[1:]:
        for f in figures(Path(d)):
            print("  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in f.items()))


if __name__ == "__main__":
    main()
