"""A lean batch-1 forward pass for Llama-architecture models: the `torch` runtime's fast path.

transformers' `LlamaForCausalLM.forward` is general: it builds masks and position tensors on every
call, grows a DynamicCache by concatenation, and runs three q/k/v and two gate/up matmuls per layer.
For batch-1 decoding of a small model on a CPU that bookkeeping is a large share of a step. This
module runs the model's own weights through:

    x = embed(ids)                                   # [1, S, H]
    for each layer:
        q, k, v = split(rmsnorm(x) W_qkv^T)           # [1, heads, S, hd], RoPE from the model's own module
        K[:, :, L:L+S], V[...] = k, v                 # static cache [1, kv_heads, capacity, hd]
        x += sdpa(q, K[:L+S], V[:L+S], causal) W_o^T
        x += (silu(g) * u) W_down^T, (g, u) = split(rmsnorm(x) W_gu^T)
    logits = rmsnorm(x[-n_logits:]) W_head^T         # [n_logits, V]

Cropping the cache moves its length back; nothing is copied. The cache doubles when full.

How the matrices are held (`Linear`): q|k|v and gate|up are concatenated once per model into one
[out, in] matrix whose row blocks become the model's own projection weights (views: the model's
forward keeps working on the same numbers, no second copy). On a CPU in float32 each matrix is in
addition prepacked for oneDNN (`torch.ops.mkldnn._reorder_linear_weight`, what torch.compile's
CPU freezing uses), which costs a second copy of the layer and head matrices in memory. Timed side
by side in one process on the 2-core AMD EPYC here (SmolLM2-135M, float32), MKL's plain matmul
(previously used, with the matrices stored transposed) is far from the memory bound and scales
badly with the batch: one token 87 ms, five tokens 197 ms; prepacked oneDNN: 82 and 101 ms. That
ratio is v, the verify batch's cost in one-token steps, which bounds every speculative speedup:
(gamma + 1) / (gamma + v) for a perfect draft (`harness bench --figures 2`).
What it does not do: batches, attention or MLP biases, sliding windows, or any other architecture
(`unsupported_reason` says why a model falls back to transformers' forward).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from models.shape import shape_from_config


def unsupported_reason(model) -> Optional[str]:
    """None when `model` can run here, else why not (the runtime then uses transformers' forward)."""
    cfg = model.config
    if type(model).__name__ != "LlamaForCausalLM":
        return f"{type(model).__name__} is not LlamaForCausalLM"
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return "biases in attention or MLP"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"activation {cfg.hidden_act}"
    if getattr(cfg, "sliding_window", None):
        return "sliding-window attention"
    return None


def _onednn_usable(device: torch.device, dtype: torch.dtype) -> bool:
    return (device.type == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


class Linear:
    """y = x W^T for one [out, in] matrix (no bias), prepacked for oneDNN when `packed`."""

    def __init__(self, weight: torch.Tensor, packed: bool):
        self.packed = packed
        self.w = torch.ops.mkldnn._reorder_linear_weight(weight.detach()) if packed else weight.detach()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out]
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, self.w, None, "none", [], "")
        return F.linear(x, self.w)


