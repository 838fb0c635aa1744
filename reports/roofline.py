"""Each runtime's steps against this machine's limits: is it the hardware?

A one-token step cannot be faster than reading the model's weights (and its KV cache so far) once
from memory, and a batched verify pass cannot be cheaper than its arithmetic. For every cell of a
run (tables.cell_groups), from the rows pooled per cell (core.metrics.pooled) and the run folder's
run.json (`machine_limits`, core/limits.py; `roofline[pair][runtime]`: the models' sizes,
models/shape.py, and each prompt's token count), up to three steps:

    step           measured (pooled)               tokens
    target step    baseline verify_s / n_rounds    1
    draft step     speculative draft_s / n_drafted 1      (the draft model only)
    verify         speculative verify_s / n_rounds g + 1  (g = n_drafted / n_rounds; only where the
                                                          draft phase is timed apart from verify)

and for each, at the step's mean context L (the prompt's tokens + half the generated ones, the
mean over the cell's generations; a prompt whose length run.json lacks counts 0):

    memory bound   (weight_bytes + kv_bytes_per_position x L) / read bandwidth
    compute bound  tokens x (flops_per_token + 4 x layers x attn_width x L) / throughput of the
                   model's compute kind (f32 or int8 GEMM; none for a kind not measured)
    bound          max(memory, compute); the larger one is the limit that binds
    fraction       bound / measured: 1 = the step runs at this machine's limit

The read bandwidth is a high estimate (core/limits.py), so the fraction is strict; above 1 the
step beat the bound (weights that stay in the CPU's caches, as the tiny test models do, or limits
measured while the machine was busy). At NEAR_LIMIT or more the hardware sets the step, below it
the runtime does. Steps a runtime does not time (hf's round 1, vLLM's draft) give no row, and a
cell without model sizes or on another device than the limits' (the CPU) none either, with a note.

What it does not do: measure (core/limits.py), count model sizes (models/shape.py), or write
text files (markdown.py, build.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from spec_harness.core import drafters, metrics
from spec_harness.core.results import read_run_json
from spec_harness.core.theory import attention_flops
from spec_harness.reports import tables

NEAR_LIMIT = 0.8  # a step at this fraction of its bound or more is at the machine's limit
CPU_DEVICES = ("cpu", "auto")  # rows' devices the CPU's limits hold for ("auto": a runtime that does not say)
THROUGHPUT = {"f32": ("matmul_f32_gflops", "GFLOP"), "int8": ("matmul_int8_gops", "GOP")}
MIB = 2**20
NO_LIMITS = ("no machine limits in run.json (run made before they were measured): run `harness limits` to see this "
             "machine's, and run again to set its steps against them")


@dataclass(frozen=True)
class Bound:
    """What one step cannot beat: seconds to read its bytes, to compute its operations."""

    memory_s: float
    compute_s: Optional[float]  # None: no throughput measured for the model's compute kind
    bytes: float
    ops: float

    @property
    def bound_s(self) -> float:
        return max(self.memory_s, self.compute_s or 0.0)

    @property
    def binds(self) -> str:
        return "compute" if self.compute_s is not None and self.compute_s > self.memory_s else "memory"


def throughput(limits: dict, compute: str) -> Optional[float]:
    """Operations per second of a compute kind ("f32", "int8") on this machine, or None."""
    key = THROUGHPUT.get(compute, (None,))[0]
    value = limits.get(key) if key else None
    return value * 1e9 if value else None


def step_bound(sizes: dict, limits: dict, tokens: float, context: float) -> Bound:
    """The bounds of a pass of `tokens` tokens after `context` cached positions, for one model's
    model_sizes (models/shape.py) and this machine's limits (core/limits.py)."""
    nbytes = sizes["weight_bytes"] + sizes["kv_bytes_per_position"] * context
    ops = tokens * (sizes["flops_per_token"] + attention_flops(sizes["layers"], sizes["attn_width"], round(context)))
    per_s = throughput(limits, sizes["compute"])
    return Bound(nbytes / (limits["read_gb_s"] * 1e9), ops / per_s if per_s else None, nbytes, ops)


