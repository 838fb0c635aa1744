"""Runtimes: one file per runtime behind runtimes/base.py, and this registry of name ->
"module:Class", imported only when asked for.

`--runtime hf` never imports llama_cpp; a runtime whose dependency is missing raises
RuntimeUnavailable (the runner turns it into a "skipped: reason" row), not an ImportError.
A new runtime is its file plus one line in REGISTRY (or a `register` call); see docs/DESIGN.md.
"""

from __future__ import annotations

import importlib

from core.errors import HarnessError, RuntimeUnavailable

REGISTRY: dict[str, str] = {
    "torch": "runtimes.pytorch:TorchRuntime",
    "hf": "runtimes.hf:HFRuntime",
    "llamacpp": "runtimes.llamacpp:LlamaCppRuntime",
    "llamacpp-native": "runtimes.llamacpp_native:LlamaCppNativeRuntime",
    "llama-server": "runtimes.llama_server:LlamaServerRuntime",
    "mlx": "runtimes.mlx:MlxRuntime",
    "vllm": "runtimes.vllm:VllmRuntime",
}


def register(name: str, target: str) -> None:
    """Add a runtime: `target` is "module:Class", imported when the runtime is first asked for."""
    REGISTRY[name] = target


def names() -> list[str]:
    return list(REGISTRY)


def not_in_all() -> dict[str, str]:
    """Runtimes that `--runtime all` leaves out on this platform, and why (name them to run them)."""
    import sys

    if sys.platform == "darwin":
        return {}
    return {"mlx": "MLX's CPU backend off Apple Silicon is a correctness check, not a speed reference"}


def parse_names(spec: str) -> list[str]:
    """'all' or a comma list -> validated runtime names, in registry order for 'all' (every
    runtime but those of not_in_all())."""
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    if not wanted:
        raise HarnessError(f"--runtime is empty; choose from: {', '.join(names())} or all")
    if "all" in wanted:
        return [n for n in names() if n not in not_in_all()]
    for w in wanted:
        if w not in REGISTRY:
            raise HarnessError(f"unknown runtime {w!r}; choose from: {', '.join(names())} or all")
    return list(dict.fromkeys(wanted))


def get(name: str):
    """The runtime class for a name; RuntimeUnavailable if its dependency is not installed."""
    if name not in REGISTRY:
        raise HarnessError(f"unknown runtime {name!r}; choose from: {', '.join(names())} or all")
    module, cls = REGISTRY[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:  # a missing optional dependency, e.g. llama_cpp
        raise RuntimeUnavailable(f"runtime {name!r} needs {e.name or e}: install it (see README)") from e
    return getattr(mod, cls)
