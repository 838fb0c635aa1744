"""An EAGLE-3 draft head (Li et al. 2025) for a Llama-architecture target: its configuration, its
arithmetic (shared by training and drafting), and its folder in the `speculators` format vLLM
reads (`speculators_model_type: "eagle3"`), which llama.cpp's convert_hf_to_gguf.py also converts.

The head reads the target's own hidden states: f_i, the residual stream entering three of the
target's layers (`layer_ids`, by default 2, n/2 and n-3, vLLM's and llama.cpp's default) at
position i, concatenated [3 Ht]. At head position i it takes the pair (x_{i+1}, f_i):

    g   = fc(f_i)                                          # [H]    (target features only)
    x   = [rmsnorm(embed(x_{i+1})) * w_in, rmsnorm(g) * w_hidden]    # [2H]
    att = attention(q, k, v of x, RoPE at position i)      # over the head's own cache
    r   = att W_o + residual       (residual: g, or rmsnorm(g) * w_hidden if norm_before_residual)
    h   = r + mlp(rmsnorm(r) * w_post)                     # "prenorm": fed back at the next step
    logits = lm_head(rmsnorm(h) * w_norm)                  # [Vd] over the draft vocabulary
    token  = draft id + d2t[draft id]                      # the target's id

so its output predicts x_{i+2}. Drafting further, the head's own h replaces g (no fc) at
position i+1, and so on: at head position i+j the j-th draft step attends to the positions 0..i
(computed from the target's features) and to its own earlier steps i+1..i+j. The embedding is
the target's (not stored in the head); the draft vocabulary is a subset of the target's
(`d2t`, and its inverse `t2d`).

What it does not do: train (models/eagle3_train.py), run inside a runtime's loop
(runtimes/eagle3.py), or convert to GGUF (models/eagle3_train.py runs llama.cpp's converter).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from spec_harness.core.errors import HarnessError

FORMAT = "eagle3"  # speculators_model_type
WEIGHTS = "model.safetensors"
N_FEATURES = 3  # target layers the head reads (llama.cpp takes exactly three)


def default_layer_ids(n_layers: int) -> tuple[int, ...]:
    """vLLM's and llama.cpp's default, the inputs of layers 2, n/2 and n-3; for targets too shallow
    for three distinct ones of those, layers n/4, n/2 and 3n/4 (at least 1, 2, 3)."""
    ids = sorted({2, n_layers // 2, n_layers - 3})
    if len(ids) < N_FEATURES or ids[0] < 0:
        ids = sorted({max(1, n_layers // 4), max(2, n_layers // 2), max(3, 3 * n_layers // 4)})
    return tuple(ids)


@dataclass(frozen=True)
class HeadConfig:
    hidden: int  # H, the target's width (the head uses the target's embedding)
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int  # the target's
    draft_vocab: int  # Vd
    target_hidden: int  # Ht
    layer_ids: tuple[int, ...]
    eps: float = 1e-5
    rope: dict = field(default_factory=lambda: {"rope_type": "default", "rope_theta": 10000.0})
    max_position: int = 8192
    norm_before_residual: bool = False
    verifier: str = ""  # the target it was trained for (a name, for people)
    speculative_tokens: int = 4  # the proposal length written in the config (the runtimes pass their own gamma)

    def __post_init__(self):
        if len(self.layer_ids) != N_FEATURES or list(self.layer_ids) != sorted(set(self.layer_ids)):
            raise HarnessError(f"an EAGLE-3 head reads {N_FEATURES} distinct target layers in ascending order, "
                               f"got {list(self.layer_ids)}")
        if self.heads % self.kv_heads:
            raise HarnessError(f"head: {self.heads} attention heads do not split into {self.kv_heads} kv heads")

    @classmethod
    def for_target(cls, tcfg, draft_vocab: int, layer_ids: Optional[tuple[int, ...]] = None, verifier: str = "",
                   intermediate: int = 0) -> "HeadConfig":
        """A head in the target's shape (one decoder layer of its width, heads and MLP)."""
        from spec_harness.models.shape import shape_from_config

        t = shape_from_config(tcfg)
        rope = dict(getattr(tcfg, "rope_parameters", None) or {"rope_type": "default", "rope_theta": t.rope_theta})
        return cls(hidden=t.hidden, heads=t.heads, kv_heads=t.kv_heads, head_dim=t.head_dim,
                   intermediate=intermediate or tcfg.intermediate_size, vocab=tcfg.vocab_size, draft_vocab=draft_vocab,
                   target_hidden=t.hidden, layer_ids=tuple(layer_ids or default_layer_ids(t.layers)), eps=t.norm_eps,
                   rope=rope, max_position=t.context, verifier=verifier)

    # -- the speculators format ---------------------------------------------------------------------

    def to_json(self) -> dict:
        layer = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": self.hidden,
                 "intermediate_size": self.intermediate, "num_hidden_layers": 1, "num_attention_heads": self.heads,
                 "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim, "vocab_size": self.vocab,
                 "rms_norm_eps": self.eps, "max_position_embeddings": self.max_position, "hidden_act": "silu",
                 "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
                 "rope_theta": self.rope.get("rope_theta"), "rope_parameters": self.rope}
        return {
            "architectures": ["Eagle3Speculator"], "speculators_model_type": FORMAT, "speculators_version": "0.1.0",
            "transformer_layer_config": layer, "draft_vocab_size": self.draft_vocab,
            "target_hidden_size": self.target_hidden, "eagle_aux_hidden_state_layer_ids": list(self.layer_ids),
            "norm_before_residual": self.norm_before_residual, "norm_before_fc": False, "fc_norm": False,
            "norm_output": False,
            "speculators_config": {"algorithm": FORMAT, "default_proposal_method": "greedy",
                                   "proposal_methods": [{"proposal_type": "greedy",
                                                         "speculative_tokens": self.speculative_tokens}],
                                   "verifier": {"name_or_path": self.verifier, "architectures": ["LlamaForCausalLM"]}},
        }

    @classmethod
    def from_json(cls, d: dict, where: str = "config.json") -> "HeadConfig":
        """The speculators format, or the flat `LlamaForCausalLMEagle3` one (public EAGLE-3 heads)."""
        layer = d.get("transformer_layer_config") or d
        try:
            unsupported = [k for k in ("norm_before_fc", "fc_norm", "norm_output") if d.get(k)]
            if unsupported:
                raise HarnessError(f"{where}: this EAGLE-3 variant ({', '.join(unsupported)}) is not supported")
            if int(layer.get("num_hidden_layers", 1)) != 1:
                raise HarnessError(f"{where}: an EAGLE-3 head has one decoder layer, this one has "
                                   f"{layer['num_hidden_layers']}")
            heads = int(layer["num_attention_heads"])
            hidden = int(layer["hidden_size"])
            ids = d.get("eagle_aux_hidden_state_layer_ids") or (d.get("eagle_config") or {}).get(
                "eagle_aux_hidden_state_layer_ids")
            if not ids:
                raise HarnessError(f"{where}: no eagle_aux_hidden_state_layer_ids (the target layers the head reads)")
            rope = dict(layer.get("rope_parameters") or layer.get("rope_scaling") or {})
            rope.setdefault("rope_type", rope.pop("type", "default"))
            rope.setdefault("rope_theta", float(layer.get("rope_theta") or 10000.0))
            nbr = d.get("norm_before_residual", d.get("speculators_model_type") == FORMAT)  # each format's default
            spec = (d.get("speculators_config") or {})
            proposals = spec.get("proposal_methods") or [{}]
            return cls(hidden=hidden, heads=heads, kv_heads=int(layer.get("num_key_value_heads") or heads),
                       head_dim=int(layer.get("head_dim") or hidden // heads), intermediate=int(layer["intermediate_size"]),
                       vocab=int(layer["vocab_size"]), draft_vocab=int(d.get("draft_vocab_size") or layer["vocab_size"]),
                       target_hidden=int(d.get("target_hidden_size") or hidden), layer_ids=tuple(sorted(int(i) for i in ids)),
                       eps=float(layer.get("rms_norm_eps", 1e-5)), rope=rope,
                       max_position=int(layer.get("max_position_embeddings") or 8192), norm_before_residual=bool(nbr),
                       verifier=str((spec.get("verifier") or {}).get("name_or_path", "")),
                       speculative_tokens=int(proposals[0].get("speculative_tokens", 4)))
        except (KeyError, TypeError, ValueError) as e:
            raise HarnessError(f"{where} is not an EAGLE-3 head's configuration ({type(e).__name__}: {e})") from None

    # -- sizes, for theory and reports ------------------------------------------------------------

    def matmul_params(self) -> int:
        """Weights of every matrix a head position multiplies by (fc, the layer, the draft head)."""
        H, I = self.hidden, self.intermediate
        return (N_FEATURES * self.target_hidden * H + 2 * H * (self.heads + 2 * self.kv_heads) * self.head_dim
                + self.heads * self.head_dim * H + 3 * H * I + self.draft_vocab * H)


def target_dims(tcfg_or_ref) -> tuple[int, int, int]:
    """(hidden, vocabulary, layers) of a target: a transformers config, a model folder or id, or a
    .gguf file (its header alone)."""
    from spec_harness.models.shape import gguf_arch_value, load_config, open_gguf, shape_from_config

    if isinstance(tcfg_or_ref, (str, Path)):
        if str(tcfg_or_ref).endswith(".gguf"):
            r = open_gguf(tcfg_or_ref)
            tokens = r.fields.get("tokenizer.ggml.tokens") or []
            return int(gguf_arch_value(r, "embedding_length")), int(gguf_arch_value(r, "vocab_size") or len(tokens)), \
                int(gguf_arch_value(r, "block_count"))
        tcfg_or_ref = load_config(str(tcfg_or_ref), "target")
    t = shape_from_config(tcfg_or_ref)
    return t.hidden, int(tcfg_or_ref.vocab_size), t.layers


def check_fits(cfg: HeadConfig, target, where: str) -> None:
    """HarnessError naming the first mismatch between a head and the target it is to draft for
    (`target`: anything target_dims takes)."""
    hidden, vocab, layers = target_dims(target)
    if cfg.target_hidden != hidden or cfg.hidden != hidden:
        raise HarnessError(f"EAGLE-3 head {where} reads hidden states {cfg.target_hidden} wide (its own {cfg.hidden}); "
                           f"the target's are {hidden}: it was trained for another model")
    if cfg.vocab != vocab:
        raise HarnessError(f"EAGLE-3 head {where} has a {cfg.vocab}-token vocabulary; the target {vocab}: "
                           "it was trained for another model")
    if max(cfg.layer_ids) >= layers:
        raise HarnessError(f"EAGLE-3 head {where} reads target layers {list(cfg.layer_ids)}; the target has {layers}")


class Eagle3Head(nn.Module):
    """The head's weights and arithmetic (the module docstring). `embed` is the target's [V, H]."""

    def __init__(self, cfg: HeadConfig, embed: torch.Tensor):
        super().__init__()
        self.cfg = cfg
        H, nh, nkv, hd, I = cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate
        self.fc = nn.Linear(N_FEATURES * cfg.target_hidden, H, bias=False)
        self.input_layernorm = nn.Parameter(torch.ones(H))
        self.hidden_norm = nn.Parameter(torch.ones(H))
        self.q_proj = nn.Linear(2 * H, nh * hd, bias=False)
        self.k_proj = nn.Linear(2 * H, nkv * hd, bias=False)
        self.v_proj = nn.Linear(2 * H, nkv * hd, bias=False)
        self.o_proj = nn.Linear(nh * hd, H, bias=False)
        self.post_attention_layernorm = nn.Parameter(torch.ones(H))
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)
        self.norm = nn.Parameter(torch.ones(H))
        self.lm_head = nn.Linear(H, cfg.draft_vocab, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab, dtype=torch.long))  # target id - draft id
        self.register_buffer("embed", embed.detach(), persistent=False)  # [V, H], the target's
        self.register_buffer("inv_freq", _inv_freq(cfg), persistent=False)  # [hd / 2]

    # -- pieces ------------------------------------------------------------------------------------

    def _rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x.float()
        return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.cfg.eps)).to(x.dtype)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [...] -> cos, sin [..., hd] (the rotate-half convention of Llama)."""
        ang = positions.float()[..., None] * self.inv_freq  # [..., hd/2]
        ang = torch.cat([ang, ang], -1)
        return ang.cos(), ang.sin()

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    def combine(self, feats: torch.Tensor) -> torch.Tensor:
        """The target's features [..., 3 Ht] -> g [..., H]."""
        return self.fc(feats)

    def project(self, tokens: torch.Tensor, g: torch.Tensor, positions: torch.Tensor):
        """tokens [..., T] (target ids), g [..., T, H] (fc of features, or fed-back h), positions [..., T]
        -> q [..., T, nh, hd], k, v [..., T, nkv, hd] (q, k rotated) and the residual [..., T, H]."""
        c = self.cfg
        e = self.embed[tokens]
        gn = self._rms(g, self.hidden_norm)
        x = torch.cat([self._rms(e, self.input_layernorm), gn], -1)  # [..., T, 2H]
        cos, sin = self.rope(positions)
        cos, sin = cos[..., None, :], sin[..., None, :]  # [..., T, 1, hd]
        q = self._rotate(self.q_proj(x).unflatten(-1, (c.heads, c.head_dim)), cos, sin)
        k = self._rotate(self.k_proj(x).unflatten(-1, (c.kv_heads, c.head_dim)), cos, sin)
        v = self.v_proj(x).unflatten(-1, (c.kv_heads, c.head_dim))
        return q, k, v, (gn if c.norm_before_residual else g)

    def finish(self, att: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """att [..., T, nh hd] (attention output before o_proj) -> h, the pre-norm output [..., T, H]."""
        r = self.o_proj(att) + residual
        u = self._rms(r, self.post_attention_layernorm)
        return r + self.down_proj(F.silu(self.gate_proj(u)) * self.up_proj(u))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """h [..., H] -> [..., Vd] over the draft vocabulary."""
        return self.lm_head(self._rms(h, self.norm))

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    def target_logits(self, draft_logits: torch.Tensor) -> torch.Tensor:
        """[..., Vd] -> [..., V]: -inf where the target's token has no draft id (q is 0 there)."""
        out = draft_logits.new_full((*draft_logits.shape[:-1], self.cfg.vocab), float("-inf"))
        out[..., self.to_target(torch.arange(self.cfg.draft_vocab, device=draft_logits.device))] = draft_logits
        return out

    # -- folders -----------------------------------------------------------------------------------

    def state(self) -> dict[str, torch.Tensor]:
        """Tensors under the speculators format's names (`layers.0.*`)."""
        p = "layers.0."
        named = {"fc.weight": self.fc.weight, p + "input_layernorm.weight": self.input_layernorm,
                 p + "hidden_norm.weight": self.hidden_norm, p + "self_attn.q_proj.weight": self.q_proj.weight,
                 p + "self_attn.k_proj.weight": self.k_proj.weight, p + "self_attn.v_proj.weight": self.v_proj.weight,
                 p + "self_attn.o_proj.weight": self.o_proj.weight,
                 p + "post_attention_layernorm.weight": self.post_attention_layernorm,
                 p + "mlp.gate_proj.weight": self.gate_proj.weight, p + "mlp.up_proj.weight": self.up_proj.weight,
                 p + "mlp.down_proj.weight": self.down_proj.weight, "norm.weight": self.norm,
                 "lm_head.weight": self.lm_head.weight}
        return {k: v.detach() for k, v in named.items()}

    def save(self, folder: Path, dtype: torch.dtype = torch.float16) -> Path:
        """config.json and model.safetensors (float16 matrices; d2t int64 offsets and t2d bool
        where the draft vocabulary is smaller than the target's)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.to(dtype).contiguous() for k, v in self.state().items()}
        if self.cfg.draft_vocab != self.cfg.vocab:  # vLLM refuses a map where the vocabularies are one
            t2d = torch.zeros(self.cfg.vocab, dtype=torch.bool)
            t2d[self.to_target(torch.arange(self.cfg.draft_vocab))] = True
            tensors |= {"d2t": self.d2t.clone(), "t2d": t2d}
        save_file(tensors, str(folder / WEIGHTS))
        (folder / "config.json").write_text(json.dumps(self.cfg.to_json(), indent=2) + "\n")
        return folder

    def load_state(self, tensors: dict[str, torch.Tensor], where: str) -> None:
        own = self.state()
        renamed = {k.replace("midlayer.", "layers.0.").removeprefix("model."): v for k, v in tensors.items()}
        missing = [k for k in own if k not in renamed]
        if missing:
            raise HarnessError(f"EAGLE-3 head {where} lacks {', '.join(missing[:3])}"
                               + (f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""))
        with torch.no_grad():
            for name, mine in own.items():
                got = renamed[name]
                if tuple(got.shape) != tuple(mine.shape):
                    raise HarnessError(f"EAGLE-3 head {where}: {name} is {list(got.shape)}, its config says {list(mine.shape)}")
                _param(self, name).copy_(got.to(mine.dtype))
            if self.cfg.draft_vocab != self.cfg.vocab:
                if "d2t" not in renamed:
                    raise HarnessError(f"EAGLE-3 head {where} has a {self.cfg.draft_vocab}-token draft vocabulary but no d2t map")
                self.d2t.copy_(renamed["d2t"].long())
            ids = self.to_target(torch.arange(self.cfg.draft_vocab))
            if ids.min() < 0 or ids.max() >= self.cfg.vocab or ids.unique().numel() != ids.numel():
                raise HarnessError(f"EAGLE-3 head {where}: its d2t map does not name distinct target tokens")


def _param(head: Eagle3Head, name: str) -> torch.Tensor:
    """The parameter behind a state() name."""
    short = name.removeprefix("layers.0.").removeprefix("self_attn.").removeprefix("mlp.").removesuffix(".weight")
    obj = getattr(head, short)
    return obj.weight if isinstance(obj, nn.Linear) else obj


def _inv_freq(cfg: HeadConfig) -> torch.Tensor:
    """RoPE's inverse frequencies from the head's rope parameters, through transformers' own
    initialisers (so a scaled RoPE is the target's too)."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kind = cfg.rope.get("rope_type", "default")
    if kind == "default":
        return 1.0 / (cfg.rope["rope_theta"] ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
    lc = LlamaConfig(hidden_size=cfg.hidden, num_attention_heads=cfg.heads, head_dim=cfg.head_dim,
                     max_position_embeddings=cfg.max_position, rope_parameters=cfg.rope)
    inv, _ = ROPE_INIT_FUNCTIONS[kind](lc, "cpu")
    return inv.float()


def is_head_folder(path) -> bool:
    p = Path(path)
    if not (p / "config.json").is_file():
        return False
    try:
        d = json.loads((p / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return d.get("speculators_model_type") == FORMAT or any("Eagle3" in a for a in d.get("architectures") or [])


def check_drafter(drafter, pair) -> None:
    """`--drafter eagle3[:PATH]` set against a pair before any work (core/drafters/eagle3.py's
    check): the head's folder read and checked against the pair's target (HarnessError naming the
    mismatch); a pair without a head of its own is left to the runtimes (a skipped row)."""
    folder = drafter.folder(pair.eagle3)
    if folder:
        check_fits(read_config(folder), pair.target_gguf or pair.target, folder)


def read_config(folder) -> HeadConfig:
    p = Path(folder).expanduser()
    if not (p / "config.json").is_file():
        raise HarnessError(f"EAGLE-3 head {p}: no config.json there; point --drafter eagle3:PATH at a head's folder")
    try:
        d = json.loads((p / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise HarnessError(f"EAGLE-3 head {p}: config.json unreadable ({e})") from None
    return HeadConfig.from_json(d, str(p / "config.json"))


def load_head(folder, embed: torch.Tensor, tcfg=None, dtype: torch.dtype = torch.float32) -> Eagle3Head:
    """A head folder (speculators format, or a public LlamaForCausalLMEagle3 one) -> Eagle3Head in
    `dtype`, checked against the target's config `tcfg` when given."""
    from safetensors.torch import load_file

    p = Path(folder).expanduser()
    cfg = read_config(p)
    if tcfg is not None:
        check_fits(cfg, tcfg, str(p))
    files = sorted(p.glob("*.safetensors"))
    if not files:
        raise HarnessError(f"EAGLE-3 head {p}: no .safetensors weights there")
    tensors: dict = {}
    for f in files:
        tensors |= load_file(str(f))
    head = Eagle3Head(cfg, embed.to(dtype))
    head.load_state(tensors, str(p))
    return head.to(device=embed.device, dtype=dtype).eval()


# ---------------------------------------------------------------- GGUF (llama.cpp)

CONVERTER = "vendor/llama.cpp/convert_hf_to_gguf.py"  # in the llama-cpp-python source scripts/setup.sh unpacks
CONVERTER_ENV = "HARNESS_CONVERT_HF_TO_GGUF"


def converter() -> Optional[Path]:
    """llama.cpp's convert_hf_to_gguf.py: $HARNESS_CONVERT_HF_TO_GGUF if set, else the one in the
    llama-cpp-python source the environment's llama_cpp was built from (scripts/setup.sh builds it
    from build/llama_cpp_python-*; pip records where), else in the build/ folder of the checkout
    this module is in. None where there is none."""
    import os

    if os.environ.get(CONVERTER_ENV):
        return Path(os.environ[CONVERTER_ENV]).expanduser()
    places = [p / CONVERTER for p in llama_cpp_source()] + sorted(CHECKOUT.glob(f"build/llama_cpp_python-*/{CONVERTER}"))
    return next((p for p in places if p.is_file()), None)


CHECKOUT = Path(__file__).resolve().parent.parent  # the repository, when the harness runs from one


def llama_cpp_source() -> list[Path]:
    """The folder llama-cpp-python was installed from, as pip recorded it (PEP 610's direct_url.json);
    [] for a package installed from an index."""
    import importlib.metadata
    import json
    from urllib.parse import unquote, urlparse

    try:
        url = json.loads(importlib.metadata.distribution("llama_cpp_python").read_text("direct_url.json") or "{}").get("url", "")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return []
    return [Path(unquote(urlparse(url).path))] if url.startswith("file://") else []


# The converter as it is, except that a BPE pre-tokenizer its hash list does not know (the tiny test
# pairs' byte-level one) is written as "default", as models/gguf_writer.py writes those pairs'
# GGUFs; the harness hands llama.cpp token ids, never text to split.
_CONVERT = """import runpy, sys
script = sys.argv.pop(1)
sys.path.insert(0, script.rsplit('/', 1)[0])
from conversion import base
known = base.TextModel.get_vocab_base_pre
def pre(self, tokenizer):
    try:
        return known(self, tokenizer)
    except NotImplementedError:
        return 'default'
base.TextModel.get_vocab_base_pre = pre
sys.argv[0] = script
runpy.run_path(script, run_name='__main__')
"""


def gguf_of(head_folder, target_folder, cache: Optional[Path] = None, target_gguf: Optional[str] = None) -> Path:
    """The head as llama.cpp's `eagle3` GGUF (its own converter, with the target's folder for the
    tokenizer and layer count), converted once and kept under $HARNESS_CACHE/eagle3-gguf by the
    two folders' files; with `target_gguf`, the tokenizer metadata is that file's (as the target
    llama.cpp runs has it). ValueError with the converter's reason if it refuses the head."""
    import hashlib
    import os
    import subprocess
    import sys

    from spec_harness.models.loading import cache_root

    script = converter()
    if script is None or not script.is_file():
        raise ValueError(f"llama.cpp's converter is not there ({script or f'build/llama_cpp_python-*/{CONVERTER}'}): "
                         f"run scripts/setup.sh, or set {CONVERTER_ENV} to llama.cpp's convert_hf_to_gguf.py")
    head, target = Path(head_folder).expanduser().resolve(), Path(target_folder).expanduser().resolve()
    stamp = [str(script)] + [f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}"
                             for d in (head, target) for f in sorted(d.iterdir()) if f.is_file()]
    stamp += [f"{target_gguf}:{Path(target_gguf).stat().st_size}"] if target_gguf else []
    key = hashlib.sha256("\n".join(stamp).encode()).hexdigest()[:16]
    out = (cache or cache_root() / "eagle3-gguf") / f"{head.name}-{key}.gguf"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    r = subprocess.run([sys.executable, "-c", _CONVERT, str(script), str(head), "--target-model-dir", str(target),
                        "--outfile", str(tmp), "--outtype", "f16"], capture_output=True, text=True)
    if r.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        lines = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if "Error" in ln or "error" in ln), lines[-1] if lines else "no output")
        raise ValueError(f"llama.cpp's converter refused the EAGLE-3 head {head}: {why[:300]}")
    if target_gguf:
        from spec_harness.models.gguf_writer import with_tokenizer_of

        with_tokenizer_of(tmp, str(target_gguf))
    tmp.replace(out)
    return out