# ---------------------------------------------------------------- the steps of a cell


def _context(rows: list[dict], prompt_tokens: dict) -> float:
    """Mean positions before a decode step: the prompt's tokens + half the generated ones."""
    return sum((prompt_tokens.get(r["prompt_id"]) or 0) + r["new_tokens"] / 2 for r in rows) / len(rows)


def _steps(base: list[dict], spec: list[dict]) -> list[tuple[str, str, float, float, list[dict]]]:
    """(step, model, tokens, measured seconds, rows) of a cell: its baseline's target step, or its
    speculative draft step and verify pass, as far as the phases are timed."""
    if not spec:
        p = metrics.pooled(base)
        t = metrics.target_step_s(p)
        return [("target step", "target", 1, t, base)] if t else []
    p = metrics.pooled(spec)
    out = []
    if p["draft_s"] is not None and p["n_drafted"] and all(drafters.of(r.get("drafter")).cost == drafters.DRAFT_MODEL for r in spec):
        out.append(("draft step", "draft", 1, p["draft_s"] / p["n_drafted"], spec))
    if p["draft_s"] is not None and p["verify_s"] is not None and p["n_rounds"] and p["n_drafted"]:
        out.append(("verify", "target", 1 + p["n_drafted"] / p["n_rounds"], p["verify_s"] / p["n_rounds"], spec))
    return out


def _n(x: float) -> str:
    """A count that may be a mean: 5, 4.7, 3.25."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _ms(ms: float) -> str:
    return f"{ms:.3g} ms"


def _size(nbytes: float) -> str:
    mib = nbytes / MIB
    return f"{mib:.0f} MiB" if mib >= 10 else f"{mib:.1f} MiB" if mib >= 0.1 else f"{nbytes / 1024:.0f} KiB"


def verdict(fraction: float, binds: str, tokens: float) -> str:
    """Which limit sets the step: the hardware (at NEAR_LIMIT of its bound or more) or the runtime."""
    if fraction > 1:
        return "faster than this bound: the weights stay in the CPU's caches, or the limits were measured under load"
    if fraction < NEAR_LIMIT:
        return "the runtime, not the hardware, is slow"
    if binds == "memory":
        return "near the limit: the hardware, not the runtime, sets this step"
    return "near the limit: the CPU cannot batch for free" if tokens > 1 else "near the limit: its arithmetic sets this step"


def sentence(rec: dict) -> str:
    """One line a person reads, e.g. "llamacpp · baseline: target step 14.1 ms at 0.36 of this
    machine's memory bound (5.1 ms to read 92 MiB at 18 GB/s): the runtime, not the hardware, is slow"."""
    step = rec["step"] + (f" ({_n(rec['tokens'])} tokens)" if rec["step"] == "verify" else "")
    if rec["binds"] == "memory":
        why = f"{_ms(rec['memory_bound_ms'])} to read {_size(rec['bytes'])} at {rec['read_gb_s']:.0f} GB/s"
    else:
        unit = THROUGHPUT[rec["compute"]][1]
        why = (f"{_ms(rec['compute_bound_ms'])} for {rec['ops'] / 1e9:.3g} {unit} at {rec['throughput'] / 1e9:.0f} "
               f"{unit}/s {rec['compute']}")
    line = (f"{rec['label']}: {step} {_ms(rec['measured_ms'])} at {rec['fraction']:.2f} of this machine's "
            f"{rec['binds']} bound ({why}): {rec['verdict']}")
    if rec["compute_bound_ms"] is None:
        line += f" (no compute bound: {rec['compute']} throughput is not measured)"
    return line + "."


