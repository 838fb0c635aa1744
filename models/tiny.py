"""Tiny deterministic draft/target pairs, built in-process in about a second, no network.

Both models are Llama-architecture causal LMs over one byte-level tokenizer (256 byte tokens plus
<|endoftext|>). The target has `target_layers` layers; the draft is the target's first
`draft_layers` layers with the same embedding, final norm and output head (an early exit), so the
two agree often but not always. The output head is scaled so logits are peaked (std around
`logit_scale`): greedy argmaxes are far from ties, so float32 runtimes agree token for token.

Pairs are saved with save_pretrained under the cache folder and reused. `micro` is a vocabulary
of 8 ids with flatter logits, for statistical tests of speculative sampling (ids only, no text).
What it does not do: export GGUF (models/gguf_writer.py) or train anything.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

EOS = "<|endoftext|>"
BUILD_VERSION = 1  # bump when the recipe changes, so cached pairs are rebuilt


@dataclass(frozen=True)
class TinySpec:
    name: str
    vocab_size: int = 257  # 256 bytes + <|endoftext|>
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    target_layers: int = 4
    draft_layers: int = 1
    draft_extra_rows: int = 0  # pad the draft's embedding (as Qwen2.5 0.5B vs 7B)
    target_extra_rows: int = 0
    logit_scale: float = 8.0
    layer_scale: float = 1.0  # scale of the target's later layers: higher = more disagreement
    max_positions: int = 1024
    seed: int = 0


SPECS = {
    "tiny": TinySpec("tiny"),
    "tiny-padded": TinySpec("tiny-padded", draft_extra_rows=7, target_extra_rows=15),
    "tiny-hd32": TinySpec("tiny-hd32", hidden=128, layer_scale=0.4),  # head size 32 (vLLM's CPU attention takes 32 and up)
    "micro": TinySpec("micro", vocab_size=8, hidden=32, target_layers=2, logit_scale=1.5, layer_scale=3.0, max_positions=64),
    # micro with four layers: three distinct layer inputs for an EAGLE-3 head (tests/test_eagle3.py)
    "micro-deep": TinySpec("micro-deep", vocab_size=8, hidden=32, target_layers=4, logit_scale=1.5, layer_scale=3.0,
                           max_positions=64),
}


def _key(spec: TinySpec) -> str:
    blob = json.dumps({**asdict(spec), "v": BUILD_VERSION}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (byte-level BPE vocabularies use it)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def build_tokenizer(vocab_size: int):
    """A byte-level BPE tokenizer with no merges: every byte is a token, then <|endoftext|>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if vocab_size == 257:
        byte_chars = [bytes_to_unicode()[b] for b in range(256)]
        vocab = {c: i for i, c in enumerate(byte_chars)}
    else:  # micro: ids only; give them printable names
        vocab = {chr(ord("a") + i): i for i in range(vocab_size - 1)}
    vocab[EOS] = vocab_size - 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=None)


def build_models(spec: TinySpec):
    """-> (target, draft) LlamaForCausalLM in float32, deterministic for a spec."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    def config(layers: int, rows: int) -> LlamaConfig:
        return LlamaConfig(
            vocab_size=spec.vocab_size + rows,
            hidden_size=spec.hidden,
            intermediate_size=2 * spec.hidden,
            num_hidden_layers=layers,
            num_attention_heads=spec.heads,
            num_key_value_heads=spec.kv_heads,
            max_position_embeddings=spec.max_positions,
            tie_word_embeddings=False,
            bos_token_id=spec.vocab_size - 1,
            eos_token_id=spec.vocab_size - 1,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
        )

    g = torch.Generator().manual_seed(spec.seed)
    target = LlamaForCausalLM(config(spec.target_layers, spec.target_extra_rows)).float().eval()
    with torch.no_grad():
        for name, p in target.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        # embeddings larger than layer outputs: the bigram path dominates, layers perturb it
        target.model.embed_tokens.weight.mul_(50.0)
        target.lm_head.weight.mul_(spec.logit_scale / (0.02 * spec.hidden**0.5))
        for layer in target.model.layers[spec.draft_layers :]:
            layer.self_attn.o_proj.weight.mul_(spec.layer_scale * 25)
            layer.mlp.down_proj.weight.mul_(spec.layer_scale * 25)
        n = spec.vocab_size  # padded rows never win: very negative logits there
        if spec.target_extra_rows:
            target.lm_head.weight[n:].zero_()
            target.model.embed_tokens.weight[n:].zero_()

    draft = LlamaForCausalLM(config(spec.draft_layers, spec.draft_extra_rows)).float().eval()
    with torch.no_grad():
        sd = target.state_dict()
        for name, p in draft.named_parameters():
            src = sd[name]
            if p.shape[0] != src.shape[0] and p.dim() >= 1 and name.endswith(("embed_tokens.weight", "lm_head.weight")):
                p.zero_()
                p[:n].copy_(src[:n])
            else:
                p.copy_(src)
    return target, draft


def ensure_pair(name: str = "tiny") -> tuple[Path, Path]:
    """Build (once) and return (target_dir, draft_dir) of a tiny pair."""
    if name not in SPECS:
        raise KeyError(name)
    spec = SPECS[name]
    from spec_harness.models.loading import cache_root

    root = cache_root() / "tiny" / f"{name}-{_key(spec)}"
    t_dir, d_dir = root / "target", root / "draft"
    if (t_dir / "config.json").exists() and (d_dir / "config.json").exists():
        return t_dir, d_dir
    target, draft = build_models(spec)
    tok = build_tokenizer(spec.vocab_size)
    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    for model, sub in ((target, "target"), (draft, "draft")):
        model.save_pretrained(tmp / sub)
        tok.save_pretrained(tmp / sub)
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(root)
    except OSError:  # built concurrently by another process: theirs is as good as ours
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return t_dir, d_dir
