"""`harness models info`: what one model is, from its files: architecture, layers, hidden size,
heads, vocabulary (tokenizer ids and embedding rows), FLOPs per token (models/shape.py) and the
tokenizer fingerprint (models/compat.py).

A reference is a .gguf file, a Hugging Face folder, or an HF id; an id is read from its cached
snapshot when there is one (no network), else config and tokenizer come from the Hub when it is
reachable. What it does not do: load weights, or count FLOPs itself.
"""

from __future__ import annotations

from pathlib import Path

from core.errors import HarnessError
from models import compat, shape


def _flops_line(get) -> str:
    try:
        f = get()
    except HarnessError as e:
        return f"n/a ({e})"
    return f"{f.flops():,} (2 x {f.matmul_params:,} matmul weights; context 0)"


def _fingerprint_line(vocab: dict, specials: dict) -> str:
    return f"sha256 {compat.fingerprint(vocab, specials)[:16]} (id-ordered vocabulary + bos/eos/pad/unk ids)"


def gguf_info(path: Path) -> list[tuple[str, str]]:
    import gguf

    reader = shape.open_gguf(path)

    def value(key):
        return shape.gguf_arch_value(reader, key)

    arch = shape.gguf_value(reader, "general.architecture") or "?"
    ftype = shape.gguf_value(reader, "general.file_type")
    try:
        ftype = gguf.LlamaFileType(ftype).name.removeprefix("MOSTLY_") if ftype is not None else "?"
    except ValueError:
        pass
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
    from models.hub import CacheIndex

    found = CacheIndex().hf_snapshot(ref)
    return str(found[0]) if found else ref


def hf_info(ref: str) -> list[tuple[str, str]]:
    from models.loading import load_hf_tokenizer

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
