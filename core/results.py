"""The results schema: the field names of a results.jsonl row, the row built from a Generation,
and the files on disk (run.json: configuration and environment; results.jsonl: one line per
generation, appended and flushed as soon as it is measured).

The field names are a contract (docs/DESIGN.md): reports, users' notebooks and our own checks rely
on them. Baseline rows carry null in the speculative-only fields; an error row carries null in
every measured field and one line in `error`.
What it does not do: compute metrics (core/metrics.py) or aggregate rows (reports/).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Optional

from spec_harness.core import metrics
from spec_harness.core.config import LIBRARY_DEFAULT, GenerationSettings
from spec_harness.core.errors import HarnessError
from spec_harness.core.records import Generation

RESULTS = "results.jsonl"
RUN = "run.json"
HASH_FULL_LIMIT = 1 << 30  # files above 1 GiB get a head+tail sha256, marked as partial

# target_quant: the llama.cpp type of a target variant (--target-quant; the pair is then "PAIR@TYPE"),
# null for the target as given and in rows written before the field existed
# turn: the turn (1-based) of a conversation's question the row answers (harness/conversation.py), 1
# for a one-turn prompt and in rows written before the field existed; input_len: the tokens
# --input-len built the prompt to (harness/input_len.py), null for a prompt as given
IDENTITY_FIELDS = ("runtime", "mode", "pair", "target_quant", "prompt_id", "turn", "input_len", "category", "repeat")
OUTPUT_FIELDS = ("token_ids", "text", "greedy_match", "rounds")
MEASURED_FIELDS = metrics.TIME_FIELDS + metrics.FIELDS + OUTPUT_FIELDS  # null in an error row
# A row's key: with `--resume`, a row already written without error under this key is not redone.
KEY_FIELDS = ("runtime", "pair", "target_quant", "mode", "prompt_id", "turn", "input_len", "repeat", "gamma", "draft_policy", "drafter",
              "forced_rates", "temperature", "top_p", "top_k", "max_new_tokens", "seed", "concurrency", "torch_forward",
              "request_rate", "burstiness")
# one request of a cell under load (--concurrency N > 1, --request-rate): the client's clock; null in
# other rows. An open-loop request's also: planned_s (its arrival on the cell's clock), lag_s (the
# client woke that late to send it; then a wait for a place under --max-concurrency, until
# request_start_s), tpot_s ((E2E - TTFT) / (tokens - 1), core/metrics.py)
LOAD_FIELDS = ("cell", "request_start_s", "request_end_s", "ttft_s", "itl_median_s", "itl_p90_s", "planned_s", "lag_s",
               "tpot_s")


def rate_value(rate: float):
    """A --request-rate as rows hold it: the number, or "inf" (all at once; JSON has no infinity)."""
    return "inf" if rate == float("inf") else rate


def rate_text(value) -> str:
    """A row's request_rate as the flag gives it: 1, 0.25, inf."""
    return f"{float(value):g}"
KEY_DEFAULTS = {"draft_policy": "fixed", "drafter": "model"}  # speculative rows written before the fields existed


def row_key(row: dict) -> tuple:
    """The identity of a generation. A speculative row's gamma (the most drafts per round) is not
    part of it under library-default (there it is the library's choice, known after the generation)."""
    spec = row.get("mode") == "speculative"
    values = {k: row.get(k) for k in KEY_FIELDS}
    for k, default in KEY_DEFAULTS.items():
        if spec and values[k] is None:
            values[k] = default
    if spec and values["draft_policy"] == LIBRARY_DEFAULT:
        values["gamma"] = None
    values["concurrency"] = values["concurrency"] or 1  # rows written before the field existed
    values["turn"] = values["turn"] or 1
    if values["forced_rates"] is not None:
        values["forced_rates"] = tuple(values["forced_rates"])
    return tuple(values.values())


