"""Theory: what speculative decoding can gain at best, from models' shapes and acceptance alone.

Two halves:
- cost: FLOPs per generated token from a Hugging Face config (no weights) or from a GGUF file's
  tensor shapes, and the FLOPs cost ratio c_flops = draft / target.
- gain: Leviathan et al. 2023 under their i.i.d. acceptance assumption: expected tokens per round
  (Eq. 1), the expected walltime improvement E[speedup] (Theorem 3.8), the factor of extra
  arithmetic (Theorem 3.11), the breakeven alpha for a gamma, and the best gamma for (alpha, c).
  The same with measured costs the paper leaves out (RoundCosts: a verify pass dearer than one
  step, per-round and baseline overhead), for `harness explain`.

FLOPs convention (the first seed's): 2 x the matmul weights a token passes through. The output
head (lm_head) counts once; the input embedding is a table lookup and counts nothing, so a tied
embedding is counted exactly once. Biases and norms are not matmul weights and are left out.
This gives 6,171,394,048 FLOPs/token for Qwen2.5-3B-Instruct and 987,922,432 for
Qwen2.5-0.5B-Instruct (c = 0.1601). Optionally the attention term at a context length L adds
4 * layers * L * (heads * head_dim): QK^T and AV, one multiply-add (2 FLOPs) per element.

What it does not do: measure anything (the measured c is metrics.c_measured), download weights,
or predict memory bandwidth, the cost of batching the verify pass or per-round overhead: the
ceiling of Theorem 3.8 is algorithmic, not a hardware bound; RoundCosts only carries such costs
in once they are measured.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union
from urllib.parse import urlparse

from harness.errors import HarnessError
from models.loading import _looks_like_path

# Model types whose MLP is up/down only (2 matrices); every other type is taken as gated
# (gate/up/down, 3 matrices), as in Llama, Qwen, Mistral, Gemma, SmolLM and Phi-3.
NON_GATED_MLP = frozenset(
    {"opt", "gpt2", "gpt_neox", "gptj", "gpt_bigcode", "bloom", "falcon", "phi", "codegen", "mpt", "starcoder2"}
)
MAX_GAMMA = 32  # search range of optimal_gamma


# ---------------------------------------------------------------- cost: FLOPs per token


@dataclass(frozen=True)
class Architecture:
    """The shape of a dense decoder-only transformer, as far as its matmuls are concerned."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    gated_mlp: bool = True
    embed_proj: Optional[int] = None  # OPT-350m style project_in/out width (None = hidden)


@dataclass(frozen=True)
class FlopsPerToken:
    """Matmul weights of one model and what it needs for the attention term."""

    source: str  # where the numbers came from, for reports
    matmul_params: int
    layers: int
    attn_width: int  # heads * head_dim (query side)

    def flops(self, context: int = 0) -> int:
        """FLOPs per generated token; with context > 0 the attention term at that length is added."""
        return 2 * self.matmul_params + attention_flops(self.layers, self.attn_width, context)


def attention_flops(layers: int, attn_width: int, context: int) -> int:
    """QK^T and AV for one new token against `context` cached positions, all layers."""
    if context < 0:
        raise HarnessError(f"--context must be >= 0, got {context}")
    return 4 * layers * attn_width * context


def matmul_params(a: Architecture) -> int:
    """Weights of every matmul one token passes through: attention, MLP, output head."""
    q_o = 2 * a.hidden * a.heads * a.head_dim
    k_v = 2 * a.hidden * a.kv_heads * a.head_dim
    mlp = (3 if a.gated_mlp else 2) * a.hidden * a.intermediate
    head_width = a.embed_proj or a.hidden
    proj = 2 * a.hidden * head_width if head_width != a.hidden else 0
    return a.layers * (q_o + k_v + mlp) + a.vocab * head_width + proj


def _first(cfg, *names, default=None):
    for n in names:
        v = getattr(cfg, n, None)
        if v is not None:
            return v
    return default


