"""Synthetic pairs: random weights in the exact shapes of real models, for `harness calibrate`.

`--pair synthetic:TARGET,DRAFT` names two shapes, each a config shipped under models/configs (the
presets' models and a few larger ones: `qwen2.5-3b`, `llama-3.1-8b`, ...; `harness calibrate
--help` lists them) or a local config.json / model folder. Under forced acceptance every model pass,
rollback and cache operation costs what it costs in the real model, whatever the weights, so c, v, o
and the whole speedup-vs-alpha curve can be measured for models that cannot be fetched here.

What it builds, once per pair (cached under $HARNESS_CACHE/synthetic): each side as a
Llama-architecture model of that shape (hidden, layers, heads, KV heads, head size, MLP width,
vocabulary, tied or separate output head, RoPE base), normal(0, 0.02) weights (norms 1) from a fixed
seed, saved as a float16 Hugging Face folder (the torch runtimes load it in their dtype) and as a
q8_0 GGUF for the llama.cpp runtimes (models/gguf_writer.py). Both sides share a byte-level
tokenizer (models/tiny.py's 257 ids) whose vocabulary is padded with unused ids to each model's
vocabulary size, so the output head costs what the real one does.

What it does not reproduce: the real tokenizer, biases (Qwen2's q/k/v bias), QK norms and RoPE
scaling: a few thousand additions or none per token beside millions of multiply-adds (the FLOPs
count, models/shape.py, leaves them out for the real models too). The output is noise: a synthetic
pair measures cost only, so only `harness calibrate` accepts one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from spec_harness.core.config import PairSpec
from spec_harness.core.errors import HarnessError

PREFIX = "synthetic:"
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
BUILD_VERSION = 1  # bump when the recipe changes, so cached pairs are rebuilt
GGUF_TYPE = "q8_0"
INIT_STD = 0.02
SEED = 0


def is_synthetic(pair: str | None) -> bool:
    return bool(pair) and pair.startswith(PREFIX)


def shipped() -> list[str]:
    """The shape names shipped under models/configs."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def shape_config(ref: str, role: str) -> dict:
    """A shipped shape name, a config.json or a model folder -> the config as a dict."""
    p = Path(ref).expanduser()
    path = CONFIG_DIR / f"{ref}.json" if (CONFIG_DIR / f"{ref}.json").is_file() else p / "config.json" if p.is_dir() else p
    if not path.is_file():
        raise HarnessError(f"synthetic {role} {ref!r}: not a shipped shape ({', '.join(shipped())}) "
                           "nor a config.json or model folder")
    try:
        cfg = json.loads(path.read_text())
    except ValueError as e:
        raise HarnessError(f"synthetic {role} {path}: not a JSON config ({e})") from None
    if not isinstance(cfg, dict) or "model_type" not in cfg:
        raise HarnessError(f"synthetic {role} {path}: a Hugging Face config.json needs a model_type")
    return cfg


def llama_config(cfg: dict, role: str):
    """The LlamaConfig with the shape of `cfg` (any dense gated-MLP decoder: Llama, Qwen2, SmolLM, ...)."""
    from transformers import AutoConfig, LlamaConfig

    from spec_harness.models.shape import shape_from_config

    fields = {k: v for k, v in cfg.items() if k != "model_type"}
    try:
        a = shape_from_config(AutoConfig.for_model(cfg["model_type"], **fields))
    except (ValueError, KeyError, TypeError) as e:
        raise HarnessError(f"synthetic {role}: cannot read the config ({type(e).__name__}: {e})") from None
    if not a.gated_mlp or a.embed_proj:
        raise HarnessError(f"synthetic {role}: {a.model_type} is not a gated-MLP decoder like Llama; "
                           "synthetic pairs are built in the Llama architecture")
    return LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                       num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                       head_dim=a.head_dim, max_position_embeddings=a.context or 4096,
                       tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)), rms_norm_eps=a.norm_eps,
                       rope_theta=a.rope_theta, bos_token_id=256, eos_token_id=256)


