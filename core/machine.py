"""What is known of this machine: the CPU's name, the physical cores this process may use, and
the versions of the libraries a run depends on (for run.json). Reads /proc and /sys on Linux;
elsewhere falls back to what Python's platform module says. Measures nothing."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

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