def architecture_from_config(cfg) -> Architecture:
    """A transformers PretrainedConfig (text part) -> Architecture; HarnessError if unsupported."""
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
    return Architecture(
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=_first(cfg, "num_key_value_heads", "multi_query_group_num", default=heads),
        head_dim=_first(cfg, "head_dim", default=hidden // heads),
        intermediate=_first(cfg, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden),
        vocab=vocab,
        gated_mlp=kind not in NON_GATED_MLP,
        embed_proj=proj if proj and proj != hidden else None,
    )


def flops_from_config(cfg, source: str = "config") -> FlopsPerToken:
    a = architecture_from_config(cfg)
    return FlopsPerToken(source, matmul_params(a), a.layers, a.heads * a.head_dim)


# --- GGUF


GGUF_LOOKUPS = ("token_embd.weight", "position_embd.weight", "token_types.weight")


def _gguf_value(reader, key: str):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def flops_from_gguf(path: Path) -> FlopsPerToken:
    """Matmul weights from the tensor shapes of a GGUF file (quantized or not; no data is read).

    Every tensor of two or more dimensions is a matmul weight except the embedding lookups; the
    token embedding counts only when there is no separate `output.weight` (tied head).
    Expert tensors (`*_exps`) count expert_used_count / expert_count of their weights.
    """
    try:
        from gguf import GGUFReader

        reader = GGUFReader(str(path))
    except ImportError:
        raise HarnessError("reading GGUF files needs the gguf package: pip install gguf") from None
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read GGUF file {path}: {e}") from None
    arch = _gguf_value(reader, "general.architecture") or "?"
    names = {t.name for t in reader.tensors}
    experts = _gguf_value(reader, f"{arch}.expert_count") or 0
    used = _gguf_value(reader, f"{arch}.expert_used_count") or experts
    params = 0
    for t in reader.tensors:
        if len(t.shape) < 2 or t.name in GGUF_LOOKUPS[1:]:
            continue
        if t.name == "token_embd.weight" and "output.weight" in names:
            continue
        n = int(t.n_elements)
        params += n * used // experts if "_exps" in t.name and experts else n
    layers = _gguf_value(reader, f"{arch}.block_count")
    heads = _gguf_value(reader, f"{arch}.attention.head_count")
    if isinstance(heads, list):  # per-layer head counts (OpenELM style): use the mean
        heads = sum(heads) / max(len(heads), 1)
    width = _gguf_value(reader, f"{arch}.embedding_length")
    key_len = _gguf_value(reader, f"{arch}.attention.key_length")
    if not (layers and heads and width):
        raise HarnessError(f"{path}: GGUF metadata lacks {arch}.block_count/head_count/embedding_length")
    attn_width = int(heads * key_len) if key_len else int(width)
    return FlopsPerToken(f"gguf: {path}", params, int(layers), attn_width)


# --- loading by reference


def _hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP check, so an offline machine gets one line instead of half a minute of retries."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_config(ref: str, role: str = "model"):
    """A transformers config from a local folder, a config.json file or a Hugging Face id.

    Ids are looked up in the local cache first; the Hub is asked only when it is reachable.
    No weights are downloaded.
    """
    from transformers import AutoConfig

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
    if _looks_like_path(ref) or ref.endswith((".json", ".gguf")):
        raise HarnessError(f"{role} not found: {ref} (check the path, or give a Hugging Face id)")
    try:
        return AutoConfig.from_pretrained(ref, local_files_only=True)
    except (OSError, ValueError):
        pass
    if not _hub_reachable():
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
        p = Path(ref).expanduser()
        if not p.is_file():
            raise HarnessError(f"{role} GGUF file not found: {ref}")
        return flops_from_gguf(p)
    return flops_from_config(load_config(str(ref), role), source=f"config: {ref}")


def c_flops(target: FlopsPerToken, draft: FlopsPerToken, context: int = 0) -> float:
    """Leviathan's cost coefficient from arithmetic alone: draft FLOPs / target FLOPs per token."""
    return draft.flops(context) / target.flops(context)


# ---------------------------------------------------------------- gain: Leviathan et al. 2023


def check_inputs(alpha: Optional[float] = None, gamma: Optional[int] = None, c: Optional[float] = None) -> None:
    """HarnessError naming the flag for values outside the formulas' domain."""
    if alpha is not None and not 0 <= alpha <= 1:
        raise HarnessError(f"--alpha must be in [0, 1], got {alpha}")
    if gamma is not None and gamma < 1:
        raise HarnessError(f"--gamma must be >= 1, got {gamma}")
    if c is not None and not c >= 0:
        raise HarnessError(f"--c must be >= 0 (draft step time / target step time), got {c}")


def expected_tokens(alpha: float, gamma: int) -> float:
    """Eq. 1: expected tokens per round, (1 - a^(g+1)) / (1 - a); g + 1 at a = 1."""
    if alpha == 1:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def expected_speedup(alpha: float, gamma: int, c: float) -> float:
    """Theorem 3.8: E[speedup] = (1 - a^(g+1)) / ((1 - a)(g c + 1))."""
    return costed_speedup(alpha, gamma, RoundCosts(c))


@dataclass(frozen=True)
class RoundCosts:
    """What a round costs, in target one-token steps, including what Theorem 3.8 leaves out.

    c: one draft token; v: the verify pass over gamma + 1 tokens (1 in the paper); o: sampling
    and orchestration per round (0 in the paper); o_base: the baseline's own sampling and
    orchestration per target step (0 in the paper). v and o may be numbers or functions of gamma
    (see piecewise_linear) when a run measured how they grow with the batch.
    """

    c: float
    v: Union[float, Callable[[int], float]] = 1.0
    o: Union[float, Callable[[int], float]] = 0.0
    o_base: float = 0.0

    def verify(self, gamma: int) -> float:
        return self.v(gamma) if callable(self.v) else self.v

    def overhead(self, gamma: int) -> float:
        return self.o(gamma) if callable(self.o) else self.o

    def per_round(self, gamma: int) -> float:
        """g c + v + o: one round's cost in target steps."""
        return gamma * self.c + self.verify(gamma) + self.overhead(gamma)


def costed_speedup(alpha: float, gamma: int, costs: RoundCosts) -> float:
    """E[tokens] (1 + o_base) / (g c + v + o): Theorem 3.8 with the verify pass, the per-round
    overhead and the baseline's per-step overhead priced in (v = 1, o = o_base = 0 gives 3.8)."""
    return expected_tokens(alpha, gamma) * (1 + costs.o_base) / costs.per_round(gamma)


def piecewise_linear(points: dict[int, float], anchor: Optional[float] = None) -> Callable[[int], float]:
    """gamma -> value through measured (gamma, value) points, linear in between.

    anchor is the value at gamma = 0 (a verify pass of one token is one target step: anchor 1).
    Beyond the last point the last segment's slope continues, never below 0 (a batch does not get
    cheaper as it grows); before the first point without an anchor the first value holds.
    With one point and no anchor the value is constant.
    """
    pts = sorted(points.items())
    if anchor is not None and pts[0][0] > 0:
        pts = [(0, anchor)] + pts

    def f(gamma: int) -> float:
        if len(pts) == 1 or gamma <= pts[0][0]:
            return pts[0][1]
        for (g0, y0), (g1, y1) in zip(pts, pts[1:]):
            if gamma <= g1:
                return y0 + (y1 - y0) * (gamma - g0) / (g1 - g0)
        (g0, y0), (g1, y1) = pts[-2], pts[-1]
        return y1 + max(0.0, (y1 - y0) / (g1 - g0)) * (gamma - g1)

    return f


def expected_operations(alpha: float, gamma: int, c_hat: float = 0.0) -> float:
    """Theorem 3.11: factor of increase in total arithmetic, (g c^ + g + 1) / E[tokens]."""
    return (gamma * c_hat + gamma + 1) / expected_tokens(alpha, gamma)


def _costs(c: Union[float, RoundCosts]) -> RoundCosts:
    return c if isinstance(c, RoundCosts) else RoundCosts(c)


def breakeven_alpha(gamma: int, c: Union[float, RoundCosts], tol: float = 1e-12) -> Optional[float]:
    """The alpha at which E[speedup] = 1 for this gamma; None when no alpha <= 1 reaches it.

    c is Leviathan's cost ratio, or RoundCosts for the costed model. E[speedup] rises
    monotonically in alpha from 1/(g c + 1) at 0 to (g + 1)/(g c + 1) at 1 (Theorem 3.8), so a
    solution exists iff c <= 1; it is found by bisection.
    """
    costs = _costs(c)
    if costed_speedup(1.0, gamma, costs) < 1:
        return None
    if costed_speedup(0.0, gamma, costs) >= 1:
        return 0.0
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if costed_speedup(mid, gamma, costs) < 1 else (lo, mid)
    return hi


def optimal_gamma(alpha: float, c: Union[float, RoundCosts], max_gamma: int = MAX_GAMMA) -> int:
    """The integer gamma in 1..max_gamma maximizing E[speedup] (the smallest on ties).

    c is Leviathan's cost ratio, or RoundCosts for the costed model.
    With c = 0 (and v = 1, o = 0) the speedup grows with gamma forever, so the answer is max_gamma.
    """
    costs = _costs(c)
    return max(range(1, max_gamma + 1), key=lambda g: (costed_speedup(alpha, g, costs), -g))


def gamma_table(alpha: Optional[float], c: float, gammas) -> list[dict]:
    """Rows of (gamma, E[tokens], E[speedup], breakeven alpha) for the CLI and reports."""
    rows = []
    for g in gammas:
        row = {"gamma": g, "breakeven_alpha": breakeven_alpha(g, c)}
        if alpha is not None:
            row.update(expected_tokens=expected_tokens(alpha, g), expected_speedup=expected_speedup(alpha, g, c))
        rows.append(row)
    return rows
