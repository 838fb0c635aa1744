"""Export a Llama-architecture Hugging Face folder to a GGUF file llama.cpp loads, and cache the
exports of the tiny pairs next to them.

The tensors are the HF weights, renamed with gguf's own name map and stored as f32, f16 or q8_0
(1-D tensors, the norms, always f32, as llama.cpp's converter does). q_proj and k_proj rows are
permuted as convert_hf_to_gguf.py's LlamaModel.permute does: HF rotates pairs (i, i + d/2) of each
head (rotate_half), llama.cpp's "normal" RoPE rotates adjacent pairs (2i, 2i + 1), so each head's
rows are reordered from [first halves | second halves] to interleaved. With f32 the same weights
then give the same logits (to float rounding) in torch, hf and llama.cpp.

The tokenizer is written as a "gpt2" (byte-level BPE) vocabulary: tokens in id order, their types
(normal, control for special tokens, unused for padded embedding rows), the merges, bos/eos, and
no automatic BOS. The tiny pairs have no merges; a GGUF without the merges key is rejected by
llama.cpp and gguf drops empty arrays, so a single merge of the EOS text with itself is written,
which can never apply (special tokens are never symbols of a pre-tokenized word).

What it does not do: SentencePiece vocabularies, RoPE scaling, non-Llama architectures, or
k-quants (use llama.cpp's llama-quantize for those); real presets come as downloaded GGUF files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

from harness.errors import HarnessError

OUTTYPES = ("f32", "f16", "q8_0")
EXPORT_VERSION = 1  # bump when the recipe changes, so cached exports are rewritten
NEVER_MERGE = "<|endoftext|> <|endoftext|>"


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate_half row order -> llama.cpp interleaved order, per head. w [n_head * d, hidden]."""
    d2 = w.shape[0] // n_head // 2
    return w.reshape(n_head, 2, d2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _config(folder: Path) -> dict:
    cfg = json.loads((folder / "config.json").read_text())
    if cfg.get("model_type") != "llama":
        raise HarnessError(f"{folder}: GGUF export handles Llama-architecture models only, got {cfg.get('model_type')!r}")
    if cfg.get("rope_scaling") or (cfg.get("rope_parameters") or {}).get("rope_type", "default") != "default":
        raise HarnessError(f"{folder}: RoPE scaling is not supported by this exporter; use llama.cpp's convert_hf_to_gguf.py")
    return cfg


def _rope_theta(cfg: dict) -> float:
    return float((cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta", 10000.0)))


def _weights(folder: Path) -> dict[str, np.ndarray]:
    from safetensors import safe_open

    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="np") as st:
            for k in st.keys():
                out[k] = st.get_tensor(k)
    if not out:
        raise HarnessError(f"{folder}: no .safetensors weights to export")
    return out


def _tokenizer(folder: Path, n_rows: int) -> tuple[list[str], list[int], list[str], dict]:
    """-> (tokens [n_rows], token types, merges, special ids) from tokenizer.json."""
    import gguf

    tj = json.loads((folder / "tokenizer.json").read_text())
    model = tj["model"]
    if model.get("type") != "BPE":
        raise HarnessError(f"{folder}: GGUF export handles byte-level BPE tokenizers only, got {model.get('type')!r}")
    vocab: dict[str, int] = dict(model["vocab"])
    special = {t["content"]: t["id"] for t in tj.get("added_tokens", [])}
    vocab.update(special)
    by_id = {i: t for t, i in vocab.items()}
    if len(by_id) > n_rows:
        raise HarnessError(f"{folder}: tokenizer has {len(by_id)} ids but the embedding only {n_rows} rows")
    tokens, types = [], []
    for i in range(n_rows):  # padded embedding rows become unused placeholder tokens
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if by_id[i] in special else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    tc = json.loads((folder / "tokenizer_config.json").read_text()) if (folder / "tokenizer_config.json").exists() else {}
    ids = {k: vocab.get(tc.get(f"{k}_token") or "", None) for k in ("bos", "eos")}
    return tokens, [int(t) for t in types], merges, ids


def _quantize(name: str, w: np.ndarray, outtype: str):
    """-> (data, raw_dtype or None). 1-D tensors stay f32, as in llama.cpp's converter."""
    import gguf

    w = w.astype(np.float32)
    if w.ndim == 1 or outtype == "f32":
        return w, None
    if outtype == "f16":
        return w.astype(np.float16), None
    if w.shape[-1] % 32:
        return w.astype(np.float16), None  # q8_0 needs rows in blocks of 32: keep this one f16
    return gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0), gguf.GGMLQuantizationType.Q8_0


def export_llama(folder: str | Path, out: str | Path, outtype: str = "f32", pre: str = "default",
                 chat_template: Optional[str] = None) -> Path:
    """Write the HF Llama folder as a GGUF file at `out` (atomically) and return its path."""
    import gguf

    if outtype not in OUTTYPES:
        raise HarnessError(f"GGUF export type must be one of {', '.join(OUTTYPES)}, got {outtype!r}")
    folder, out = Path(folder), Path(out)
    cfg = _config(folder)
    weights = _weights(folder)
    n_layers, n_head = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads") or n_head
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head
    n_rows = weights["model.embed_tokens.weight"].shape[0]
    tokens, types, merges, special = _tokenizer(folder, n_rows)

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(folder.name)
    w.add_context_length(cfg.get("max_position_embeddings", 2048))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(head_dim)
    if head_dim != cfg["hidden_size"] // n_head:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_freq_base(_rope_theta(cfg))
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-5))
    w.add_vocab_size(n_rows)
    w.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                     "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[outtype])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges or [NEVER_MERGE])
    if special["bos"] is not None:
        w.add_bos_token_id(special["bos"])
    if special["eos"] is not None:
        w.add_eos_token_id(special["eos"])
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    if chat_template:
        w.add_chat_template(chat_template)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, n_layers)
    for hf_name, t in weights.items():
        if hf_name.endswith("rotary_emb.inv_freq"):
            continue
        if hf_name.endswith("q_proj.weight"):
            t = permute_qk(t, n_head)
        elif hf_name.endswith("k_proj.weight"):
            t = permute_qk(t, n_kv)
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise HarnessError(f"{folder}: no GGUF name for tensor {hf_name}")
        data, raw = _quantize(name, t, outtype)
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)
    return out


def ensure_tiny_gguf(name: str = "tiny", outtype: str = "f32") -> tuple[Path, Path]:
    """Export (once) a tiny pair to GGUF next to its HF folders -> (target.gguf, draft.gguf)."""
    from models.tiny import ensure_pair

    t_dir, d_dir = ensure_pair(name)
    paths = []
    for folder in (t_dir, d_dir):
        out = folder.parent / f"{folder.name}.{outtype}.v{EXPORT_VERSION}.gguf"
        if not out.is_file():
            export_llama(folder, out, outtype)
        paths.append(out)
    return paths[0], paths[1]
