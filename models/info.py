"""`harness models info`: what one model is, from its files: architecture, layers, hidden size,
heads, vocabulary (tokenizer ids and embedding rows), FLOPs per token (models/shape.py) and the
tokenizer fingerprint (models/compat.py).

A reference is a .gguf file, a Hugging Face folder, or an HF id; an id is read from its cached
snapshot when there is one (no network), else config and tokenizer come from the Hub when it is
reachable. Also the labels a person reads for a model and a pair (`model_label`, `pair_label`),
used in the console, reports and plots. What it does not do: load weights, or count FLOPs itself.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from spec_harness.core.errors import HarnessError
from spec_harness.models import compat, shape
from spec_harness.models.loading import looks_like_path


def _flops_line(get) -> str:
    try:
        f = get()
    except HarnessError as e:
        return f"n/a ({e})"
    return f"{f.flops():,} (2 x {f.matmul_params:,} matmul weights; context 0)"


def _fingerprint_line(vocab: dict, specials: dict) -> str:
    return f"sha256 {compat.fingerprint(vocab, specials)[:16]} (id-ordered vocabulary + bos/eos/pad/unk ids)"


def gguf_info(path: Path) -> list[tuple[str, str]]:
    reader = shape.open_gguf(path)

    def value(key):
        return shape.gguf_arch_value(reader, key)

    arch = shape.gguf_value(reader, "general.architecture") or "?"
    ftype = _file_type(shape.gguf_value(reader, "general.file_type")) or "?"
    vocab, specials = compat.gguf_tokenizer_vocab(reader)
    rows = len(shape.gguf_value(reader, "tokenizer.ggml.tokens") or [])
    heads, kv = value("attention.head_count"), value("attention.head_count_kv")
    return [
        ("model", str(path)),
        ("format", f"gguf ({ftype}, {path.stat().st_size:,} bytes)"),
        ("architecture", arch),
        ("layers", str(value("block_count"))),
        ("hidden size", str(value("embedding_length"))),
        ("heads", f"{heads} ({kv or heads} key/value)"),
        ("context", str(value("context_length"))),
        ("vocabulary", f"{len(vocab)} tokenizer ids" + (f", {rows} rows (padded)" if rows != len(vocab) else "")),
        ("FLOPs/token", _flops_line(lambda: shape.flops_from_gguf(path))),
        ("tokenizer", _fingerprint_line(vocab, specials)),
    ]


def _local_ref(ref: str) -> str:
    """An HF id with a complete cached snapshot -> that folder (so nothing asks the network)."""
    if Path(ref).expanduser().exists():
        return ref
    from spec_harness.models.hub import CacheIndex

    found = CacheIndex().hf_snapshot(ref)
    return str(found[0]) if found else ref


def hf_info(ref: str) -> list[tuple[str, str]]:
    from spec_harness.models.loading import load_hf_tokenizer

    local = _local_ref(ref)
    cfg = shape.load_config(local, "model")
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    tok = load_hf_tokenizer(local, "model")
    vocab, specials = compat.hf_tokenizer_vocab(tok)
    try:
        a = shape.shape_from_config(cfg)
        dims = [("layers", str(a.layers)), ("hidden size", str(a.hidden)), ("heads", f"{a.heads} ({a.kv_heads} key/value)")]
    except HarnessError as e:
        dims = [("shape", f"n/a ({e})")]
    arch = (getattr(cfg, "architectures", None) or ["?"])[0]
    rows = getattr(text, "vocab_size", None)
    return [
        ("model", ref if local == ref else f"{ref} ({local})"),
        ("format", "hf"),
        ("architecture", f"{arch} ({getattr(cfg, 'model_type', '?')})"),
        *dims,
        ("context", str(shape.context_length(cfg) or "?")),
        ("vocabulary", f"{len(vocab)} tokenizer ids, {rows} embedding rows"),
        ("FLOPs/token", _flops_line(lambda: shape.flops_from_config(cfg))),
        ("tokenizer", _fingerprint_line(vocab, specials)),
    ]


def model_info(ref: str) -> list[tuple[str, str]]:
    """(label, value) rows describing one model reference."""
    if ref.endswith(".gguf"):
        return gguf_info(Path(ref).expanduser())
    return hf_info(ref)


def format_rows(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


# ---------------------------------------------------------------- labels a person reads

QUANT_SUFFIX = re.compile(r"[.\-_](?:I?Q\d[\w]*|BF16|F16|F32|FP16)(?:\.v\d+)?$", re.IGNORECASE)  # .Q4_1, -q8_0, .f32.v2
SIZE_IN_NAME = re.compile(r"\d+(?:\.\d+)?[MB]\b", re.IGNORECASE)


def _count(n: float) -> str:
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"


def _file_type(file_type) -> str:
    """A general.file_type as gguf names it, less "MOSTLY_": Q4_1, Q8_0, ALL_F32 ("" when unknown)."""
    import gguf

    try:
        return gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except (ValueError, TypeError):
        return ""


def _quantization(file_type) -> str:
    """A general.file_type as a person names it: Q4_1, Q8_0, F32."""
    return _file_type(file_type).removeprefix("ALL_") or "?"


def gguf_quantization(path) -> str:
    """A GGUF file's quantization, from llama.cpp's reading of its header."""
    from spec_harness.models.llama_files import facts

    return _quantization(facts(str(path))["file_type"])


def _gguf_label(path: Path) -> str:
    from spec_harness.models.llama_files import facts

    f = facts(str(path))
    base = QUANT_SUFFIX.sub("", path.stem)
    quant = _quantization(f["file_type"])
    if SIZE_IN_NAME.search(base):
        return f"{base} {quant}"
    mib = path.stat().st_size / 2**20
    return f"{base} {f['layers']}×{f['width']} {_count(f['n_params'])} {quant} ({mib:.{0 if mib >= 10 else 1}f} MiB)"


def _hf_label(folder: Path) -> str:
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        base = folder.parent.parent.name.split("--")[-1]  # the Hugging Face cache: models--org--name/snapshots/<rev>
    else:
        base = folder.name
    if SIZE_IN_NAME.search(base):
        return base
    a = shape.shape_from_config(shape.load_config(str(folder)))
    return f"{base} {a.layers}×{a.hidden}"


def model_label(ref: Optional[str]) -> str:
    """One model as a person names it, from its files: the name (the file or repository name, a
    quantization suffix dropped), then the quantization; a name that says no size gets the shape
    (layers × width), the parameters counted from the tensors and the file size."""
    if not ref:
        return "?"
    p = Path(ref).expanduser()
    try:
        if p.suffix == ".gguf" and p.is_file():
            return _gguf_label(p)
        if p.is_dir():
            return _hf_label(p)
    except (HarnessError, ImportError, OSError):  # an unreadable file names itself by its path
        pass
    return p.name if looks_like_path(ref) else ref.split("/")[-1]


def pair_label(target: Optional[str], draft: Optional[str]) -> str:
    """'target ← draft', e.g. 'SmolLM2-135M-Instruct Q4_1 ← smollm2-draft 4×256 16M Q8_0 (12 MiB)'."""
    t = model_label(target)
    return f"{t} ← itself" if draft == target else f"{t} ← {model_label(draft)}"
