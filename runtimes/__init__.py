"""Runtimes: one file per runtime behind runtimes/base.py, and this registry of name ->
"module:Class", imported only when asked for.

`--runtime hf` never imports llama_cpp; a runtime whose dependency is missing raises
RuntimeUnavailable (the runner turns it into a "skipped: reason" row), not an ImportError.
A new runtime is its file plus one line in REGISTRY (or a `register` call); see docs/DESIGN.md.
"""

from __future__ import annotations

import importlib

from spec_harness.core import drafters
from spec_harness.core.errors import HarnessError, RuntimeUnavailable

REGISTRY: dict[str, str] = {
    "torch": "spec_harness.runtimes.pytorch:TorchRuntime",
    "hf": "spec_harness.runtimes.hf:HFRuntime",
    "llamacpp": "spec_harness.runtimes.llamacpp:LlamaCppRuntime",
    "llamacpp-native": "spec_harness.runtimes.llamacpp_native:LlamaCppNativeRuntime",
    "llama-server": "spec_harness.runtimes.llama_server:LlamaServerRuntime",
    "mlx": "spec_harness.runtimes.mlx:MlxRuntime",
    "vllm": "spec_harness.runtimes.vllm:VllmRuntime",
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


def able(attr: str, value=True) -> list[str]:
    """The registered runtimes whose class declares `value` in capability `attr` (runtimes/base.py:
    drafters (Runtime.runs_drafter), policies, forces, serves_concurrently), in registry order; a runtime whose
    dependency is missing here is left out."""
    out = []
    for n in names():
        try:
            cls = get(n)
        except RuntimeUnavailable:
            continue
        if attr == "drafters":  # a drafter kind (core/drafters/), or its name
            if cls.runs_drafter(drafters.get(value) if isinstance(value, str) else value):
                out.append(n)
            continue
        have = getattr(cls, attr, None)
        if (value in have) if isinstance(have, (tuple, list, set, frozenset)) else have == value:
            out.append(n)
    return out


def capabilities() -> list[dict]:
    """Per registered runtime what its class declares (runtimes/base.py), or why it cannot load here."""
    out = []
    for n in names():
        try:
            cls = get(n)
        except RuntimeUnavailable as e:
            out.append({"runtime": n, "unavailable": str(e)})
            continue
        out.append({"runtime": n, "drafters": [k.name for k in drafters.kinds() if cls.runs_drafter(k)], "policies": list(cls.policies), "forces": cls.forces,
                    "concurrency": cls.serves_concurrently, "in_all": n not in not_in_all()})
    return out


def capability_lines(width: int = 100) -> list[str]:
    """`harness runtimes`: one line per runtime (its columns as wide as their longest entry), then
    why a runtime is left out of `--runtime all` here, each line at most `width` columns."""
    import textwrap

    caps = capabilities()
    ok = [c for c in caps if "unavailable" not in c]
    wn = max(len(c["runtime"]) for c in caps)
    wd = max([len("drafters")] + [len(", ".join(c["drafters"])) for c in ok])
    wp = max([len("draft policies")] + [len(", ".join(c["policies"])) for c in ok])
    lines = [f"{'runtime':{wn}s} {'drafters':{wd}s} {'draft policies':{wp}s} forced under load"]
    notes = []
    for c in caps:
        if "unavailable" in c:
            lines.append(f"{c['runtime']:{wn}s} (not here: {c['unavailable']})")
            continue
        star = "" if c["in_all"] else " *"
        lines.append(f"{c['runtime']:{wn}s} {', '.join(c['drafters']):{wd}s} {', '.join(c['policies']):{wp}s} "
                     f"{'yes' if c['forces'] else 'no':6s} {'yes' if c['concurrency'] else 'no'}{star}")
        if star:
            notes += textwrap.wrap(f"* {c['runtime']} is not in --runtime all here: {not_in_all()[c['runtime']]}", width,
                                   subsequent_indent="  ")
    return lines + notes


def listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c' (or 'none')."""
    if not items:
        return "none"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


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
