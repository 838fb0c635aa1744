"""A model's shape, read in one place: from a transformers config, a config.json, a Hugging Face
id (cached or from the Hub when reachable) or a GGUF file's metadata and tensor shapes.

ModelShape is what every other module needs of a dense decoder-only transformer: widths, layers,
heads, head size, MLP width, vocabulary, RoPE base, norm epsilon, context. The torch runtime's
lean forward, the GGUF writer, the draft builder, `harness models info` and the FLOPs count all
read it here. The FLOPs count is 2 x the matmul weights a token passes through (core/theory.py
holds the convention): the output head counts once; the input embedding is a table lookup and
counts nothing, so a tied embedding is counted exactly once. Biases and norms are not matmul
weights. This gives 6,171,394,048 FLOPs/token for Qwen2.5-3B-Instruct and 987,922,432 for
Qwen2.5-0.5B-Instruct (c = 0.1601).

The bytes a step reads come from here too (`sizes_from_config`, `sizes_from_folder`,
`sizes_from_gguf`: run.json's `model_sizes`, which the report's roofline sets against this
machine's limits): the same matmul weights, at the element size the runtime runs them in (a
Hugging Face model) or as stored (a GGUF file's tensor bytes, quantized or not), plus the KV cache
per position (llama.cpp's default cache holds f16).

What it does not do: load weights, or hold formulas of speedup (core/theory.py).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from spec_harness.core.errors import HarnessError
from spec_harness.core.theory import FlopsPerToken

# Model types whose MLP is up/down only (2 matrices); every other type is taken as gated
# (gate/up/down, 3 matrices), as in Llama, Qwen, Mistral, Gemma, SmolLM and Phi-3.
NON_GATED_MLP = frozenset(
    {"opt", "gpt2", "gpt_neox", "gptj", "gpt_bigcode", "bloom", "falcon", "phi", "codegen", "mpt", "starcoder2"}
)
GGUF_LOOKUPS = ("token_embd.weight", "position_embd.weight", "token_types.weight")  # tables, not matmuls
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}  # element size of a Hugging Face model's dtype
DTYPE_SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
GGUF_FLOAT_TYPES = frozenset({"F32", "F16", "BF16", "F64"})  # any other tensor type is quantized
LLAMA_KV_BYTES = 2  # llama.cpp's default KV cache type, f16, per element


@dataclass(frozen=True)
class ModelShape:
    """The shape of a dense decoder-only transformer."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    gated_mlp: bool = True
    embed_proj: Optional[int] = None  # OPT-350m style project_in/out width (None = hidden)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    context: Optional[int] = None
    model_type: str = "?"


def _first(cfg, *names, default=None):
    for n in names:
        v = getattr(cfg, n, None)
        if v is not None:
            return v
    return default


def _rope_theta(cfg) -> float:
    """transformers 5 keeps RoPE's base in rope_parameters, 4.x in rope_theta."""
    rp = getattr(cfg, "rope_parameters", None) or {}
    return float(rp.get("rope_theta", getattr(cfg, "rope_theta", None) or 10000.0))


def context_length(cfg) -> Optional[int]:
    """The positions a config's model was trained for (None when it does not say)."""
    if hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    return _first(cfg, "max_position_embeddings", "n_positions")


def model_context(ref: Optional[str]) -> Optional[int]:
    """The positions a model (GGUF file, folder or Hub id) was trained for, from its header or
    config alone; None where it does not say or cannot be read here."""
    if not ref:
        return None
    try:
        if str(ref).endswith(".gguf"):
            value = gguf_arch_value(open_gguf(ref), "context_length")
            return int(value) if value else None
        return context_length(load_config(ref))
    except Exception:  # noqa: BLE001 - unknown: the loaded runtime's own check still holds
        return None


