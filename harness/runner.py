"""The run loop: for each runtime, load the pair once, warm up, then for every prompt and repeat
generate target-only (baseline) and speculative with the same settings and seed, and append one
results row per generation as soon as it is measured.

Failures inside a runtime (missing dependency, bad file, out of memory) become a row with `error`
set and the run goes on with the next runtime. Bad settings are rejected before anything runs.
What it does not do: sweeps over settings (one GenerationSettings per run) or reporting.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import runtimes
from harness import metrics
from harness.config import GenerationSettings, RuntimeSettings
from harness.errors import HarnessError, RuntimeUnavailable
from harness.prompts import Prompt
from harness.results import ResultsWriter, environment, model_files, prepare_out_dir, write_run_json
from runtimes.base import Generation, PairSpec, Runtime

WARMUP_TOKENS = 16


@dataclass
class RunConfig:
    runtimes: list[str]
    pair: PairSpec
    prompts: list[Prompt]
    gen: GenerationSettings = field(default_factory=GenerationSettings)
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    repeats: int = 1
    warmup: int = 1
    out: Path = Path("runs/latest")

    def __post_init__(self):
        if self.repeats < 1:
            raise HarnessError(f"--repeats must be >= 1, got {self.repeats}")
        if self.warmup < 0:
            raise HarnessError(f"--warmup must be >= 0, got {self.warmup}")
        if not self.prompts:
            raise HarnessError("no prompts to run")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def make_row(cfg: RunConfig, rt: Runtime, name: str, mode: str, prompt: Prompt, repeat: int,
             gen: GenerationSettings, g: Optional[Generation], error: Optional[str] = None,
             baseline_ids: Optional[list[int]] = None) -> dict:
    """One results.jsonl row: the field names of DESIGN.md, nothing computed outside metrics.py."""
    desc = rt.describe() if rt is not None else {}
    row = {
        "runtime": name, "mode": mode, "pair": cfg.pair.name, "prompt_id": prompt.id,
        "category": prompt.category, "repeat": repeat,
        "gamma": gen.gamma if mode == "speculative" else None,
        "temperature": gen.sampling.temperature, "top_p": gen.sampling.top_p, "top_k": gen.sampling.top_k,
        "seed": gen.seed, "max_new_tokens": gen.max_new_tokens,
        "device": desc.get("device", cfg.runtime.device), "dtype": desc.get("dtype", cfg.runtime.dtype),
    }
    if g is None:  # an error row: every measured field is null
        row.update(dict.fromkeys(metrics.PHASE_FIELDS + metrics.FIELDS + ("token_ids", "text", "greedy_match", "rounds")))
        row["error"] = error
        return row
    rounds = [r.to_dict() for r in g.rounds]
    row.update(g.phases.to_dict())
    row.update(metrics.generation_metrics(g.phases.to_dict(), rounds, len(g.token_ids), mode == "speculative", gen.gamma))
    greedy_match = None
    if mode == "speculative" and gen.sampling.greedy and baseline_ids is not None:
        greedy_match = g.token_ids == baseline_ids
    row.update(token_ids=g.token_ids, text=rt.decode(g.token_ids), greedy_match=greedy_match,
               rounds=rounds, error=error, phase_notes=g.notes or None, extra=g.extra or None)
    return row


def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if not isinstance(e, HarnessError) else msg


def run(cfg: RunConfig) -> list[dict]:
    """Run every runtime of cfg; returns the rows written (also in cfg.out/results.jsonl)."""
    out = prepare_out_dir(cfg.out)
    info = {
        "config": {
            "runtimes": cfg.runtimes, "pair": asdict(cfg.pair), "gen": asdict(cfg.gen),
            "runtime_settings": asdict(cfg.runtime), "repeats": cfg.repeats, "warmup": cfg.warmup,
            "prompts": [asdict(p) for p in cfg.prompts],
        },
        "environment": environment(),
        "model_files": model_files([cfg.pair.target, cfg.pair.draft, cfg.pair.target_gguf, cfg.pair.draft_gguf]),
        "runtimes": {},
    }
    write_run_json(out, info)
    writer = ResultsWriter(out)
    rows: list[dict] = []

    def emit(row: dict) -> None:
        writer.write(row)
        rows.append(row)

    try:
        for name in cfg.runtimes:
            rt = None
            try:
                rt = _load(name, cfg)
                info["runtimes"][name] = rt.describe()
                write_run_json(out, info)
                _run_runtime(cfg, name, rt, emit, out)
            except (RuntimeUnavailable, _LoadFailed) as e:
                reason = _one_line(e.__cause__ or e) if isinstance(e, _LoadFailed) else str(e)
                _log(f"[{name}] skipped: {reason}")
                info["runtimes"][name] = {"skipped": reason}
                write_run_json(out, info)
                for mode in ("baseline", "speculative"):
                    emit(make_row(cfg, None, name, mode, cfg.prompts[0], 0, cfg.gen, None, error=f"skipped: {reason}"))
            finally:
                if rt is not None:
                    rt.close()
    finally:
        writer.close()
    return rows


class _LoadFailed(Exception):
    """A runtime could not load the pair for a reason specific to it (its cause says why)."""


def _load(name: str, cfg: RunConfig) -> Runtime:
    cls = runtimes.get(name)
    rt = cls(cfg.runtime)
    _log(f"[{name}] loading {cfg.pair.name} ...")
    try:
        rt.load(cfg.pair)
    except HarnessError:
        raise  # bad input (missing file, mismatched tokenizers): the same for every runtime
    except (MemoryError, RuntimeError, OSError, ValueError) as e:
        raise _LoadFailed(name) from e
    return rt


def _run_runtime(cfg: RunConfig, name: str, rt: Runtime, emit: Callable[[dict], None], out: Path) -> None:
    encoded = [(p, rt.encode(p.text)) for p in cfg.prompts]
    ctx = rt.context_length
    for p, ids in encoded:
        if len(ids) + cfg.gen.max_new_tokens > ctx:
            raise HarnessError(
                f"prompt {p.id} ({len(ids)} tokens) + --max-new-tokens {cfg.gen.max_new_tokens} exceeds "
                f"the {ctx}-token context of {cfg.pair.name}; lower --max-new-tokens"
            )
    warm = GenerationSettings(cfg.gen.sampling, cfg.gen.gamma, min(WARMUP_TOKENS, cfg.gen.max_new_tokens), cfg.gen.seed, cfg.gen.ignore_eos)
    for _ in range(cfg.warmup):
        rt.generate_baseline(encoded[0][1], warm)
        rt.generate_speculative(encoded[0][1], warm)
    total = len(encoded) * cfg.repeats
    done = 0
    for p, ids in encoded:
        for repeat in range(cfg.repeats):
            gen = GenerationSettings(cfg.gen.sampling, cfg.gen.gamma, cfg.gen.max_new_tokens, cfg.gen.seed + repeat, cfg.gen.ignore_eos)
            base_row = _generate(cfg, rt, name, "baseline", p, repeat, gen, ids, None, out)
            emit(base_row)
            spec_row = _generate(cfg, rt, name, "speculative", p, repeat, gen, ids, base_row.get("token_ids"), out)
            if spec_row["error"] is None and base_row["error"] is None:
                spec_row["speedup"] = metrics.speedup(base_row["wall_s"], base_row["new_tokens"], spec_row["wall_s"], spec_row["new_tokens"])
            emit(spec_row)
            done += 1
            _log(_progress(name, done, total, p, base_row, spec_row))


def _generate(cfg, rt, name, mode, p, repeat, gen, ids, baseline_ids, out: Path) -> dict:
    try:
        g = rt.generate_speculative(ids, gen) if mode == "speculative" else rt.generate_baseline(ids, gen)
    except HarnessError:
        raise
    except Exception as e:  # out of memory, a library error: record it and go on
        with open(out / "errors.log", "a") as f:
            f.write(f"[{name} {mode} {p.id} repeat {repeat}]\n{traceback.format_exc()}\n")
        return make_row(cfg, rt, name, mode, p, repeat, gen, None, error=_one_line(e))
    return make_row(cfg, rt, name, mode, p, repeat, gen, g, baseline_ids=baseline_ids)


def _progress(name, done, total, p, b, s) -> str:
    if b["error"] or s["error"]:
        return f"[{name}] {done}/{total} {p.id}: error: {b['error'] or s['error']}"
    flag = "" if s["greedy_match"] in (None, True) else "  GREEDY MISMATCH"
    return (f"[{name}] {done}/{total} {p.id}: baseline {b['tokens_per_s']:.1f} tok/s, speculative "
            f"{s['tokens_per_s']:.1f} tok/s, speedup {s['speedup']:.2f}x, alpha_hat "
            f"{_fmt(s['alpha_hat'])}{flag}")


def _fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)
