"""A lean batch-1 forward pass for Llama-architecture models: the `torch` runtime's fast path.

transformers' `LlamaForCausalLM.forward` is general: it builds masks and position tensors on every
call, grows a DynamicCache by concatenation, and runs three q/k/v and two gate/up matmuls per layer.
For batch-1 decoding of a small model on a CPU that bookkeeping is a large share of a step. This
module runs the model's own weights through:

    x = embed(ids)                                   # [1, S, H]
    for each layer:
        q, k, v = split(rmsnorm(x) W_qkv^T)           # [S, heads, hd], RoPE from the model's own module
        K[layer, :, L:L+S], V[...] = k, v             # static cache [layers, kv_heads, capacity, hd]
        x += sdpa(q, K[layer, :, :L+S], V[...], causal) W_o^T
        x += (silu(g) * u) W_down^T, (g, u) = split(rmsnorm(x) W_gu^T)
    logits = rmsnorm(x[-n_logits:]) W_head^T         # [n_logits, V]

Cropping the cache moves its length back; nothing is copied. The cache doubles when full; each kv
head's positions are one contiguous run, read in order: V as rows [layers, kv_heads, capacity, hd],
K the same where every pass is eager, and in tiles of 16 positions transposed ([layers, kv_heads,
capacity / 16, hd, 16], the kernels' layout: runtimes/kv_attention.py) where the kernels run; then an
eager pass (a long prefill) writes K through a view of the tiles and reads a copy as rows.

Three paths, chosen per call:
- one token (the baseline's step, each draft token): runtimes/llama_step.py's `step`, the whole
  forward as one C++ function in one OpenMP parallel region, every matrix-vector product a static
  split of its rows, six barriers a layer. A step is memory bound: it must read every matrix, so
  what counts is the rate at which it streams them. The matrices live in one buffer of
  transparent huge pages (`Arena`): with 4 KiB pages each page of a matrix costs a TLB miss. On a
  CPU in float32 with a C++ compiler (`kernel_reason`); the kernels are built at load the first
  time on a machine, and cached. If they do not build the process says so once and runs eager.
- up to PASS_MAX_TOKENS tokens (the verify pass, a draft's catch-up of two, a short prefill):
  llama_step's `forward_tokens`, the same forward with each matrix through packed_matmul's tile over a packed
  copy of the matrices (a second copy in memory, also in huge pages), which reads each matrix once
  per pass however many tokens it carries. That keeps v, the verify pass's cost in one-token
  steps, which bounds every speculative speedup, low (`harness bench` figure 2 measures it).
  Longer passes, and every pass where the matrices' rows are not
  whole 16-row blocks (`kernel_passes` False):
- eager, each matrix through `Linear` (runtimes/packed_matmul.py's kernel over the packed copy on a
  CPU in float32, F.linear elsewhere), also every pass when the kernels cannot run here.

How the matrices are held: q|k|v and gate|up are concatenated once per model into one [out, in]
block of the arena; each module's weight becomes a view of its rows (the model's own forward, and
transformers' generate over it, keep working on the same numbers, no second plain copy).

`harness bench --figures 1,9` sets the paths against each other and against transformers'
generate over the same weights (times measured earlier: docs/findings.md).
What it does not do: batches, attention or MLP biases, sliding windows, or any other architecture
(`unsupported_reason` says why a model falls back to transformers' forward).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from spec_harness.core.machine import hugepage_empty
from spec_harness.models.shape import shape_from_config
from spec_harness.runtimes import llama_step, packed_matmul
from spec_harness.runtimes.kv_attention import K_TILE

ALIGN = 64  # elements: every matrix in the arena starts on a cache line
# Passes up to this many tokens run through the pass kernel; longer ones (a long prompt's prefill)
# eager, where SDPA's attention beats the kernel's (docs/findings.md).
PASS_MAX_TOKENS = 32


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


def _aligned(numel: int) -> int:
    return -(-numel // ALIGN) * ALIGN


class Arena:
    """Consecutive blocks of one CPU buffer (huge pages) for a model's matrices; elsewhere each
    block is its own tensor."""

    def __init__(self, numel: int, device: torch.device, dtype: torch.dtype):
        self.buf = hugepage_empty(numel, dtype) if device.type == "cpu" else None
        self.used, self.device, self.dtype = 0, device, dtype

    def take(self, rows: int, cols: int) -> torch.Tensor:  # -> [rows, cols], contiguous
        if self.buf is None:
            return torch.empty(rows, cols, device=self.device, dtype=self.dtype)
        block = self.buf[self.used : self.used + rows * cols].view(rows, cols)
        self.used += _aligned(rows * cols)
        return block


class Linear:
    """y = x W^T for one [out, in] matrix (no bias). `weight` is the plain matrix (the one-token
    step's, and the model's own); `packed` its copy for packed_matmul's kernel, None where that
    cannot run (then F.linear)."""

    def __init__(self, weight: torch.Tensor, packed: Optional[torch.Tensor] = None):
        self.weight = weight.detach()
        self.packed = packed

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out]
        if self.packed is None:
            return F.linear(x, self.weight)
        return packed_matmul.matmul(x, self.packed, self.weight.shape[0])


def _fuse(linears, out: torch.Tensor, packed: Optional[torch.Tensor]) -> Linear:
    """One Linear for nn.Linear layers that read the same input. Their weights are copied into
    `out` [sum(out), in] (a block of the arena), and each module's weight becomes a view of its
    rows; `packed` (a block of packed_matmul.packed_numel elements) gets the packed copy."""
    torch.cat([lin.weight.detach() for lin in linears], 0, out=out)
    start = 0
    for lin in linears:
        n = lin.weight.shape[0]
        lin.weight.data = out[start : start + n]  # [n, in] view, contiguous
        start += n
    return Linear(out, None if packed is None else packed_matmul.pack(out, packed))


def _kinds(model) -> list[list[list]]:
    """Per kind of matrix (q|k|v, o, gate|up, down), per layer, the nn.Linear layers fused into it."""
    layers = model.model.layers
    return [[[x.self_attn.q_proj, x.self_attn.k_proj, x.self_attn.v_proj] for x in layers],
            [[x.self_attn.o_proj] for x in layers],
            [[x.mlp.gate_proj, x.mlp.up_proj] for x in layers],
            [[x.mlp.down_proj] for x in layers]]


def _stack_params(params) -> torch.Tensor:
    """The parameters stacked into one [n, ...] tensor; each parameter becomes a view of its row."""
    out = torch.stack([p.detach() for p in params])
    for i, p in enumerate(params):
        p.data = out[i]
    return out


class Weights:
    """A model's matrices, fused and stacked by kind in one arena ([layers, out, in] each: the
    step kernel's inputs), with a Linear per matrix (the eager path's, over packed copies in a
    second arena where packed_matmul can run: `why_not_packed` is None) and the norms stacked
    ([layers, H]). Made once per model; a self-draft shares it."""

    def __init__(self, model, device: torch.device, dtype: torch.dtype, packed: bool = True):
        kinds = _kinds(model)
        shapes = [(len(per), sum(lin.weight.shape[0] for lin in per[0]), per[0][0].weight.shape[1]) for per in kinds]
        shapes.append((1, *model.lm_head.weight.shape))  # (layers, out, in) per kind, the head last
        self.why_not_packed = packed_matmul.unusable_reason(device, dtype) if packed else "turned off (the eager forward)"
        arena = Arena(sum(_aligned(n * r * c) for n, r, c in shapes), device, dtype)
        packed = None if self.why_not_packed else Arena(
            sum(_aligned(n * packed_matmul.packed_numel(r, c)) for n, r, c in shapes), device, dtype)
        self.stacks, self.packed_stacks, linears = [], [], []  # [layers, out, in], [layers, packed] per kind
        for per, (n, rows, cols) in zip(kinds + [[[model.lm_head]]], shapes):
            stack = arena.take(n * rows, cols).view(n, rows, cols)
            pstack = None if packed is None else packed.take(n, packed_matmul.packed_numel(rows, cols))
            linears.append([_fuse(group, stack[i], None if pstack is None else pstack[i]) for i, group in enumerate(per)])
            self.stacks.append(stack)
            self.packed_stacks.append(pstack)
        self.head = linears.pop()[0]  # [V, H]
        self.stacks.pop()
        self.packed_stacks.pop()
        layers = model.model.layers
        self.norms = [_stack_params([x.input_layernorm.weight for x in layers]),
                      _stack_params([x.post_attention_layernorm.weight for x in layers])]  # [layers, H] each
        # per layer, in forward order: (w_in, W_qkv, W_o, w_post, W_gu, W_down)
        self.layers = [(self.norms[0][i], linears[0][i], linears[1][i], self.norms[1][i], linears[2][i], linears[3][i])
                       for i in range(len(layers))]

    @property
    def nbytes(self) -> int:
        return sum(w.numel() * w.element_size() for w in self.stacks + [self.head.weight])


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """As LlamaRMSNorm: normalise in float32, scale in the model's dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos + rotated * sin


