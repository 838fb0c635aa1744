"""PNG plots of a report, drawn with matplotlib's object API on the Agg canvas (no pyplot, no
global backend change, no display needed).

- phases.png: where the time goes, ms per generated token stacked by phase, one bar per cell;
- speedup_vs_gamma.png: measured speedup against gamma, with Leviathan's ceiling at c measured
  and at c from FLOPs;
- acceptance_vs_gamma.png: alpha_hat (solid) and acceptance_rate (dashed) against gamma per
  prompt category, one panel per runtime;
- per_position.png: P(accept draft i | drafts before it accepted) per speculative cell;
- waterfall.png: the factors that take tau down to the measured speedup (reports/explain.py),
  one panel per speculative cell;
- verdict.png: each runtime's tokens/s without speculation and with each drafting, coloured by
  whether it pays, labelled with its speedup and largest loss factor (reports/verdict.py).

Each function returns the file written, or None when there is nothing to draw.
What it does not do: compute numbers (tables.py, explain.py) or decide what they mean (markdown.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from spec_harness.reports.tables import PHASES, label, settings_label, varying

PHASE_COLORS = {"prefill_s": "#9e9e9e", "draft_s": "#4c9be8", "verify_s": "#e8844c",
                "sampling_s": "#59b36b", "unaccounted_s": "#c04c4c"}
UNKNOWN_COLOR = "#e0e0e0"
DPI = 110


def _legend(ax, n: int) -> None:
    """Inside the axes for a few lines, outside on the right for many."""
    if n <= 6:
        ax.legend(fontsize=7)
    else:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _axes(ax, xlabel: str, ylabel: str, title: str, legend_entries: int, ylim_one: bool = False) -> None:
    """The common finish of a gamma- or position-axis plot: labels, integer ticks, legend, grid."""
    if ylim_one:
        ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _legend(ax, legend_entries)
    ax.grid(alpha=0.3)


def _pair(records: list[dict]) -> str:
    """'\n<pair label>' when the records are of one pair (the label a person reads), else ''."""
    labels = {r.get("pair_label") or r.get("pair") for r in records} - {None}
    return f"\n{labels.pop()}" if len(labels) == 1 else ""


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def _series(records: list[dict], vary: list[str]) -> dict[str, list[dict]]:
    """Records grouped by their label without gamma (one line per group), sorted by gamma."""
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(label(r, vary, mode=False), []).append(r)
    return {k: sorted(v, key=lambda r: r["gamma"]) for k, v in out.items()}


def phases(cells: list[dict], path: Path) -> Optional[Path]:
    """Horizontal stacked bars: ms per generated token in each phase; grey = not visible."""
    cells = [c for c in cells if c["new_tokens"]]
    if not cells:
        return None
    vary = varying(cells)
    fig = Figure(figsize=(9, 1.2 + 0.45 * len(cells)))
    ax = fig.add_subplot()
    ys = range(len(cells))[::-1]
    left = [0.0] * len(cells)
    for ph in PHASES:
        ms = [1000 * (c[ph] or 0.0) / c["new_tokens"] for c in cells]
        ax.barh(list(ys), ms, left=left, color=PHASE_COLORS[ph], label=ph[:-2])
        left = [a + b for a, b in zip(left, ms)]
    unknown = [max(0.0, 1000 * c["wall_s"] / c["new_tokens"] - x) for c, x in zip(cells, left)]
    if any(u > 1e-12 for u in unknown):
        ax.barh(list(ys), unknown, left=left, color=UNKNOWN_COLOR, hatch="//", label="not visible")
    ax.set_yticks(list(ys), [label(c, vary) for c in cells])
    ax.set_xlabel("milliseconds per generated token (wall, stacked by phase)")
    ax.set_title("Where the time goes" + _pair(cells), fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / (1 + len(cells))), fontsize=8, ncol=6, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def speedup_vs_gamma(cells: list[dict], path: Path) -> Optional[Path]:
    """Measured speedup and Leviathan's ceilings against gamma; with a single gamma, bars: each
    runtime's measured speedup beside its two ceilings (a line through one point says nothing)."""
    spec = [c for c in cells if c["mode"] == "speculative" and c["speedup"] is not None]
    if not spec:
        return None
    if len({c["gamma"] for c in spec}) == 1:
        return _speedup_bars(spec, path)
    fig = Figure(figsize=(8, 5))
    ax = fig.add_subplot()
    for i, (name, rs) in enumerate(_series(spec, varying(spec)).items()):
        color = f"C{i % 10}"
        g = [r["gamma"] for r in rs]
        ax.plot(g, [r["speedup"] for r in rs], "o-", color=color, label=f"{name}: measured")
        for col, style, what in (("theory_speedup_measured", "--", "ceiling, c measured"),
                                 ("theory_speedup_flops", ":", "ceiling, c FLOPs")):
            pts = [(r["gamma"], r[col]) for r in rs if r[col] is not None]
            if pts:
                ax.plot(*zip(*pts), style, marker=".", color=color, alpha=0.8, label=f"{name}: {what}")
    ax.axhline(1.0, color="black", lw=0.8)
    _axes(ax, "gamma (draft tokens per round)", "speedup over the same runtime's baseline (x)",
          "Measured speedup vs Leviathan's ceiling" + _pair(spec), len(ax.get_lines()) - 1)
    return _save(fig, path)


