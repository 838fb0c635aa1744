"""The table `harness run` prints: per runtime and mode, tokens/s, speedup, acceptance, alpha_hat,
and the phase breakdown in seconds and percent of wall. Numbers come from metrics.summarize."""

from __future__ import annotations

import click

from harness import metrics

PHASES = ("prefill_s", "draft_s", "verify_s", "sampling_s", "unaccounted_s")


def _f(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def summary_lines(rows: list[dict]) -> list[str]:
    head = (f"{'runtime':<16}{'mode':<12}{'tok/s':>8}{'speedup':>9}{'accept':>8}{'alpha^':>8}{'tau':>6}"
            + "".join(f"{p[:-2]:>18}" for p in PHASES) + f"{'wall':>9}")
    lines = [head, "-" * len(head)]
    for s in metrics.summarize(rows):
        wall = s["wall_s"]
        cells = "".join(
            f"{'-':>18}" if s[p] is None else f"{s[p]:>9.3f}s ({100 * s[p] / wall:4.1f}%)" for p in PHASES
        )
        lines.append(
            f"{s['runtime']:<16}{s['mode']:<12}{_f(s['tokens_per_s'], '8.1f')}"
            f"{_f(s.get('speedup'), '8.2f') + ('x' if s.get('speedup') else ' '):>9}"
            f"{_f(s.get('acceptance_rate'), '8.2f')}{_f(s.get('alpha_hat'), '8.2f')}{_f(s.get('mean_accepted_len'), '6.2f')}"
            f"{cells}{wall:>8.2f}s"
        )
        if s.get("greedy_match") is False:
            lines.append(f"  !! {s['runtime']}: greedy speculative output differs from the baseline")
    skipped = sorted({(r["runtime"], r["error"]) for r in rows if r.get("error")})
    lines += [f"{rt}: {err}" for rt, err in skipped]
    return lines


def print_summary(rows: list[dict]) -> None:
    click.echo("\n".join(summary_lines(rows)))
