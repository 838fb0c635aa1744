"""Pair presets and resolution of --pair / --target / --draft into a PairSpec.

A preset names a target and a draft (Hugging Face ids or built-in tiny pairs). `--draft self`
uses the target as its own draft (the calibration run: theory says exactly 1.00x). A tiny pair's
PairSpec also carries its f32 GGUF export (models/gguf_export.py, written once, cached next to the
HF folders), so the llama.cpp runtimes run the very same weights with no flags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from harness.errors import HarnessError
from runtimes.base import PairSpec

DEFAULT_PAIR = "tiny"

# name -> description; tiny pairs are built in-process by models/tiny.py
PRESETS: dict[str, dict] = {
    "tiny": {"builtin": "tiny", "about": "4-layer byte-level Llama target, its first layer as draft (tests)"},
    "tiny-padded": {"builtin": "tiny-padded", "about": "tiny, with embedding matrices padded to different sizes"},
}


def resolve_pair(
    pair: Optional[str] = None,
    target: Optional[str] = None,
    draft: Optional[str] = None,
    target_gguf: Optional[str] = None,
    draft_gguf: Optional[str] = None,
) -> PairSpec:
    if pair and (target or target_gguf):
        raise HarnessError("give either --pair or --target/--target-gguf, not both")
    if target or target_gguf:
        if draft is None and draft_gguf is None:
            raise HarnessError("--target needs a --draft (a path or id, or `self` to use the target as its own draft)")
        if draft == "self":
            draft = target
        if draft_gguf == "self":
            draft_gguf = target_gguf
        # a GGUF file serves every runtime: transformers loads it too (gguf_file=)
        target_gguf = target_gguf or (target if _is_gguf(target) else None)
        draft_gguf = draft_gguf or (draft if _is_gguf(draft) else None)
        target, draft = target or target_gguf, draft or draft_gguf
        spec = PairSpec("custom", target, draft, target_gguf, draft_gguf)
    else:
        name = pair or DEFAULT_PAIR
        if name not in PRESETS:
            raise HarnessError(f"unknown pair {name!r}; choose from: {', '.join(PRESETS)} (or pass --target and --draft)")
        spec = _preset(name)
        if draft == "self":
            spec = PairSpec(spec.name + "+self", spec.target, spec.target, spec.target_gguf, spec.target_gguf)
        elif draft:
            raise HarnessError("--draft with --pair: only `--draft self` is allowed; for another draft pass --target too")
    for role, ref in (("target", spec.target_gguf), ("draft", spec.draft_gguf)):
        if ref and not Path(ref).expanduser().is_file():
            raise HarnessError(f"{role} GGUF file not found: {ref}")
    return spec


def _is_gguf(ref: Optional[str]) -> bool:
    return bool(ref) and str(ref).endswith(".gguf")


def _preset(name: str) -> PairSpec:
    from models.gguf_export import ensure_tiny_gguf
    from models.tiny import ensure_pair

    p = PRESETS[name]
    t, d = ensure_pair(p["builtin"])
    t_gguf, d_gguf = ensure_tiny_gguf(p["builtin"], "f32")
    return PairSpec(name, str(t), str(d), str(t_gguf), str(d_gguf))