def _speedup_bars(spec: list[dict], path: Path) -> Optional[Path]:
    names = list(_series(spec, varying(spec)).items())
    fig = Figure(figsize=(max(6.0, 1.1 * len(names) + 2), 4.8))
    ax = fig.add_subplot()
    width = 0.27
    for j, (col, what) in enumerate((("speedup", "measured"), ("theory_speedup_measured", "ceiling, c measured"),
                                     ("theory_speedup_flops", "ceiling, c FLOPs"))):
        xs = [i + (j - 1) * width for i in range(len(names))]
        ys = [rs[0][col] if rs[0][col] is not None else 0.0 for _, rs in names]
        ax.bar(xs, ys, width, color=f"C{j}", label=what)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_ylabel("speedup over the same runtime's baseline (x)")
    ax.set_title(f"Measured speedup beside Leviathan's ceiling, gamma {spec[0]['gamma']}" + _pair(spec))
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([n for n, _ in names], rotation=30, ha="right", fontsize=8)
    _legend(ax, 3)
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def acceptance_vs_gamma(categories: list[dict], path: Path) -> Optional[Path]:
    categories = [r for r in categories if r["alpha_hat"] is not None]
    if not categories:
        return None
    runtimes = list(dict.fromkeys(r["runtime"] for r in categories))
    fig = Figure(figsize=(5.5 * len(runtimes), 4.5))
    vary = varying(categories)
    for k, rt in enumerate(runtimes, start=1):
        ax = fig.add_subplot(1, len(runtimes), k)
        mine = [r for r in categories if r["runtime"] == rt]
        by_cat: dict[str, list[dict]] = {}
        for r in mine:
            key = " · ".join(x for x in (r["category"], settings_label(r, vary)) if x)
            by_cat.setdefault(key, []).append(r)
        for i, (name, rs) in enumerate(by_cat.items()):
            rs = sorted(rs, key=lambda r: r["gamma"])
            g = [r["gamma"] for r in rs]
            ax.plot(g, [r["alpha_hat"] for r in rs], "o-", color=f"C{i % 10}", label=f"{name}: alpha_hat")
            ax.plot(g, [r["acceptance_rate"] for r in rs], "x--", color=f"C{i % 10}", alpha=0.6, label=f"{name}: accepted/drafted")
        _axes(ax, "gamma", "acceptance", f"{rt}: acceptance per prompt category", 0, ylim_one=True)
    return _save(fig, path)


def per_position(positions: list[dict], path: Path) -> Optional[Path]:
    positions = [r for r in positions if r["acceptance"] is not None]
    if not positions:
        return None
    vary = varying(positions)
    lines: dict[str, list[dict]] = {}
    for r in positions:
        lines.setdefault(label({**r, "mode": "speculative"}, vary), []).append(r)
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    for i, (name, rs) in enumerate(lines.items()):
        ax.plot([r["position"] for r in rs], [r["acceptance"] for r in rs], "o-", color=f"C{i % 10}", label=name)
    _axes(ax, "draft position i", "P(accept i | 1..i-1 accepted)", "Per-position acceptance" + _pair(positions),
          len(lines), ylim_one=True)
    return _save(fig, path)


WATERFALL_COLS = 2
SHORT = {"tau": "tau", "draft": "draft\ncost", "verify": "verify\ncost", "overhead": "sampling +\norchestr.",
         "costs": "draft+verify\n+overhead", "baseline": "baseline\noverhead", "prefill": "prefill", "residual": "residual"}