def shape_from_config(cfg) -> ModelShape:
    """A transformers PretrainedConfig (text part) -> ModelShape; HarnessError if unsupported."""
    if hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    kind = getattr(cfg, "model_type", "?")
    if _first(cfg, "num_experts", "num_local_experts", "n_routed_experts"):
        raise HarnessError(f"{kind}: mixture-of-experts configs are not supported by the FLOPs estimate; pass the GGUF file instead")
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
    layers = _first(cfg, "num_hidden_layers", "n_layer", "num_layers")
    heads = _first(cfg, "num_attention_heads", "n_head")
    vocab = _first(cfg, "vocab_size")
    if not all(isinstance(x, int) for x in (hidden, layers, heads, vocab)):
        raise HarnessError(f"{kind}: config lacks hidden size, layers, heads or vocabulary size; cannot estimate FLOPs")
    proj = _first(cfg, "word_embed_proj_dim")
    return ModelShape(
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=_first(cfg, "num_key_value_heads", "multi_query_group_num", default=heads),
        head_dim=_first(cfg, "head_dim", default=hidden // heads),
        intermediate=_first(cfg, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden),
        vocab=vocab,
        gated_mlp=kind not in NON_GATED_MLP,
        embed_proj=proj if proj and proj != hidden else None,
        rope_theta=_rope_theta(cfg),
        norm_eps=_first(cfg, "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", default=1e-5),
        context=context_length(cfg),
        model_type=kind,
    )


def matmul_params(a: ModelShape) -> int:
    """Weights of every matmul one token passes through: attention, MLP, output head."""
    q_o = 2 * a.hidden * a.heads * a.head_dim
    k_v = 2 * a.hidden * a.kv_heads * a.head_dim
    mlp = (3 if a.gated_mlp else 2) * a.hidden * a.intermediate
    head_width = a.embed_proj or a.hidden
    proj = 2 * a.hidden * head_width if head_width != a.hidden else 0
    return a.layers * (q_o + k_v + mlp) + a.vocab * head_width + proj


def flops_from_config(cfg, source: str = "config") -> FlopsPerToken:
    a = shape_from_config(cfg)
    return FlopsPerToken(source, matmul_params(a), a.layers, a.heads * a.head_dim)


# ---------------------------------------------------------------- GGUF files


def open_gguf(path) -> "GgufHeader":  # noqa: F821
    """A GGUF file's metadata and tensor table (models/gguf_header.py; no tensor data is read), or
    one HarnessError line."""
    from spec_harness.models.gguf_header import GgufHeader

    path = Path(path)
    if not path.is_file():
        raise HarnessError(f"GGUF file not found: {path}")
    try:
        return GgufHeader(path)
    except ImportError:
        raise HarnessError("reading GGUF files needs the gguf package: pip install gguf") from None
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read GGUF file {path}: {e}") from None


def gguf_value(reader, key: str):
    """A GGUF metadata value (None when the key is absent)."""
    return reader.fields.get(key)


def gguf_arch_value(reader, key: str):
    """A value of the file's architecture, e.g. gguf_arch_value(r, "block_count") for llama.block_count."""
    return gguf_value(reader, f"{gguf_value(reader, 'general.architecture') or '?'}.{key}")


def _matmul_tensors(reader) -> list[tuple[object, int, int]]:
    """(tensor, used, of) of every matmul weight of a GGUF file: a token passes through used / of
    of it. Every tensor of two or more dimensions is one except the embedding lookups; the token
    embedding counts only when there is no separate `output.weight` (tied head). Expert tensors
    (`*_exps`) count expert_used_count / expert_count of their weights."""
    names = {t.name for t in reader.tensors}
    experts = gguf_arch_value(reader, "expert_count") or 0
    used = gguf_arch_value(reader, "expert_used_count") or experts
    out = []
    for t in reader.tensors:
        if len(t.shape) < 2 or t.name in GGUF_LOOKUPS[1:]:
            continue
        if t.name == "token_embd.weight" and "output.weight" in names:
            continue
        out.append((t, used, experts) if "_exps" in t.name and experts else (t, 1, 1))
    return out


def flops_from_gguf(path: Path) -> FlopsPerToken:
    """Matmul weights from the tensor shapes of a GGUF file (quantized or not; no data is read),
    the tensors of _matmul_tensors."""
    reader = open_gguf(path)
    return _gguf_flops(reader, path)


def _gguf_flops(reader, path) -> FlopsPerToken:
    params = sum(int(t.n_elements) * used // of for t, used, of in _matmul_tensors(reader))
    layers = gguf_arch_value(reader, "block_count")
    heads = gguf_arch_value(reader, "attention.head_count")
    if isinstance(heads, list):  # per-layer head counts (OpenELM style): use the mean
        heads = sum(heads) / max(len(heads), 1)
    width = gguf_arch_value(reader, "embedding_length")
    key_len = gguf_arch_value(reader, "attention.key_length")
    if not (layers and heads and width):
        arch = gguf_value(reader, "general.architecture") or "?"
        raise HarnessError(f"{path}: GGUF metadata lacks {arch}.block_count/head_count/embedding_length")
    attn_width = int(heads * key_len) if key_len else int(width)
    return FlopsPerToken(f"gguf: {path}", params, int(layers), attn_width)


# ---------------------------------------------------------------- the bytes of a step


def _sizes(weight_bytes: int, flops: FlopsPerToken, kv_bytes_per_position: int, weights: str, compute: str) -> dict:
    """run.json's model_sizes entry of one model: what one token's step reads and computes.
    weights: how the matmul weights are stored (f32, q4_1, ...); compute: the arithmetic their
    products run in, as core/limits.py measures it ("f32" or "int8"; f16 and bf16 are not measured)."""
    return {"weight_bytes": int(weight_bytes), "flops_per_token": flops.flops(), "kv_bytes_per_position": int(kv_bytes_per_position),
            "layers": flops.layers, "attn_width": flops.attn_width, "weights": weights, "compute": compute}


def sizes_from_config(cfg, dtype: str) -> dict:
    """model_sizes of a transformers model run in `dtype` (float32, float16, bfloat16): matmul_params
    x the element size (the embedding is a lookup of one row; a tied head counts once), and K and V
    of every layer per position in the same dtype."""
    if dtype not in DTYPE_BYTES:
        raise HarnessError(f"no element size known for dtype {dtype!r}: choose one of {', '.join(DTYPE_BYTES)}")
    a, n, flops = shape_from_config(cfg), DTYPE_BYTES[dtype], flops_from_config(cfg)
    return _sizes(flops.matmul_params * n, flops, 2 * a.layers * a.kv_heads * a.head_dim * n, DTYPE_SHORT[dtype], DTYPE_SHORT[dtype])


@functools.lru_cache(maxsize=16)
def sizes_from_folder(folder: str, dtype: str) -> dict:
    """sizes_from_config of a Hugging Face model folder's config.json (read once per folder)."""
    return sizes_from_config(load_config(folder), dtype)


@functools.lru_cache(maxsize=16)
def sizes_from_gguf(path: str) -> dict:
    """model_sizes of a GGUF file as llama.cpp runs it: the stored bytes of its matmul tensors
    (those flops_from_gguf counts), K and V of every layer per position in llama.cpp's default f16
    cache; the weights' types, the one holding most of those bytes first (e.g. q4_1+q8_0), whose
    products run as int8 dot products when it is quantized (llama.cpp quantizes the activations to
    8 bits), else in f32."""
    reader = open_gguf(path)
    tensors = _matmul_tensors(reader)
    by_type: dict[str, int] = {}
    for t, used, of in tensors:
        by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + int(t.n_bytes) * used // of
    order = sorted(by_type, key=by_type.get, reverse=True)  # the type holding most bytes first
    layers = int(gguf_arch_value(reader, "block_count") or 0)
    heads = gguf_arch_value(reader, "attention.head_count") or 1
    heads = max(heads) if isinstance(heads, list) else heads
    kv_heads = gguf_arch_value(reader, "attention.head_count_kv") or heads
    kv_heads = max(kv_heads) if isinstance(kv_heads, list) else kv_heads
    head = int(gguf_arch_value(reader, "embedding_length") or 0) // int(heads)
    k_len = gguf_arch_value(reader, "attention.key_length") or head
    v_len = gguf_arch_value(reader, "attention.value_length") or head
    kv = layers * int(kv_heads) * (int(k_len) + int(v_len)) * LLAMA_KV_BYTES
    return _sizes(sum(by_type.values()), _gguf_flops(reader, path), kv, "+".join(t.lower() for t in order),
                  "f32" if order[0] in GGUF_FLOAT_TYPES else "int8")


def pair_sizes(size_of, target, draft) -> Optional[dict]:
    """{"target": size_of(target), "draft": size_of(draft)} for a runtime's describe(), or None
    when a model's files cannot say (a shape the FLOPs count does not support)."""
    try:
        return {"target": size_of(target), "draft": size_of(draft)}
    except HarnessError:
        return None


# ---------------------------------------------------------------- by reference


def load_config(ref: str, role: str = "model"):
    """A transformers config from a local folder, a config.json file or a Hugging Face id.

    Ids are looked up in the local cache first; the Hub is asked only when it is reachable.
    No weights are downloaded.
    """
    from transformers import AutoConfig

    from spec_harness.models.hub import hub_reachable
    from spec_harness.models.loading import looks_like_path

    p = Path(ref).expanduser()
    if p.is_file():
        try:
            d = json.loads(p.read_text())
            return AutoConfig.for_model(d.pop("model_type"), **d)
        except (ValueError, KeyError) as e:
            raise HarnessError(f"{role} config {ref} is not a Hugging Face config.json ({type(e).__name__}: {e})") from None
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise HarnessError(f"{role} folder {ref} has no config.json")
        try:
            return AutoConfig.from_pretrained(str(p))
        except (OSError, ValueError) as e:
            raise HarnessError(f"cannot read {role} config in {ref}: {str(e).strip().splitlines()[0]}") from None
    if looks_like_path(ref) or ref.endswith((".json", ".gguf")):
        raise HarnessError(f"{role} not found: {ref} (check the path, or give a Hugging Face id)")
    try:
        return AutoConfig.from_pretrained(ref, local_files_only=True)
    except (OSError, ValueError):
        pass
    if not hub_reachable():
        raise HarnessError(
            f"{role} config {ref!r} is not in the Hugging Face cache and the Hub cannot be reached; "
            "run once online, or pass a local folder, config.json or .gguf file"
        )
    try:
        return AutoConfig.from_pretrained(ref)
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot load {role} config {ref!r}: {str(e).strip().splitlines()[0]}") from None


def flops_for(ref: str, role: str = "model") -> FlopsPerToken:
    """FLOPs per token of a model given as a .gguf file, a folder, a config.json or an HF id."""
    if ref is None:
        raise HarnessError(f"no {role} model given")
    if str(ref).endswith(".gguf"):
        if not Path(ref).expanduser().is_file():
            raise HarnessError(f"{role} GGUF file not found: {ref}")
        return flops_from_gguf(Path(ref).expanduser())
    return flops_from_config(load_config(str(ref), role), source=f"config: {ref}")
