"""What the command line lets libraries print. By default only the harness's own lines and the
progress of long one-time work (a GGUF file's conversion for transformers): not transformers'
warnings and "Loading weights" bars, not llama.cpp's loader log, not Python warnings raised inside
the libraries. `--verbose` shows all of it. Called by the commands that load models, before they do. And what
the harness prints itself, fitted to a terminal 100 columns wide (`fit`: a report section's
markdown, long lines wrapped). What it does not do: print anything itself.
"""

from __future__ import annotations

import logging
import re
import warnings
from typing import Optional

_NUMBER = re.compile(r"^(-|[-+]?[\d.]+[x%s]?( \(\d+%\))?)$")  # a table cell aligned right: 1.25x, 0.031 (4%), -
LIBRARIES = r"(transformers|torch|accelerate|huggingface_hub|llama_cpp|gguf)(\..*)?$"


def library_output(verbose: bool) -> None:
    from transformers.utils import logging as hf_logging

    logging.getLogger("llama-cpp-python").setLevel(logging.DEBUG if verbose else logging.ERROR)
    if verbose:
        hf_logging.set_verbosity_warning()
        hf_logging.enable_progress_bar()
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", module=LIBRARIES)


def fit(text: str, width: Optional[int] = None) -> str:
    """Text for a terminal `width` columns wide (default: the verdict's, reports/verdict.py's
    WIDTH), nothing it says lost: a markdown table (a report section's) that fits is aligned in
    columns, one that does not becomes a block per row (its first cell, then `header value`
    pairs); a longer line wraps onto lines indented two more than it, a word longer than a line
    (a path) kept whole."""
    from spec_harness.reports.verdict import WIDTH

    width = width or WIDTH
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out += _table(lines[i:j], width)
            i = j
            continue
        out += _wrapped(lines[i], width)
        i += 1
    return "\n".join(out)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(rows: list[str], width: int) -> list[str]:
    """A markdown table (header, rule, rows) aligned in columns, or a block per row."""
    head, body = _cells(rows[0]), [_cells(r) for r in rows[2:]]
    widths = [max(len(r[k]) if k < len(r) else 0 for r in [head] + body) for k in range(len(head))]
    if sum(widths) + 2 * (len(widths) - 1) <= width:
        right = [k > 0 and all(_NUMBER.match(r[k]) for r in body if k < len(r)) for k in range(len(head))]
        return ["  ".join(c.rjust(w) if right[k] else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths))).rstrip()
                for r in [head] + body]
    out = []
    for r in body:
        pairs = "; ".join(f"{h} {c}" for h, c in zip(head[1:], r[1:]))
        out += _wrapped(f"{r[0]}: {pairs}", width)
    return out


def _wrapped(line: str, width: int) -> list[str]:
    import textwrap

    if len(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip())
    indent = " " * (lead + 2)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)