def _record(cell: dict, step: str, model: str, tokens: float, measured: float, context: float, sizes: dict,
            limits: dict) -> dict:
    b = step_bound(sizes, limits, tokens, context)
    fraction = b.bound_s / measured
    rec = {**cell, "step": step, "model": model, "tokens": tokens, "context": context, "measured_ms": 1000 * measured,
           "memory_bound_ms": 1000 * b.memory_s, "compute_bound_ms": None if b.compute_s is None else 1000 * b.compute_s,
           "bound_ms": 1000 * b.bound_s, "fraction": fraction, "binds": b.binds, "bytes": b.bytes, "ops": b.ops,
           "weights": sizes["weights"], "compute": sizes["compute"], "read_gb_s": limits["read_gb_s"],
           "throughput": throughput(limits, sizes["compute"]), "threads": limits.get("threads"),
           "verdict": verdict(fraction, b.binds, tokens)}
    rec["sentence"] = sentence(rec)
    return rec


# ---------------------------------------------------------------- a run


@dataclass
class Roofline:
    records: list[dict] = field(default_factory=list)  # one per step, with its sentence
    notes: list[str] = field(default_factory=list)  # what could not be set against the limits, and why
    limits: dict[str, dict] = field(default_factory=dict)  # run folder -> its machine_limits


def limits_line(source: str, limits: dict) -> str:
    """The limits a run folder's steps are set against, in one line."""
    int8 = f", int8 GEMM {limits['matmul_int8_gops']:.0f} GOP/s" if limits.get("matmul_int8_gops") else ""
    n = limits.get("threads", "?")
    return (f"{Path(source).name}: {limits.get('cpu', '?')} at {n} thread{'' if n == 1 else 's'}: read "
            f"{limits['read_gb_s']:.1f} GB/s, f32 GEMM {limits['matmul_f32_gflops']:.0f} GFLOP/s{int8} "
            f"(measured {limits.get('measured_at', '?')}; `harness limits`)")


def _inputs(info: dict, row: dict) -> dict:
    """run.json's roofline entry of a row's pair and runtime ({} when there is none)."""
    pair = (row.get("pair_refs") or {}).get("name", row["pair"])
    runtime = row.get("runtime_name") or row["runtime"]
    return ((info.get("roofline") or {}).get(pair) or {}).get(runtime) or {}


def _source_records(source: str, rows: list[dict], info: dict, vary: list[str], named: bool, out: Roofline) -> None:
    limits = info.get("machine_limits") or {}
    if not limits.get("read_gb_s"):
        out.notes.append(f"{source}: " + (f"machine limits not measured ({limits['unavailable']})" if limits.get("unavailable")
                                          else NO_LIMITS))
        return
    out.limits[source] = limits
    said = set()
    for base, spec, g in tables.cell_groups(rows):
        first = (spec or base)[0]
        if not spec and "runtime_name" in first:  # a baseline copied beside "RUNTIME [how]" (load.by_drafting)
            continue
        runtime, inputs = first["runtime"], _inputs(info, first)
        sizes = inputs.get("model_sizes")
        why = (f"ran on {first.get('device')}, and the machine limits are the CPU's" if first.get("device") not in CPU_DEVICES
               else None if sizes else "no model sizes recorded in run.json")
        if why:
            if runtime not in said:
                said.add(runtime)
                out.notes.append(f"{runtime}: {why}, so no roofline rows" + (f" ({source})" if named else ""))
            continue
        cell = {"source": source, "runtime": runtime, "pair": first["pair"], "gamma": g,
                "label": tables.label({**first, "mode": "speculative" if spec else "baseline", "gamma": g}, vary)
                + (f" · {Path(source).name}" if named else "")}
        for step, model, tokens, measured, those in _steps(base, spec):
            if not measured > 0:
                continue
            context = _context(those, inputs.get("prompt_tokens") or {})
            out.records.append(_record(cell, step, model, tokens, measured, context, sizes[model], limits))


def roofline(rows: list[dict]) -> Roofline:
    """Every cell's steps against the limits of its run folder's machine (error rows left out),
    and the notes of what could not be set against them."""
    out = Roofline()
    ok = [r for r in rows if not r.get("error")]
    sources = list(dict.fromkeys(r.get("source") for r in ok))
    vary = tables.varying(ok)  # the settings the report's labels name
    for source in sources:
        info = read_run_json(Path(source)) if source else None
        mine = [r for r in ok if r.get("source") == source]
        _source_records(str(source), mine, info or {}, vary, len(sources) > 1, out)
    return out
