"""The one GGUF writer: a Hugging Face Llama model (a tiny test model, a distilled draft, a target's
first layers) to a GGUF file that llama.cpp and transformers (`gguf_file=`) load.

Header: architecture `llama`, the shape of models/shape.py. Tensors: the model's weights in
llama.cpp's names, 2-D matrices as q8_0, f16 or f32 (a matrix whose rows are not whole blocks of
32 stays f16 under q8_0), 1-D tensors (the norms) always f32, as llama.cpp's converter does; the
embedding may be stored in its own type (`embed_qtype`: it is most of a narrow draft's bytes and of
its per-token time in llama.cpp). A tied head has no `output.weight`. q_proj and k_proj rows are
permuted as convert_hf_to_gguf.py's LlamaModel.permute does: HF rotates pairs (i, i + d/2) of each
head (rotate_half), llama.cpp's "normal" RoPE rotates adjacent pairs (2i, 2i + 1), so each head's
rows go from [first halves | second halves] to interleaved (transformers undoes it on load). With
f32 the same weights then give the same logits (to float rounding) in torch, hf and llama.cpp.

Tokenizer metadata comes from one of two sources: copied verbatim from a reference GGUF (the
target's, for a draft of a real model), or written from a transformers byte-level BPE tokenizer
as a "gpt2" vocabulary: tokens in id order, their types (control for special tokens, unused for
padded embedding rows), the merges, bos/eos, no automatic BOS. A vocabulary without merges (the
tiny pairs: every byte is a token) cannot be written so that both readers take it: llama.cpp
requires the merges key, and transformers' converter rejects a merge whose result is not a token.
`reader="llama.cpp"` then writes one merge that can never apply (the EOS text with itself: special
tokens are never symbols of a pre-tokenized word); `reader="transformers"` writes token scores.

What it does not do: SentencePiece vocabularies, RoPE scaling, other architectures, or k-quants
(models/quantize.py runs llama.cpp's llama-quantize on the F32 file written here); real presets come
as downloaded GGUF files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import numpy as np

from spec_harness.core.errors import HarnessError
from spec_harness.models.shape import shape_from_config

QTYPES = ("f32", "f16", "q8_0")
EMBED_QTYPES = ("q8_0", "q5_1", "q5_0", "q4_1", "q4_0")
READERS = ("llama.cpp", "transformers")
EXPORT_VERSION = 2  # bump when the recipe changes, so cached tiny exports are rewritten
NEVER_MERGE = "<|endoftext|> <|endoftext|>"


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate_half row order -> llama.cpp interleaved order, per head. w [n_head * d, hidden]."""
    d2 = w.shape[0] // n_head // 2
    return w.reshape(n_head, 2, d2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _check(model) -> None:
    cfg = model.config
    if getattr(cfg, "model_type", None) != "llama":
        raise HarnessError(f"GGUF export handles Llama-architecture models only, got {getattr(cfg, 'model_type', None)!r}")
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise HarnessError("RoPE scaling is not supported by this exporter; use llama.cpp's convert_hf_to_gguf.py")


class _Float32:
    """A state dict read one tensor at a time as float32 numpy (a model in float16 is not copied whole)."""

    def __init__(self, model):
        self.sd = model.state_dict()

    def __getitem__(self, key: str) -> np.ndarray:
        return self.sd[key].detach().float().cpu().numpy()


def _tensors(model, a):
    """(GGUF name, float32 array) for every weight of a LlamaForCausalLM of shape `a`, in llama.cpp's
    order, each converted when it is reached."""
    sd = _Float32(model)
    yield "token_embd.weight", sd["model.embed_tokens.weight"]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        yield f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"]
        yield f"blk.{i}.attn_q.weight", permute_qk(sd[p + "self_attn.q_proj.weight"], a.heads)
        yield f"blk.{i}.attn_k.weight", permute_qk(sd[p + "self_attn.k_proj.weight"], a.kv_heads)
        yield f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"]
        yield f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"]
        yield f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"]
        yield f"blk.{i}.ffn_gate.weight", sd[p + "mlp.gate_proj.weight"]
        yield f"blk.{i}.ffn_up.weight", sd[p + "mlp.up_proj.weight"]
        yield f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"]
    yield "output_norm.weight", sd["model.norm.weight"]
    if not model.config.tie_word_embeddings:
        yield "output.weight", sd["lm_head.weight"]


def _add_tensor(writer, name: str, arr: np.ndarray, qtype: str, embed_qtype: Optional[str]) -> None:
    import gguf

    arr = np.ascontiguousarray(arr, dtype=np.float32)
    quant = qtype if qtype == "q8_0" else None
    if name == "token_embd.weight" and embed_qtype and arr.shape[-1] % 32 == 0:
        quant = embed_qtype
    if arr.ndim == 1 or (quant is None and qtype == "f32"):
        writer.add_tensor(name, arr)
    elif quant and arr.shape[-1] % 32 == 0:
        t = getattr(gguf.GGMLQuantizationType, quant.upper())
        q = gguf.quants.quantize(arr, t)
        writer.add_tensor(name, q, raw_shape=q.shape, raw_dtype=t)
    else:  # f16, or a quantized type whose 32-blocks do not fit the rows
        writer.add_tensor(name, arr.astype(np.float16))


def _copy_tokenizer(writer, reference: str) -> None:
    import gguf

    r = gguf.GGUFReader(reference)
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, f.contents(), vtype, sub_type=sub)


