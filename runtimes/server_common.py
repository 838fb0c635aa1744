"""What the two server runtimes (runtimes/llama_server.py, runtimes/vllm.py) read and write the same
way, written once:

- `spec_metrics`: the speculative counters of a server's /metrics page (Prometheus text; both
  servers name them `PREFIX:spec_decode_num_*_total`, llama.cpp with the prefix `llamacpp`, vLLM
  `vllm`): drafts, draft tokens, accepted tokens and accepted tokens per draft position;
  `metrics_delta`: their difference around a request or a cell, as whole counts;
- `synthetic_rates`: forced acceptance (GenerationSettings.forced: the rate of each position given
  the ones before, the last repeated) as the unconditional per-position rates both servers take
  (`--spec-synth-rates`, `synthetic_acceptance_rates`): P(the first i + 1 drafts accepted), the
  running products;
- `version_of`: what a command prints about its library's version, or why it could not run.

What it does not own: the process (runtimes/process.py), or what a runtime checks the counters
against (its own per-round counts).
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Callable

COUNTERS = {"drafts": "drafts", "draft_tokens": "draft_tokens", "accepted_tokens": "accepted"}  # metric -> key
PER_POSITION = "accepted_tokens_per_pos"
POSITION = re.compile(r'position="(\d+)"')


def spec_metrics(text: str, prefix: str) -> dict:
    """/metrics text -> {drafts, draft_tokens, accepted, accepted_per_pos: {position: n}}: the
    counters named `{prefix}:spec_decode_num_<name>_total`, 0 where the page has none."""
    line = re.compile(rf"^{re.escape(prefix)}:spec_decode_num_(\w+?)_total(?:\{{([^}}]*)\}})? ([\d.eE+-]+)$", re.M)
    out = {"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0, "accepted_per_pos": {}}
    for name, labels, value in line.findall(text):
        pos = POSITION.search(labels)
        if name == PER_POSITION and pos:
            out["accepted_per_pos"][int(pos[1])] = float(value)
        elif name in COUNTERS:
            out[COUNTERS[name]] = float(value)
    return out


def metrics_delta(before: dict, after: dict) -> dict:
    """The counters' growth from `before` to `after` (spec_metrics of each): whole counts, and the
    accepted tokens per position as a list over the positions `after` has."""
    d = {k: int(after.get(k, 0) - before.get(k, 0)) for k in ("drafts", "draft_tokens", "accepted")}
    pos = after["accepted_per_pos"]
    d["accepted_per_pos"] = [int(pos[i] - before["accepted_per_pos"].get(i, 0)) for i in sorted(pos)]
    return d


def synthetic_rates(forced: tuple, positions: int) -> list[float]:
    """P(the first i + 1 drafts accepted) for i < positions: the products of forced acceptance's
    conditional rates up to each position (the last rate repeated past the given ones)."""
    return list(itertools.accumulate((forced[min(i, len(forced) - 1)] for i in range(positions)), operator.mul))


def version_of(argv: list[str], timeout: float, read: Callable[[str, str], str]) -> str:
    """read(stdout, stderr) of the command `argv` (a library's version), or "unknown (why)" when it
    cannot run within `timeout` seconds."""
    import subprocess

    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return read(r.stdout, r.stderr)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({e})"
