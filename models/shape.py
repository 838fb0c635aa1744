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

What it does not do: load weights, or hold formulas of speedup (core/theory.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from core.errors import HarnessError
from core.theory import FlopsPerToken

# Model types whose MLP is up/down only (2 matrices); every other type is taken as gated
# (gate/up/down, 3 matrices), as in Llama, Qwen, Mistral, Gemma, SmolLM and Phi-3.
NON_GATED_MLP = frozenset(
    {"opt", "gpt2", "gpt_neox", "gptj", "gpt_bigcode", "bloom", "falcon", "phi", "codegen", "mpt", "starcoder2"}
)
GGUF_LOOKUPS = ("token_embd.weight", "position_embd.weight", "token_types.weight")  # tables, not matmuls


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


def open_gguf(path) -> "gguf.GGUFReader":  # noqa: F821
    """A gguf.GGUFReader (metadata and tensor shapes; data stays on disk), or one HarnessError line."""
    path = Path(path)
    if not path.is_file():
        raise HarnessError(f"GGUF file not found: {path}")
    try:
        from gguf import GGUFReader

        return GGUFReader(str(path))
    except ImportError:
        raise HarnessError("reading GGUF files needs the gguf package: pip install gguf") from None
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read GGUF file {path}: {e}") from None


def gguf_value(reader, key: str):
    """A GGUF metadata value (None when the key is absent)."""
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def gguf_arch_value(reader, key: str):
    """A value of the file's architecture, e.g. gguf_arch_value(r, "block_count") for llama.block_count."""
    return gguf_value(reader, f"{gguf_value(reader, 'general.architecture') or '?'}.{key}")


def flops_from_gguf(path: Path) -> FlopsPerToken:
    """Matmul weights from the tensor shapes of a GGUF file (quantized or not; no data is read).

    Every tensor of two or more dimensions is a matmul weight except the embedding lookups; the
    token embedding counts only when there is no separate `output.weight` (tied head).
    Expert tensors (`*_exps`) count expert_used_count / expert_count of their weights.
    """
    reader = open_gguf(path)
    names = {t.name for t in reader.tensors}
    experts = gguf_arch_value(reader, "expert_count") or 0
    used = gguf_arch_value(reader, "expert_used_count") or experts
    params = 0
    for t in reader.tensors:
        if len(t.shape) < 2 or t.name in GGUF_LOOKUPS[1:]:
            continue
        if t.name == "token_embd.weight" and "output.weight" in names:
            continue
        n = int(t.n_elements)
        params += n * used // experts if "_exps" in t.name and experts else n
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


# ---------------------------------------------------------------- by reference


def load_config(ref: str, role: str = "model"):
    """A transformers config from a local folder, a config.json file or a Hugging Face id.

    Ids are looked up in the local cache first; the Hub is asked only when it is reachable.
    No weights are downloaded.
    """
    from transformers import AutoConfig

    from models.hub import hub_reachable
    from models.loading import looks_like_path

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