def key_rows(k: torch.Tensor, end: int, tiled: bool) -> torch.Tensor:
    """K at positions 0 .. end - 1 as rows [..., end, hd], from K in tiles [..., capacity / 16, hd, 16]
    (a copy) or in rows [..., capacity, hd] (a view)."""
    if not tiled:
        return k[..., :end, :]
    return k[..., : -(-end // K_TILE), :, :].transpose(-1, -2).flatten(-3, -2)[..., :end, :]


def _put_keys(k: torch.Tensor, l0: int, end: int, rows: torch.Tensor, tiled: bool) -> None:
    """rows [..., end - l0, hd] into K (tiles or rows, as key_rows) at positions l0 .. end - 1."""
    if not tiled:
        k[..., l0:end, :] = rows
        return
    pos = torch.arange(l0, end, device=k.device)
    k.transpose(-1, -2)[..., pos // K_TILE, pos % K_TILE, :] = rows  # a view of the tiles: writes them


def kernel_reason(dtype: torch.dtype, device: torch.device) -> Optional[str]:
    """None when the forward runs through the C++ kernels (runtimes/llama_step.py), else why not."""
    if device.type != "cpu" or dtype != torch.float32:
        return "the step kernel runs only on a CPU in float32"
    return llama_step.build_failure()


class LlamaFast:
    """The model's weights with a static KV cache; `forward(ids, n_logits)` as KVModel's.
    `kernels`: False runs every pass eager; otherwise the one-token step and short passes run
    through the C++ kernels where kernel_reason() allows. `packed`: False gives the eager passes
    PyTorch's own F.linear over the plain matrices (the `eager` forward, what a from-scratch
    PyTorch user writes) instead of packed_matmul's kernel."""

    def __init__(self, model, kernels: Optional[bool] = None, packed: bool = True):
        a = shape_from_config(model.config)
        self.model = model
        self.eps, self.hd, self.nh, self.nkv = a.norm_eps, a.head_dim, a.heads, a.kv_heads
        w = model.model.embed_tokens.weight
        self.device, self.dtype = w.device, w.dtype
        if not hasattr(model, "_lean"):  # once per model (packed or not, as the first asks): a self-draft shares them
            model._lean = Weights(model, self.device, self.dtype, packed)
        self.weights = model._lean
        self.layers, self.head = self.weights.layers, self.weights.head
        self.why_no_kernels = "turned off" if kernels is False else kernel_reason(self.dtype, self.device)
        rows = [s.shape[1] for s in self.weights.stacks] + [self.hd * self.nh]  # whole 16-row blocks for the pass kernel
        self.kernel_passes = (self.why_no_kernels is None and self.weights.why_not_packed is None
                              and all(r % packed_matmul.BLOCK == 0 for r in rows))
        self.k: Optional[torch.Tensor] = None  # [layers, kv_heads, capacity / 16, hd, 16] with kernels, else as v
        self.v: Optional[torch.Tensor] = None  # [layers, kv_heads, capacity, hd]
        self.rope: Optional[tuple[torch.Tensor, torch.Tensor]] = None
        self.length = 0
        self.aux_ids: Optional[torch.Tensor] = None  # layers whose input every pass keeps (keep_features)
        self.feats: Optional[torch.Tensor] = None  # [capacity, n_aux, H], position by position like the cache

    def keep_features(self, layer_ids) -> None:
        """From now on every pass keeps the residual stream entering each of these layers, at each
        position (an EAGLE-3 head's features): features(start, end)."""
        self.aux_ids = torch.tensor(sorted(layer_ids), dtype=torch.long) if layer_ids else None
        self.feats = None
        if self.k is not None:
            self._reserve_feats(self.capacity)

    def _reserve_feats(self, cap: int) -> None:
        if self.aux_ids is None or (self.feats is not None and self.feats.shape[0] >= cap):
            return
        feats = torch.zeros(cap, len(self.aux_ids), self.weights.stacks[0].shape[2], dtype=self.dtype, device=self.device)
        if self.feats is not None:
            feats[: self.length] = self.feats[: self.length]
        self.feats = feats

    def features(self, start: int, end: int) -> torch.Tensor:
        """-> [end - start, n_aux H]: the kept layer inputs at positions start .. end - 1 (in the cache)."""
        if self.aux_ids is None or end > self.length:
            raise ValueError(f"no features for positions {start}..{end - 1} (cache holds {self.length})")
        return self.feats[start:end].flatten(1)

    @property
    def capacity(self) -> int:
        """Positions the cache holds before it doubles."""
        return 0 if self.v is None else self.v.shape[2]

    @property
    def tiled(self) -> bool:
        """K is held in tiles (the kernels' layout), not rows."""
        return self.k is not None and self.k.dim() == 5

    @property
    def kernels(self) -> bool:
        return self.why_no_kernels is None

    def _reserve(self, need: int) -> None:
        cap = self.capacity
        if need <= cap:
            return
        new_cap = max(256, cap)
        while new_cap < need:
            new_cap *= 2
        shape = (len(self.layers), self.nkv, new_cap, self.hd)
        tiles = (len(self.layers), self.nkv, new_cap // K_TILE, self.hd, K_TILE)
        tiled = self.tiled if self.k is not None else self.kernels  # a cache keeps its layout as it grows
        k = torch.zeros(tiles if tiled else shape, dtype=self.dtype, device=self.device)
        v = torch.zeros(shape, dtype=self.dtype, device=self.device)
        if self.k is not None:
            k[:, :, : self.k.shape[2]] = self.k  # the whole old capacity, in tiles or rows
            v[:, :, : self.length] = self.v[:, :, : self.length]
        self.k, self.v = k, v
        self.rope = None  # cos, sin [capacity, hd], made by the first step through the kernel
        self._reserve_feats(new_cap)

    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        """Feed ids [S] after the cache; -> logits of the last n_logits positions [n_logits, V]."""
        if len(ids) == 1 and self.kernels:
            return self._step(ids[0])
        if self.kernel_passes and len(ids) <= PASS_MAX_TOKENS:
            return self._pass(ids, n_logits)
        return self._forward(ids, n_logits)

    def _forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        s, l0 = len(ids), self.length
        end = l0 + s
        self._reserve(end)
        inner = self.model.model
        x = inner.embed_tokens(torch.tensor([ids], device=self.device))  # [1, S, H]
        pos = torch.arange(l0, end, device=self.device)[None]  # [1, S]
        cos, sin = inner.rotary_emb(x, pos)  # [1, S, hd]
        cos, sin = cos[0, :, None], sin[0, :, None]  # [S, 1, hd]
        mask = None
        if s > 1:  # row i sees cache positions 0 .. l0 + i
            mask = torch.arange(end, device=self.device)[None, :] <= pos[0, :, None]  # [S, l0+S]
        aux = [] if self.aux_ids is None else self.aux_ids.tolist()
        for i, (w_in, w_qkv, w_o, w_post, w_gu, w_down) in enumerate(self.layers):
            if i in aux:
                self.feats[l0:end, aux.index(i)] = x[0]
            h = w_qkv(_rms_norm(x, w_in, self.eps))  # [1, S, (nh + 2 nkv) hd]
            q, k, v = h.view(s, -1, self.hd).split([self.nh, self.nkv, self.nkv], 1)  # [S, heads, hd]
            _put_keys(self.k[i], l0, end, _rope(k, cos, sin).transpose(0, 1), self.tiled)
            self.v[i, :, l0:end] = v.transpose(0, 1)
            att = F.scaled_dot_product_attention(_rope(q, cos, sin).transpose(0, 1)[None],  # [1, nh, S, hd]
                                                 key_rows(self.k[i], end, self.tiled)[None],  # [1, nkv, L+S, hd]
                                                 self.v[i, :, :end][None],
                                                 attn_mask=mask, enable_gqa=True)  # [1, nh, S, hd]
            x = x + w_o(att.transpose(1, 2).reshape(1, s, -1))
            g, u = w_gu(_rms_norm(x, w_post, self.eps)).chunk(2, -1)  # [1, S, I] each
            x = x + w_down(F.silu(g) * u)
        self.length = end
        x = _rms_norm(x[:, -n_logits:], inner.norm.weight, self.eps)  # [1, n_logits, H]
        return self.head(x)[0]  # [n_logits, V]

    def _step(self, token: int) -> torch.Tensor:
        """One token through the step kernel -> [1, V]; its k, v written at position L."""
        l0 = self.length
        self._reserve(l0 + 1)
        inner, w = self.model.model, self.weights
        x = inner.embed_tokens.weight[token]  # [H]
        cos, sin = self._rope_rows(l0, l0 + 1)
        aux, aux_ids = self._aux(l0, l0 + 1)
        logits = llama_step.step(x, cos[0], sin[0], self.k, self.v, l0, w_in=w.norms[0], w_qkv=w.stacks[0],
                                 w_o=w.stacks[1], w_post=w.norms[1], w_gu=w.stacks[2], w_down=w.stacks[3],
                                 head=self.head.weight, norm=inner.norm.weight, eps=self.eps, nh=self.nh,
                                 nkv=self.nkv, hd=self.hd, aux=aux, aux_ids=aux_ids)
        self.length = l0 + 1
        return logits[None]

    def _aux(self, l0: int, end: int) -> tuple:
        """(aux [S, n_aux, H], aux_ids) for the kernels, or (None, None) when no feature is kept."""
        return (None, None) if self.aux_ids is None else (self.feats[l0:end], self.aux_ids)

    def _rope_rows(self, l0: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [end - l0, hd] at positions l0 .. end - 1, from the model's own RoPE (made once per capacity)."""
        inner = self.model.model
        if self.rope is None:  # elementwise: the same numbers as the model's forward
            w = inner.embed_tokens.weight
            cos, sin = inner.rotary_emb(w[:1][None], torch.arange(self.capacity, device=self.device)[None])
            self.rope = cos[0].contiguous(), sin[0].contiguous()  # [capacity, hd]
        return self.rope[0][l0:end], self.rope[1][l0:end]

    def _pass(self, ids: list[int], n_logits: int) -> torch.Tensor:
        """Several tokens through the pass kernel -> [n_logits, V]; their k, v written at L .. L+S-1."""
        l0, end = self.length, self.length + len(ids)
        self._reserve(end)
        inner, w = self.model.model, self.weights
        cos, sin = self._rope_rows(l0, end)
        x = inner.embed_tokens.weight[torch.tensor(ids, device=self.device)]  # [S, H], a copy
        aux, aux_ids = self._aux(l0, end)
        logits = llama_step.forward_tokens(x, cos, sin, self.k, self.v, l0, w_in=w.norms[0], p_qkv=w.packed_stacks[0],
                                           p_o=w.packed_stacks[1], w_post=w.norms[1], p_gu=w.packed_stacks[2],
                                           p_down=w.packed_stacks[3], p_head=self.head.packed, norm=inner.norm.weight,
                                           eps=self.eps, nh=self.nh, nkv=self.nkv, hd=self.hd,
                                           inter=w.stacks[3].shape[2], vocab=self.head.weight.shape[0],
                                           n_logits=n_logits, aux=aux, aux_ids=aux_ids)
        self.length = end
        return logits

    def crop(self, length: int) -> None:
        self.length = min(self.length, length)

    def reset(self) -> None:
        self.length = 0
