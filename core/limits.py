"""This machine's limits, measured with torch on the CPU at a thread count: memory read bandwidth
and the throughput of the matrix products the runtimes use (float32, and int8 for llama.cpp's
quantized weights). A one-token step cannot be faster than reading its weights once at this
bandwidth, and a batched pass cannot be cheaper than its arithmetic at this throughput;
reports/roofline.py sets each runtime's measured steps against these bounds.

- `read_gb_s`: read-only reductions (torch.sum and torch.amax) over a READ_BUFFER_MIB float32
  buffer, the median of a few calls each, the best over both kernels and two page sizes (4 KiB,
  and the 2 MiB huge pages the torch runtime keeps its matrices in). A high estimate of what a model's
  forward pass can stream (no writes, one sequential sweep, no other work between the loads), so
  the memory bound it gives is strict: a step at 1.0 of it could not be faster.
- `matmul_f32_gflops`: float32 GEMM [GEMM_M x GEMM_K] @ [GEMM_K x GEMM_N], the median of a few.
- `matmul_int8_gops`: int8 x int8 -> int32 GEMM of the same shape through torch._int_mm, the proxy
  for llama.cpp's quantized dot products (for q4/q5/q8 weights it quantizes the activations to 8
  bits and multiplies with int8 dot products); None, with the reason, where this torch has none.

Measuring takes a second or two; the result is cached as one JSON file per machine key
(CPU name, a hash of its flags, threads, torch version) in the folder the caller gives, so every
run folder on this machine reuses it; `remeasure` (or HARNESS_REMEASURE_LIMITS=1) measures again.
torch's thread count is restored afterwards (`torch_threads`: torch at a thread count for a
block, the one helper the runtimes use for theirs too). What it does not do: measure a GPU, or know model
sizes or step times (models/shape.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from spec_harness.core.config import at_least
from spec_harness.core.machine import cpu_flags, cpu_name, hugepage_empty, physical_cores

READ_BUFFER_MIB = 256  # well above any last-level cache, so the sweep reads memory
GEMM_M, GEMM_K, GEMM_N = 256, 2048, 2048  # a verify-sized batch of rows against a layer-sized matrix
REPEATS = 7  # the median of these, after one untimed call of each kernel
REMEASURE_ENV = "HARNESS_REMEASURE_LIMITS"
METHOD = 2  # part of the cache key: a change to how the limits are measured measures them again
MEASURING = "measuring this machine's limits (once per machine, a few seconds) ..."


def threads_of(n_threads: Optional[int]) -> int:
    """The thread count a run uses: --threads, else one per physical core (llama.cpp's default,
    and torch's on these CPUs)."""
    return n_threads or physical_cores()


def _best_seconds(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    """The median of `repeats` timed calls after an untimed one (first touch, kernel selection):
    a machine's sustained rate, not one lucky call (the result is cached for every later run)."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def read_gb_s() -> tuple[float, dict[str, float]]:
    """Memory read bandwidth in GB/s (1e9 bytes) at torch's current threads: the best over the
    kernels and page sizes (torch's own allocation; huge pages, as the torch runtime's matrices
    have) of the median of REPEATS reductions each -> (best, per kernel and pages)."""
    import torch

    numel = READ_BUFFER_MIB * 2**20 // 4
    per = {}
    for pages, alloc in (("", torch.empty), (" huge pages", hugepage_empty)):
        buf = alloc(numel, dtype=torch.float32)
        buf.fill_(1.0)  # written once, so every page is real
        with torch.inference_mode():
            for name, k in (("sum", torch.sum), ("amax", torch.amax)):
                per[name + pages] = numel * 4 / _best_seconds(lambda k=k: k(buf)) / 1e9
        buf = None  # one buffer at a time
    return max(per.values()), per


def _gemm_ops() -> int:
    return 2 * GEMM_M * GEMM_K * GEMM_N  # one multiply and one add per product term


def matmul_f32_gflops() -> float:
    """float32 GEMM throughput in GFLOP/s at torch's current threads (median of REPEATS)."""
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(GEMM_M, GEMM_K, generator=g), torch.randn(GEMM_K, GEMM_N, generator=g)
    with torch.inference_mode():
        return _gemm_ops() / _best_seconds(lambda: a @ b) / 1e9


def matmul_int8_gops() -> tuple[Optional[float], Optional[str]]:
    """int8 x int8 -> int32 GEMM throughput in GOP/s through torch._int_mm (median of REPEATS) ->
    (value, None), or (None, why) where this torch build cannot run it on the CPU."""
    import torch

    mm = getattr(torch, "_int_mm", None)
    if mm is None:
        return None, f"torch {torch.__version__} has no torch._int_mm"
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (GEMM_M, GEMM_K), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (GEMM_K, GEMM_N), dtype=torch.int8, generator=g)
    try:
        with torch.inference_mode():
            return _gemm_ops() / _best_seconds(lambda: mm(a, b)) / 1e9, None
    except RuntimeError as e:
        return None, f"torch._int_mm failed on the CPU: {(str(e).strip().splitlines() or [''])[0]}"


@contextmanager
def torch_threads(threads: Optional[int]):
    """torch at `threads` threads inside, its own count restored after; None, or the count already
    set, changes nothing."""
    import torch

    before = torch.get_num_threads()
    if not threads or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def measure(threads: int) -> dict:
    """Every limit at `threads` torch threads (torch's count is restored afterwards)."""
    import torch

    at_least("--threads", threads, 1)
    t0 = time.perf_counter()
    with torch_threads(threads):
        bandwidth, kernels = read_gb_s()
        f32 = matmul_f32_gflops()
        int8, why = matmul_int8_gops()
    return {"read_gb_s": bandwidth, "read_gb_s_by_kernel": kernels, "matmul_f32_gflops": f32,
            "matmul_int8_gops": int8, "matmul_int8_note": why, "read_buffer_mib": READ_BUFFER_MIB,
            "gemm_shape": [GEMM_M, GEMM_K, GEMM_N], "device": "cpu", "threads": threads, "cpu": cpu_name(),
            "torch": torch.__version__, "seconds": time.perf_counter() - t0,
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def machine_key(threads: int) -> str:
    """What a measurement holds for: CPU name, a hash of its flags, threads, torch version, and
    how it was measured (METHOD)."""
    import torch

    flags = hashlib.sha256(cpu_flags().encode()).hexdigest()[:12]
    return f"{cpu_name()}|flags {flags}|{threads} threads|torch {torch.__version__}|method {METHOD}"


def cache_file(cache_dir: Path, threads: int) -> Path:
    return Path(cache_dir) / f"limits-{hashlib.sha256(machine_key(threads).encode()).hexdigest()[:16]}.json"


def remeasure_requested() -> bool:
    """HARNESS_REMEASURE_LIMITS=1 (any value but empty or 0): measure again, whatever is cached."""
    return os.environ.get(REMEASURE_ENV, "") not in ("", "0")


def _cached(path: Path, key: str) -> Optional[dict]:
    """The cached limits of this key, or None (no file, unreadable, or written for another key)."""
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) and got.get("machine_key") == key and got.get("read_gb_s") else None


def machine_limits(threads: int, cache_dir: Path, remeasure: bool = False, log: Optional[Callable[[str], None]] = None) -> dict:
    """This machine's limits at `threads`: from the cache in cache_dir, else measured (one line to
    stderr, or `log`, says so) and cached. An unwritable cache is not an error: the limits are
    returned all the same, and measured again next time."""
    at_least("--threads", threads, 1)
    key, path = machine_key(threads), cache_file(cache_dir, threads)
    got = None if remeasure or remeasure_requested() else _cached(path, key)
    if got is None:
        (log or (lambda m: print(m, file=sys.stderr)))(MEASURING)
        got = {**measure(threads), "machine_key": key}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
            tmp.write_text(json.dumps(got, indent=2))
            tmp.replace(path)  # atomic: another process reads the whole file or none
        except OSError:
            pass
    return {**got, "cache_file": str(path)}


def describe(limits: dict) -> list[str]:
    """The limits as lines a person reads (`harness limits`)."""
    int8 = (f"{limits['matmul_int8_gops']:.0f} GOP/s (torch._int_mm: the proxy for llama.cpp's quantized dot products)"
            if limits.get("matmul_int8_gops") else f"not measured ({limits.get('matmul_int8_note')})")
    kernels = ", ".join(f"torch.{k} {v:.1f}" for k, v in (limits.get("read_gb_s_by_kernel") or {}).items())
    shape = " x ".join(map(str, limits["gemm_shape"]))
    return [
        f"machine limits at {limits['threads']} thread{'s' if limits['threads'] != 1 else ''}: {limits['cpu']}, torch {limits['torch']} "
        f"(measured {limits['measured_at']} in {limits['seconds']:.1f} s; cached in {limits['cache_file']})",
        f"  memory read bandwidth  {limits['read_gb_s']:.1f} GB/s (the best of {kernels}, each the median of {REPEATS}, over {limits['read_buffer_mib']} MiB "
        "float32: a high estimate, so the memory bound is strict)",
        f"  float32 matmul         {limits['matmul_f32_gflops']:.0f} GFLOP/s (M x K x N {shape})",
        f"  int8 matmul            {int8}",
    ]