def build_model(config, seed: int):
    """A LlamaForCausalLM of `config` in float16, weights normal(0, INIT_STD), norms 1. Built on the
    meta device first, so the only memory it takes is its float16 weights; the rotary embedding's
    frequencies (buffers, not parameters) are computed again on the CPU."""
    import torch
    from transformers import LlamaForCausalLM

    prior = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)
    try:
        with torch.device("meta"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(prior)
    model = model.to_empty(device="cpu")
    model.model.rotary_emb = type(model.model.rotary_emb)(config=model.config)  # its buffers, which to_empty left unset
    model.tie_weights()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied head is one parameter, filled once
            p.fill_(1.0) if "norm" in name else p.normal_(0.0, INIT_STD, generator=g)
    return model.eval()


def _key(cfgs: tuple[dict, dict]) -> str:
    blob = json.dumps({"configs": cfgs, "v": BUILD_VERSION, "gguf": GGUF_TYPE, "seed": SEED}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def _label(ref: str) -> str:
    return ref if (CONFIG_DIR / f"{ref}.json").is_file() else Path(ref).expanduser().resolve().name


def synthetic_pair(spec: str, log=None) -> PairSpec:
    """'synthetic:TARGET,DRAFT' -> the PairSpec of the built pair (building it once)."""
    from spec_harness.models.loading import cache_root
    from spec_harness.models.tiny import build_tokenizer

    log = log or (lambda s: print(s, file=sys.stderr))
    refs = [r.strip() for r in spec[len(PREFIX):].split(",")]
    if len(refs) != 2 or not all(refs):
        raise HarnessError(f"--pair {spec}: give two shapes, synthetic:TARGET,DRAFT (shipped: {', '.join(shipped())})")
    cfgs = (shape_config(refs[0], "target"), shape_config(refs[1], "draft"))
    configs = (llama_config(cfgs[0], "target"), llama_config(cfgs[1], "draft"))
    name = f"{PREFIX}{_label(refs[0])},{_label(refs[1])}"
    root = cache_root() / "synthetic" / f"{_label(refs[0])}-{_label(refs[1])}-{_key(cfgs)}"
    paths = {role: (root / role, root / f"{role}.{GGUF_TYPE}.gguf") for role in ("target", "draft")}
    if not all((folder / "config.json").is_file() and gguf.is_file() for folder, gguf in paths.values()):
        _build(root, dict(zip(("target", "draft"), configs)), build_tokenizer(257), log)
    (t, tg), (d, dg) = paths["target"], paths["draft"]
    return PairSpec(name, str(t), str(d), str(tg), str(dg), synthetic=True)


def _build(root: Path, configs: dict, tokenizer, log) -> None:
    """Both sides, written under a temporary name and renamed into place when complete."""
    from spec_harness.models.gguf_writer import write_gguf

    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for i, (role, config) in enumerate(configs.items()):
            n = _parameters(config)
            log(f"building the synthetic {role} ({n / 1e9:.2f}B parameters, random weights): "
                f"float16 folder and {GGUF_TYPE} GGUF under {root.parent} (once)")
            model = build_model(config, SEED + i)
            model.save_pretrained(tmp / role)
            tokenizer.save_pretrained(tmp / role)
            write_gguf(model, tmp / f"{role}.{GGUF_TYPE}.gguf", GGUF_TYPE, name=f"synthetic {role}", tokenizer=tokenizer)
            del model
        if not (root / "draft" / "config.json").is_file():  # else another process built it meanwhile
            shutil.rmtree(root, ignore_errors=True)
            tmp.rename(root)
    except OSError as e:
        raise HarnessError(f"cannot write the synthetic pair under {root.parent}: {e} (free disk space, or set HARNESS_CACHE)") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _parameters(config) -> int:
    h, v, L = config.hidden_size, config.vocab_size, config.num_hidden_layers
    hd = config.head_dim
    per_layer = 2 * h * config.num_attention_heads * hd + 2 * h * config.num_key_value_heads * hd + 3 * h * config.intermediate_size
    return L * per_layer + v * h * (1 if config.tie_word_embeddings else 2)