def _waterfall_panel(ax, e: dict) -> None:
    """One cell: tau from 0, each factor a floating bar from the level before to the level after,
    the measured speedup from 0; red bars lose speed, green bars gain it."""
    names, prev = [], 0.0
    for i, f in enumerate(e["factors"]):
        if f["key"] == "tau":
            ax.bar(i, f["level"], color="#4c9be8")
            text = f"{f['level']:.2f}x"
        else:
            lo, hi = sorted((prev, f["level"]))
            color = "#59b36b" if f["factor"] >= 1 else "#c04c4c"
            ax.bar(i, hi - lo, bottom=lo, color=color, alpha=0.55 if f["key"] == "residual" else 1.0,
                   hatch="//" if f["key"] == "residual" else None, edgecolor="white")
            ax.plot([i - 1.4, i + 0.4], [prev, prev], color="black", lw=0.6)
            text = f"×{f['factor']:.2f}"
        ax.annotate(text, (i, max(prev, f["level"])), ha="center", va="bottom", fontsize=7,
                    xytext=(0, 2), textcoords="offset points")
        prev = f["level"]
        names.append(SHORT[f["key"]])
    n = len(names)
    ax.bar(n, e["measured"], color="#555555")
    ax.annotate(f"{e['measured']:.2f}x", (n, e["measured"]), ha="center", va="bottom", fontsize=7,
                xytext=(0, 2), textcoords="offset points")
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xticks(range(n + 1), names + ["measured"], fontsize=7)
    ax.set_ylabel("speedup (x)")
    ax.set_title(f"{e['label']}: {e['tau_model']:.2f}x → {e['measured']:.2f}x", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.set_ylim(0, 1.15 * max(max(f["level"] for f in e["factors"]), e["measured"], 1.0))


def waterfall(expls: list[dict], path: Path) -> Optional[Path]:
    """The speedup decomposition of each speculative cell (reports/explain.py), one panel each."""
    expls = [e for e in expls if not e["unavailable"]]
    if not expls:
        return None
    cols = min(WATERFALL_COLS, len(expls))
    rows = -(-len(expls) // cols)
    fig = Figure(figsize=(6.5 * cols, 3.8 * rows))
    for k, e in enumerate(expls, start=1):
        _waterfall_panel(fig.add_subplot(rows, cols, k), e)
    title = "From tokens per round to the measured speedup (factors multiply)" + _pair(expls)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 * (1 + title.count("\n")) / (3.8 * rows)))  # the panels below the title
    return _save(fig, path)


def verdict(v: dict, path: Path) -> Optional[Path]:
    """The verdict at a glance (reports/verdict.py): tokens/s of each runtime without speculation
    (grey) and with each drafting (green where it pays, red where it loses), each speculative bar
    labelled with its speedup and largest loss factor; the fastest bar outlined."""
    bars = []  # (label, tok/s, color, annotation)
    for x in v["lines"]:
        if x.get("base_tokens_per_s") is not None:
            bars.append((x["name"].replace(x["runtime"], x["runtime_name"], 1) + " · target only", x["base_tokens_per_s"],
                         "#9e9e9e", ""))
        if x.get("tokens_per_s") is not None and x.get("mode") == "speculative":
            pays = (x.get("speedup") or 0) > 1
            note = ("-" if x.get("speedup") is None else f"{x['speedup']:.2f}x") + f" · {x['loss']}"
            bars.append((f"{x['name']} · γ={x['gamma']}", x["tokens_per_s"], "#59b36b" if pays else "#c04c4c", note))
    if not bars:
        return None
    top = max(b[1] for b in bars)
    fig = Figure(figsize=(9, 1.3 + 0.38 * len(bars)))
    ax = fig.add_subplot()
    ys = list(range(len(bars)))[::-1]
    for y, (name, tps, color, note) in zip(ys, bars):
        best = tps == top
        ax.barh(y, tps, color=color, edgecolor="black" if best else color, linewidth=2 if best else 0)
        ax.annotate(f"{tps:.1f} tok/s" + (f"  {note}" if note else "") + ("  ← fastest" if best else ""), (tps, y),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=8,
                    fontweight="bold" if best else "normal")
    ax.set_yticks(ys, [b[0] for b in bars], fontsize=8)
    ax.set_xlim(0, top * 1.9)
    ax.set_xlabel("generated tokens per second (higher is better)")
    ax.set_title("Each runtime without speculation (grey) and with it (green: pays, red: loses)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)