def _fuse(linears, packed: bool) -> Linear:
    """One Linear for nn.Linear layers that read the same input. Their weights are concatenated
    into one [sum(out), in] matrix, and each module's weight becomes a view of its rows."""
    if len(linears) == 1:
        return Linear(linears[0].weight, packed)
    w = torch.cat([lin.weight.detach() for lin in linears], 0)  # [sum(out), in]
    start = 0
    for lin in linears:
        n = lin.weight.shape[0]
        lin.weight.data = w[start : start + n]  # [n, in] view, contiguous
        start += n
    return Linear(w, packed)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """As LlamaRMSNorm: normalise in float32, scale in the model's dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos + rotated * sin


class LlamaFast:
    """The model's weights with a static KV cache; `forward(ids, n_logits)` as KVModel's."""

    def __init__(self, model):
        a = shape_from_config(model.config)
        self.model = model
        self.eps, self.hd, self.nh, self.nkv = a.norm_eps, a.head_dim, a.heads, a.kv_heads
        w = model.model.embed_tokens.weight
        self.device, self.dtype = w.device, w.dtype
        if not hasattr(model, "_lean"):  # fused (and packed) once per model: a self-draft shares them
            packed = _onednn_usable(self.device, self.dtype)
            model._lean = ([(layer.input_layernorm.weight,
                             _fuse([layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj], packed),
                             _fuse([layer.self_attn.o_proj], packed), layer.post_attention_layernorm.weight,
                             _fuse([layer.mlp.gate_proj, layer.mlp.up_proj], packed), _fuse([layer.mlp.down_proj], packed))
                            for layer in model.model.layers], _fuse([model.lm_head], packed))
        self.layers, self.head = model._lean
        self.k: Optional[torch.Tensor] = None  # [layers, 1, kv_heads, capacity, hd]
        self.v: Optional[torch.Tensor] = None
        self.length = 0

    def _reserve(self, need: int) -> None:
        cap = 0 if self.k is None else self.k.shape[3]
        if need <= cap:
            return
        new_cap = max(256, cap)
        while new_cap < need:
            new_cap *= 2
        shape = (len(self.layers), 1, self.nkv, new_cap, self.hd)
        k = torch.zeros(shape, dtype=self.dtype, device=self.device)
        v = torch.zeros(shape, dtype=self.dtype, device=self.device)
        if self.k is not None:
            k[:, :, :, : self.length] = self.k[:, :, :, : self.length]
            v[:, :, :, : self.length] = self.v[:, :, :, : self.length]
        self.k, self.v = k, v

    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        """Feed ids [S] after the cache; -> logits of the last n_logits positions [n_logits, V]."""
        s, l0 = len(ids), self.length
        self._reserve(l0 + s)
        inner = self.model.model
        x = inner.embed_tokens(torch.tensor([ids], device=self.device))  # [1, S, H]
        pos = torch.arange(l0, l0 + s, device=self.device)[None]  # [1, S]
        cos, sin = inner.rotary_emb(x, pos)  # [1, S, hd]
        cos, sin = cos[:, None], sin[:, None]  # [1, 1, S, hd]
        mask = None
        if s > 1:  # row i sees cache positions 0 .. l0 + i
            mask = torch.arange(l0 + s, device=self.device)[None, :] <= pos[0, :, None]  # [S, l0+S]
        end = l0 + s
        for i, (w_in, w_qkv, w_o, w_post, w_gu, w_down) in enumerate(self.layers):
            h = w_qkv(_rms_norm(x, w_in, self.eps))  # [1, S, (nh + 2 nkv) hd]
            q, k, v = h.view(1, s, -1, self.hd).transpose(1, 2).split([self.nh, self.nkv, self.nkv], 1)
            self.k[i, :, :, l0:end] = _rope(k, cos, sin)  # [1, nkv, S, hd]
            self.v[i, :, :, l0:end] = v
            att = F.scaled_dot_product_attention(_rope(q, cos, sin), self.k[i, :, :, :end], self.v[i, :, :, :end],
                                                 attn_mask=mask, enable_gqa=True)  # [1, nh, S, hd]
            x = x + w_o(att.transpose(1, 2).reshape(1, s, -1))
            g, u = w_gu(_rms_norm(x, w_post, self.eps)).chunk(2, -1)  # [1, S, I] each
            x = x + w_down(F.silu(g) * u)
        self.length = end
        x = _rms_norm(x[:, -n_logits:], inner.norm.weight, self.eps)  # [1, n_logits, H]
        return self.head(x)[0]  # [n_logits, V]

    def crop(self, length: int) -> None:
        self.length = min(self.length, length)

    def reset(self) -> None:
        self.length = 0
