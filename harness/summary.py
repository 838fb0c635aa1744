"""What `harness run` and `harness sweep` print at the end: the verdict (reports/verdict.py), which
fits 100 columns, and with `--table` before it the full table: the pair's label, then per runtime,
mode and setting, tokens/s, speedup, acceptance, alpha_hat, tau, drafts per round and the phase
breakdown in seconds and percent of wall (a second table), each fitted to 100 columns
(harness/console.py); under them the greedy mismatches (reports/mismatch.py), and whether the
runtimes' greedy baselines agree. Numbers come from core.metrics.summarize; settings columns appear
only when they vary."""

from __future__ import annotations

import textwrap

import click

from spec_harness.core import metrics
from spec_harness.core.timing import PHASE_FIELDS as PHASES
from spec_harness.reports import mismatch, tables
VARYING = (("pair", "pair"), ("gamma", "g"), ("temperature", "T"), ("top_p", "top_p"), ("max_new_tokens", "max_new"),
           ("concurrency", "N"))


def _num(x, spec: str = "", suffix: str = "") -> str:
    return "-" if x is None else format(x, spec) + suffix


def _table(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table, for console.fit to lay out in the terminal's columns."""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows])


def summary_lines(rows: list[dict]) -> list[str]:
    from spec_harness.harness.console import fit
    from spec_harness.reports.runs import by_drafting

    measured = rows = [r for r in rows if not r.get("synthetic")]  # forced acceptance: not a speedup of the pair
    rows = by_drafting(rows)  # views such as "torch [ngram]" carry copies of their runtime's baseline rows
    views = {r["runtime"] for r in rows if "runtime_name" in r}
    groups = [g for g in metrics.summarize(rows) if not (g["mode"] == "baseline" and g["runtime"] in views)]
    pairs = dict.fromkeys((r["pair"], r.get("pair_label") or r["pair"]) for r in rows)
    shown = [(k, h) for k, h in VARYING if len({g[k] for g in groups if k != "gamma" or g["mode"] == "speculative"}) > 1]
    speed, phases, flagged = [], [], []
    for s in groups:
        who = [s["runtime"], s["mode"]] + [_num(s[k]) for k, _ in shown]
        speed.append(who + [_num(s["tokens_per_s"], ".1f"), _num(s.get("speedup"), ".2f", "x"),
                            _num(s.get("acceptance_rate"), ".2f"), _num(s.get("alpha_hat"), ".2f"),
                            _num(s.get("mean_accepted_len"), ".2f"), _num(s.get("mean_drafted"), ".2f"),
                            _num(s["wall_s"], ".2f")])
        phases.append([s["runtime"], s["mode"][:4]] + who[2:]
                      + ["-" if s[p] is None else f"{s[p]:.3f} ({100 * s[p] / s['wall_s']:.0f}%)" for p in PHASES])
        if s.get("greedy_match") is False:
            same = [r for r in rows if all(metrics.group_value(r, k) == s[k] for k in metrics.GROUP_FIELDS)]
            flagged += [f"  !! {line}" for line in mismatch.runtime_lines(same, s["runtime"])]
    who = ["runtime", "mode"] + [h for _, h in shown]
    lines = [f"pair {name}: {label}" for name, label in pairs]
    lines += [fit(_table(who + ["tok/s", "speedup", "accept", "alpha^", "tau", "draft/r", "wall s"], speed)), ""]
    lines += ["where the time goes: seconds (share of wall)"]
    lines += [fit(_table(who + [p[:-2] for p in PHASES], phases))] + flagged
    across = mismatch.agreement_lines(mismatch.agreement(measured))
    if across:
        lines += ["greedy baselines across runtimes:"] + [f"  {line}" for line in across]
    lines += [f"{rt}: {err}" for rt, err in sorted({(r["runtime"], r["error"]) for r in measured if r.get("error")})]
    rules = tables.verify_rules(measured)
    if len(rules) > 1:
        lines.append(f"note: the runtimes accept drafts by different rules ({', '.join(rules)}): "
                     "their alpha_hat measure different things (see verify_rule)")
    return fit("\n".join(lines)).splitlines()


def verdict_lines(rows: list[dict]) -> list[str]:
    """The verdict of the run's rows: a heading naming the pair and settings, then reports.verdict.text."""
    from spec_harness.reports import verdict
    from spec_harness.reports.runs import by_drafting

    measured = [r for r in rows if not r.get("synthetic")]
    v = verdict.build(by_drafting(measured))
    head = "verdict · " + "; ".join(_pair_words(measured))
    return [""] + textwrap.wrap(head, verdict.WIDTH, subsequent_indent="  ", break_on_hyphens=False) + verdict.text(v)


def _pair_words(rows: list[dict]) -> list[str]:
    """Each pair of the rows as the verdict's heading names it; a pair's target variants
    (--target-quant) by their types, after the pair as given where it ran too."""
    given = {r["pair"]: r.get("pair_label") or r["pair"] for r in rows if not r.get("target_quant")}
    quants: dict[str, list[str]] = {}
    for r in rows:
        if r.get("target_quant"):
            base = r["pair"].replace(f"@{r['target_quant']}", "", 1)
            quants.setdefault(base, []).append(r["target_quant"])
    words = {name: f"pair {name}" if name == label else f"pair {name}: {label}" for name, label in given.items()}
    for base, types in quants.items():
        also = f"its target {'also ' if base in words else ''}in {', '.join(dict.fromkeys(types))} (--target-quant)"
        words[base] = f"{words[base]}, {also}" if base in words else f"pair {base}, {also}"
    return list(words.values())


def print_summary(rows: list[dict], table: bool = False) -> None:
    """The verdict; with `table` the full table before it."""
    click.echo("\n".join((summary_lines(rows) if table else []) + verdict_lines(rows)))