def _write_tokenizer(writer, tokenizer, n_rows: int, reader: str) -> None:
    """gpt2-style (byte-level BPE) metadata from a transformers fast tokenizer; embedding rows
    beyond its ids become unused placeholder tokens."""
    import json

    import gguf

    by_id = {i: t for t, i in tokenizer.get_vocab().items()}
    if len(by_id) > n_rows:
        raise HarnessError(f"the tokenizer has {len(by_id)} ids but the embedding only {n_rows} rows")
    special = set(tokenizer.all_special_tokens)
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(n_rows)]
    types = [gguf.TokenType.UNUSED if i not in by_id else gguf.TokenType.CONTROL if by_id[i] in special
             else gguf.TokenType.NORMAL for i in range(n_rows)]
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    if model.get("type") != "BPE":
        raise HarnessError(f"GGUF export handles byte-level BPE tokenizers only, got {model.get('type')!r}")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([int(t) for t in types])
    if merges or reader == "llama.cpp":
        writer.add_token_merges(merges or [NEVER_MERGE])
    else:
        writer.add_token_scores([0.0] * len(tokens))
    if tokenizer.bos_token_id is not None:
        writer.add_bos_token_id(tokenizer.bos_token_id)
    if tokenizer.eos_token_id is not None:
        writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)


def write_gguf(model, out, qtype: str = "q8_0", embed_qtype: Optional[str] = None, name: str = "draft",
               reference_gguf: Optional[str] = None, tokenizer=None, reader: str = "llama.cpp") -> Path:
    """Write `model` (LlamaForCausalLM) to `out` atomically; -> the path. Tokenizer metadata comes
    from `reference_gguf` (copied) or else from `tokenizer` (see the module docstring for `reader`)."""
    import gguf

    if qtype not in QTYPES:
        raise HarnessError(f"GGUF export type must be one of {', '.join(QTYPES)}, got {qtype!r}")
    if embed_qtype is not None and embed_qtype not in EMBED_QTYPES:
        raise HarnessError(f"embedding type must be one of {', '.join(EMBED_QTYPES)}, got {embed_qtype!r}")
    if reader not in READERS:
        raise ValueError(f"reader must be one of {READERS}, got {reader!r}")
    _check(model)
    a = shape_from_config(model.config)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(name)
    w.add_context_length(a.context or 2048)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.intermediate)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(a.head_dim)
    w.add_value_length(a.head_dim)
    w.add_rope_dimension_count(a.head_dim)
    w.add_rope_freq_base(a.rope_theta)
    w.add_layer_norm_rms_eps(a.norm_eps)
    w.add_vocab_size(a.vocab)
    w.add_file_type({"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "f16": gguf.LlamaFileType.MOSTLY_F16,
                     "f32": gguf.LlamaFileType.ALL_F32}[qtype])
    if reference_gguf:
        _copy_tokenizer(w, str(reference_gguf))
    else:
        _write_tokenizer(w, tokenizer, a.vocab, reader)
    for tname, arr in _tensors(model, a):
        _add_tensor(w, tname, arr, qtype, embed_qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)
    return out


def with_tokenizer_of(path, reference: str) -> Path:
    """Rewrite GGUF `path` in place with the tokenizer metadata of `reference` (copied verbatim);
    every other key and every tensor as they were: a converted EAGLE-3 head then carries exactly
    its llama.cpp target's vocabulary, which llama.cpp compares token by token."""
    import gguf

    path = Path(path)
    r = gguf.GGUFReader(str(path))
    arch = r.fields["general.architecture"].contents()
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    w = gguf.GGUFWriter(str(tmp), arch)
    for key, f in r.fields.items():
        if key.startswith(("tokenizer.", "GGUF.")) or key == "general.architecture":
            continue
        vtype = f.types[0]
        w.add_key_value(key, f.contents(), vtype, sub_type=f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None)
    _copy_tokenizer(w, reference)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_shape=list(reversed([int(x) for x in t.shape])), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(path)
    return path


def ensure_tiny_gguf(name: str = "tiny", qtype: str = "f32") -> tuple[Path, Path]:
    """Export (once) a tiny pair to GGUF for llama.cpp, next to its HF folders -> (target.gguf, draft.gguf)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spec_harness.models.tiny import ensure_pair

    paths = []
    for folder in ensure_pair(name):
        out = folder.parent / f"{folder.name}.{qtype}.v{EXPORT_VERSION}.gguf"
        if not out.is_file():
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
            write_gguf(model, out, qtype, name=folder.name, tokenizer=AutoTokenizer.from_pretrained(folder))
        paths.append(out)
    return paths[0], paths[1]


def roundtrip_error(model, path, ids: list[int]) -> float:
    """Max |logit difference| between `model` and the GGUF reloaded by transformers, on `ids`."""
    import torch

    from spec_harness.models.loading import load_hf_model

    back = load_hf_model(str(path), "draft", torch.float32, "cpu")
    x = torch.tensor([ids])
    with torch.no_grad():
        return float((model(input_ids=x).logits - back(input_ids=x).logits).abs().max())
