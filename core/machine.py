"""What is known of this machine: the CPU's name, the physical cores this process may use, and
the versions of the libraries a run depends on (for run.json); the memory free now; and memory in
huge pages where the kernel offers them. Reads /proc and /sys on Linux; elsewhere falls back to
what Python's platform module says. Measures nothing."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

HUGE_PAGE = 2 << 20
PACKAGES = ("torch", "transformers", "llama_cpp_python", "gguf", "huggingface_hub", "numpy")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> str:
    """The CPU's feature flags as /proc/cpuinfo lists them (its first "flags" line; "" elsewhere):
    what a kernel may use, so part of what a measured limit depends on."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def free_memory() -> int:
    """Bytes of memory available to new processes now (MemAvailable); 0 where it cannot be read."""
    try:
        return next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 0


def physical_cores() -> int:
    """Physical cores this process may use (SMT siblings counted once), from Linux's CPU topology;
    elsewhere, or when it cannot be read, half the logical CPUs."""
    try:
        cpus = os.sched_getaffinity(0)
        cores = {Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read_text().strip() for c in cpus}
        return max(len(cores), 1)
    except (AttributeError, OSError):
        return max((os.cpu_count() or 2) // 2, 1)


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


def hugepage_empty(numel: int, dtype: "torch.dtype") -> "torch.Tensor":  # noqa: F821 (torch is imported inside)
    """An uninitialised [numel] CPU tensor in private anonymous memory advised for transparent
    huge pages (2 MiB: a sweep over 4 KiB pages costs a TLB miss per page), starting on a 2 MiB
    boundary: for the torch runtime's matrices and the bandwidth measurement that bounds them.
    Ordinary pages where the kernel offers none (no MADV_HUGEPAGE, THP set to never)."""
    import mmap

    import torch

    if not hasattr(mmap, "MAP_PRIVATE"):  # Windows
        return torch.empty(numel, dtype=dtype)
    size = numel * torch.empty((), dtype=dtype).element_size()
    buf = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # shared memory gets no THP
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            buf.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    raw = torch.frombuffer(buf, dtype=torch.uint8)  # keeps buf alive
    skip = -raw.data_ptr() % HUGE_PAGE
    return raw[skip : skip + size].view(dtype)
