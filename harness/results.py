"""Results on disk: run.json (configuration and environment) and results.jsonl (one line per
generation, appended and flushed as soon as it is measured).

What it does not do: compute metrics (metrics.py) or aggregate (reports/).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Iterable

from harness.errors import HarnessError

RESULTS = "results.jsonl"
RUN = "run.json"
PACKAGES = ("torch", "transformers", "llama_cpp_python", "gguf", "huggingface_hub", "numpy")
HASH_FULL_LIMIT = 1 << 30  # files above 1 GiB get a head+tail sha256, marked as partial


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


def open_out_dir(out: Path, resume: bool = False) -> tuple[Path, list[dict]]:
    """Create the output folder -> (folder, rows already there). Existing results are never
    overwritten: without `resume` a folder holding results is refused."""
    out = Path(out)
    results = out / RESULTS
    if results.exists() and results.stat().st_size > 0 and not resume:
        raise HarnessError(f"{out} already holds results; add --resume to continue it, or choose another --out")
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


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict:
    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "packages": versions,
    }


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


def write_run_json(out: Path, info: dict) -> None:
    info = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **info}
    tmp = Path(out) / (RUN + ".tmp")
    tmp.write_text(json.dumps(info, indent=2, ensure_ascii=False))
    tmp.replace(Path(out) / RUN)