def make_row(identity: dict, gen: GenerationSettings, device: str, dtype: str, g: Optional[Generation] = None, *,
             text: Optional[str] = None, error: Optional[str] = None, baseline: Optional[dict] = None,
             verify_rule: Optional[str] = None, started_at: Optional[float] = None) -> dict:
    """One results.jsonl row. identity: runtime, mode, pair, prompt_id, category, repeat (and
    target_quant, null where it is not given).
    `baseline` is the row of the same runtime, prompt, settings and seed, for greedy_match and
    speedup; `verify_rule` names the acceptance test of a speculative row (runtimes/base.py);
    `started_at` when the runner asked for the generation (unix epoch seconds; not part of the
    key; null where none was asked for, and in rows written before the field existed).
    Nothing here is computed outside core/metrics.py."""
    mode, s = identity["mode"], gen.sampling
    spec = mode == "speculative"
    row = {k: identity.get(k) for k in IDENTITY_FIELDS}
    gamma = gen.gamma_max or (g.draft_max if g is not None else None)
    row.update(gamma=gamma if spec else None, draft_policy=str(gen.draft_policy) if spec else None,
               drafter=str(gen.drafter) if spec else None,
               verify_rule=("forced" if gen.forced else verify_rule) if spec else None,
               synthetic=bool(spec and gen.forced),  # forced acceptance: not the target's output
               forced_rates=list(gen.forced) if spec and gen.forced else None, temperature=s.temperature, top_p=s.top_p,
               top_k=s.top_k, seed=gen.seed, max_new_tokens=gen.max_new_tokens, device=device, dtype=dtype,
               concurrency=gen.concurrency)
    a = gen.arrivals  # an open-loop request's arrivals; null in every other row
    row.update(request_rate=rate_value(a.rate) if a else None, burstiness=a.burstiness if a else None,
               max_in_flight=a.max_in_flight if a else None)
    row.update(dict.fromkeys(LOAD_FIELDS))
    row["started_at"] = started_at
    if g is None:  # an error row: every measured field is null
        row.update(dict.fromkeys(MEASURED_FIELDS))
        row["error"] = error
        return row
    rounds = [r.to_dict() for r in g.rounds]
    row.update(g.phases.to_dict())
    row.update(metrics.generation_metrics(g.phases.to_dict(), rounds, g.new_tokens, spec,
                                          metrics.positions(rounds, gamma)))
    greedy_match = speedup = None
    if mode == "speculative" and baseline is not None and not baseline.get("error"):
        complete = g.new_tokens == len(g.token_ids) and baseline.get("new_tokens") == len(baseline.get("token_ids") or [])
        if s.greedy and not gen.forced and complete:
            greedy_match = g.token_ids == baseline["token_ids"]
        speedup = metrics.speedup(baseline["wall_s"], baseline["new_tokens"], row["wall_s"], row["new_tokens"])
    row.update(token_ids=g.token_ids, text=text, greedy_match=greedy_match, speedup=speedup,
               target_entropy=g.target_entropy if mode == "baseline" else None,
               step_margins=g.step_margins if mode == "baseline" else None,
               rounds=rounds, error=error, phase_notes=g.notes or None, extra=g.extra or None)
    return row


# ---------------------------------------------------------------- results.jsonl


class ResultsWriter:
    """Append-only JSONL; each row is on disk (flushed) before the next generation starts."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / RESULTS
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, row: dict) -> None:
        self._f.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def read_results(path: Path, warn=None) -> list[dict]:
    """All complete rows of a results.jsonl. A line that is not JSON (a last line cut short by a
    kill) is skipped and reported through `warn`."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                if warn:
                    warn(f"{path}:{n}: ignored an incomplete line (a generation interrupted while being written)")
    return rows


def repair_tail(path: Path) -> bool:
    """Cut a last line that has no newline (written halfway when the process died), so that
    appended rows start on a line of their own. -> whether something was cut."""
    with open(path, "rb+") as f:
        data = f.read()
        if not data or data.endswith(b"\n"):
            return False
        f.truncate(data.rfind(b"\n") + 1)
        return True


def check_out_dir(out: Path, resume: bool = False) -> None:
    """The checks of open_out_dir that need nothing created, for a command to make before it loads
    anything: a file where the folder should be, results that only --resume may continue."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file, not a folder: choose a folder for the run")
    results = out / RESULTS
    if results.exists() and results.stat().st_size > 0 and not resume:
        raise HarnessError(f"{out} already holds results; add --resume to continue it, or choose another --out")


def open_out_dir(out: Path, resume: bool = False) -> tuple[Path, list[dict]]:
    """Create the output folder -> (folder, rows already there). Existing results are never
    overwritten: without `resume` a folder holding results is refused."""
    out = Path(out)
    results = out / RESULTS
    check_out_dir(out, resume)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HarnessError(f"cannot create output folder {out}: {e.strerror}") from None
    if not results.exists():
        return out, []

    def warn(msg: str) -> None:
        print(f"warning: {msg}", file=sys.stderr)

    rows = read_results(results, warn)
    if repair_tail(results):
        warn(f"{results}: cut an incomplete last line; that generation is measured again")
    return out, rows


# ---------------------------------------------------------------- run.json


def file_digest(path: Path) -> dict:
    """sha256 of a file; above 1 GiB only the first and last 64 MiB and the size (partial)."""
    size = path.stat().st_size
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= HASH_FULL_LIMIT:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        else:
            h.update(f.read(64 << 20))
            f.seek(size - (64 << 20))
            h.update(f.read(64 << 20))
            h.update(str(size).encode())
    return {"path": str(path), "bytes": size, "sha256": h.hexdigest(), "partial": size > HASH_FULL_LIMIT}


def model_files(refs: Iterable[str]) -> list[dict]:
    """Digests of the weight files behind local model references (folders or files)."""
    out, seen = [], set()
    for ref in refs:
        if not ref:
            continue
        p = Path(ref).expanduser()
        files = [p] if p.is_file() else sorted(x for x in p.glob("*") if x.suffix in (".safetensors", ".bin", ".gguf", ".json")) if p.is_dir() else []
        for f in files:
            if f.resolve() not in seen:
                seen.add(f.resolve())
                out.append(file_digest(f))
    return out


def read_run_json(out: Path) -> Optional[dict]:
    """A run folder's run.json, or None when it is missing, unreadable or not an object."""
    try:
        info = json.loads((Path(out) / RUN).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def write_run_json(out: Path, info: dict) -> None:
    info = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **info}
    tmp = Path(out) / (RUN + ".tmp")
    tmp.write_text(json.dumps(info, indent=2, ensure_ascii=False))
    tmp.replace(Path(out) / RUN)
