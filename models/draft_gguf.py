"""Export a Hugging Face Llama model (a distilled draft, or a target's first layers) to one GGUF file.

Architecture `llama`, tied output (no `output.weight`), 2-D weights in q8_0 (or f16/f32), norms in
f32, and the tokenizer metadata (`tokenizer.*`) copied verbatim from a reference GGUF (the target),
so llama.cpp and transformers (`gguf_file=`) both load it with the target's tokenizer.
Q and K rows are permuted the way llama.cpp's converter does (transformers undoes it on load).

It does not train (models/distill.py) and does not handle other architectures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate-half q/k rows -> llama.cpp interleaved rows. w [n_head*hd, in]."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _tensors(model) -> list[tuple[str, np.ndarray]]:
    """(gguf name, float32 array) for every weight of a LlamaForCausalLM (tied head left out)."""
    cfg = model.config
    sd = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    out = [("token_embd.weight", sd["model.embed_tokens.weight"])]
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        out += [
            (f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"]),
            (f"blk.{i}.attn_q.weight", _permute(sd[p + "self_attn.q_proj.weight"], cfg.num_attention_heads)),
            (f"blk.{i}.attn_k.weight", _permute(sd[p + "self_attn.k_proj.weight"], cfg.num_key_value_heads)),
            (f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"]),
            (f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"]),
            (f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"]),
            (f"blk.{i}.ffn_gate.weight", sd[p + "mlp.gate_proj.weight"]),
            (f"blk.{i}.ffn_up.weight", sd[p + "mlp.up_proj.weight"]),
            (f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"]),
        ]
    out.append(("output_norm.weight", sd["model.norm.weight"]))
    if not cfg.tie_word_embeddings:
        out.append(("output.weight", sd["lm_head.weight"]))
    return out


def _copy_tokenizer(writer, reference: str) -> None:
    import gguf

    r = gguf.GGUFReader(reference)
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, f.contents(), vtype, sub_type=sub)


def _tokenizer_from_hf(writer, tokenizer) -> None:
    """gpt2-style (byte-level BPE) tokenizer metadata from a transformers fast tokenizer (the tiny pairs)."""
    import json

    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    special = set(tokenizer.all_special_tokens)
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in special else 1 for t in tokens])  # 3 = control, 1 = normal
    if merges:
        writer.add_token_merges(merges)
    else:  # a byte-level vocabulary without merges (the tiny pairs): transformers then wants scores
        writer.add_token_scores([0.0] * len(tokens))
    if tokenizer.eos_token_id is not None:
        writer.add_eos_token_id(tokenizer.eos_token_id)
        writer.add_bos_token_id(tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id)
    writer.add_add_bos_token(False)


def export_gguf(model, out: str | Path, reference_gguf: str | None = None, qtype: str = "q8_0",
                name: str = "draft", tokenizer=None, embed_qtype: str | None = None) -> Path:
    """Write `model` (LlamaForCausalLM) to `out`; returns the path. Tokenizer metadata comes from
    `reference_gguf` (copied) or else from `tokenizer` (a transformers fast byte-level BPE tokenizer).
    `embed_qtype` (q8_0, q5_1, q4_1 or q4_0) stores the (tied) embedding differently from the other
    matrices: it is most of a narrow draft's bytes and of its per-token time in llama.cpp."""
    import gguf

    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    rp = getattr(cfg, "rope_parameters", None) or {}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(name)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(rp.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    file_type = {"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "f32": gguf.LlamaFileType.ALL_F32}[qtype]
    w.add_file_type(file_type)
    if reference_gguf:
        _copy_tokenizer(w, str(reference_gguf))
    else:
        _tokenizer_from_hf(w, tokenizer)
    for tname, arr in _tensors(model):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if tname == "token_embd.weight" and embed_qtype in ("q8_0", "q5_1", "q5_0", "q4_1", "q4_0") and arr.shape[-1] % 32 == 0:
            t = getattr(gguf.GGMLQuantizationType, embed_qtype.upper())
            q = gguf.quants.quantize(arr, t)
            w.add_tensor(tname, q, raw_shape=q.shape, raw_dtype=t)
        elif arr.ndim == 1 or qtype == "f32":
            w.add_tensor(tname, arr)
        elif qtype == "f16":
            w.add_tensor(tname, arr.astype(np.float16))
        elif arr.shape[-1] % 32 == 0:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(tname, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:  # q8_0 needs rows of whole 32-blocks
            w.add_tensor(tname, arr.astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def early_exit_model(target, layers: int):
    """The target's first `layers` layers with its final norm and (tied) head, as a LlamaForCausalLM."""
    import copy

    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**{**target.config.to_dict(), "num_hidden_layers": layers, "tie_word_embeddings": True})
    cfg.architectures = ["LlamaForCausalLM"]
    m = LlamaForCausalLM(cfg).float().eval()
    sd = {k: v for k, v in copy.deepcopy(target.state_dict()).items()
          if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers}
    m.load_state_dict(sd, strict=False)
    m.tie_weights()
    return m


@torch.no_grad()
def check_roundtrip(model, path: str | Path, ids: list[int]) -> float:
    """Max |logit difference| between `model` and the GGUF reloaded by transformers, on `ids`."""
    from models.loading import load_hf_model

    back = load_hf_model(str(path), "draft", torch.float32, "cpu")
    x = torch.tensor([ids])
    return float((model(input_ids=x).logits - back(input_ids=x).logits).abs().max())
