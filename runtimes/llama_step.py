"""The torch runtime's forward on a CPU in float32 as two C++ functions, each the whole Llama forward
in one OpenMP parallel region from the embeddings to the logits: `step` for one token (the
baseline's step, each draft token), `forward_tokens` for a few (the verify pass, a draft's
catch-up, a short prefill: runtimes/torch_llama.py sends longer passes to its eager forward).

A one-token step is memory bound: it must read every matrix once (541 MB for SmolLM2-135M in
float32), and the rest of its work is small. What decides its speed is how close it streams the
matrices to the machine's read bandwidth, and the step loses that where the threads stop
streaming: at every synchronisation, and wherever one thread works while the other waits. So:

    x = embedding row                                   # [H], shared
    for each layer:                                     # every thread:
        h = rmsnorm(x) * w_in                           #   its own copy, no barrier
        qkv = W_qkv h                                   #   rows split between threads     | barrier
        K[L], V[L] = rope(k), v                         #   kv heads split                 | barrier
        per kv head and part of the positions (split between threads): its query heads'
            exp(rope(q) hd^-0.5 . K[part] - max) and their sums over V[part], K and V read once | barrier
        per query head: att = its parts combined (softmax over every position)              | barrier
        x += W_o att                                    #   rows split                     | barrier
        h = rmsnorm(x) * w_post                         #   its own copy
        gu = W_gu h                                     #   rows split                     | barrier
        a = silu(g) * u                                 #   its own copy
        x += W_down a                                   #   rows split                     | barrier
    logits = W_head (rmsnorm(x) * norm)                 #   rows split

Seven barriers a layer; every matrix-vector product is a static split of its rows, each row a dot
product with four vector accumulators (the loads stay independent of the adds' latency). The
small vectors (the norms, SiLU) are computed by every thread for itself rather than by one while
the others wait.

The attention, and the KV cache's layout it reads (K in tiles of 16 positions, V in rows), are
runtimes/kv_attention.py's: each kv head's part of the positions read once for all its query rows.

`forward_tokens` is the same forward for S tokens, each matrix product through packed_matmul's
outer-product tile over the packed copy of the matrices (each matrix read once per pass however
many tokens it carries), the norms, RoPE and SiLU split by token, causal attention (token s sees
positions 0 .. L + s) split as in the step, by kv head and part of the K tiles, each tile and V row
read once for every token's query heads: one parallel region instead of ~1000 eager operations.
It needs every matrix's rows, and the attention's width, in whole 16-row blocks. (Its time
against the eager pass, and the one-token step's: docs/findings.md.)

Built once per machine by torchinductor's C++ builder (its flags and vector ISA,
`at::vec::Vectorized`, OpenMP), cached under $HARNESS_CACHE/inductor,
so only a machine's first load builds it. Each call's team is torch.get_num_threads() threads,
named in the parallel region (so --threads governs it whichever OpenMP runtime the module links),
and counts itself into TEAM (`threads_used`); every argument is checked before the call (`_check`).
It owns the forward's arithmetic except the attention's; not the weights' layout or the cache
(runtimes/torch_llama.py), nor the packing (runtimes/packed_matmul.py).
"""

from __future__ import annotations

import functools
import sys
from typing import Optional

import torch

from spec_harness.runtimes import packed_matmul
from spec_harness.runtimes.kv_attention import ATTENTION, K_TILE

HELPERS = r"""
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <cmath>
#include <vector>
using V = at::vec::Vectorized<float>;
""" + ATTENTION + r"""

// w[0:n] . x[0:n]
static inline float dot(const float* w, const float* x, int64_t n) {
  constexpr int64_t W = V::size();
  V a0(0.f), a1(0.f), a2(0.f), a3(0.f);
  int64_t k = 0;
  for (; k + 4 * W <= n; k += 4 * W) {
    a0 = at::vec::fmadd(V::loadu(w + k), V::loadu(x + k), a0);
    a1 = at::vec::fmadd(V::loadu(w + k + W), V::loadu(x + k + W), a1);
    a2 = at::vec::fmadd(V::loadu(w + k + 2 * W), V::loadu(x + k + 2 * W), a2);
    a3 = at::vec::fmadd(V::loadu(w + k + 3 * W), V::loadu(x + k + 3 * W), a3);
  }
  for (; k + W <= n; k += W) a0 = at::vec::fmadd(V::loadu(w + k), V::loadu(x + k), a0);
  float s = at::vec::vec_reduce_all<float>([](V& a, V& b) { return a + b; }, (a0 + a1) + (a2 + a3));
  for (; k < n; ++k) s += w[k] * x[k];
  return s;
}

// y[r] (+)= W[r] . x for this thread's rows r of W [out, in]; the barrier at the end is the loop's.
template <bool ADD>
static inline void gemv(const float* w, const float* x, float* y, int64_t out, int64_t in) {
  #pragma omp for schedule(static)
  for (int64_t r = 0; r < out; ++r) {
    const float d = dot(w + r * in, x, in);
    y[r] = ADD ? y[r] + d : d;
  }
}

// h = x / sqrt(mean(x^2) + eps) * weight, as LlamaRMSNorm in float32
static inline void rms_norm(const float* x, const float* weight, float* h, int64_t n, float eps) {
  const float r = 1.0f / std::sqrt(dot(x, x, n) / n + eps);
  for (int64_t i = 0; i < n; ++i) h[i] = weight[i] * (x[i] * r);
}

// out[i os] = (x * cos + rotate_half(x) * sin)[i] * scale, rotate_half(x) = [-x[half:], x[:half]]
static inline void rope(const float* x, const float* cos, const float* sin, float* out, int64_t hd, float scale,
                        int64_t os = 1) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < half; ++i) out[i * os] = (x[i] * cos[i] - x[i + half] * sin[i]) * scale;
  for (int64_t i = half; i < hd; ++i) out[i * os] = (x[i] * cos[i] + x[i - half] * sin[i]) * scale;
}

// out [I] = silu(gu[:I]) * gu[I:]
static inline void silu_mul(const float* gu, float* out, int64_t I) {
  for (int64_t i = 0; i < I; i += V::size()) {
    const int64_t n = I - i < V::size() ? I - i : V::size();
    V a = V::loadu(gu + i, n), b = V::loadu(gu + I + i, n);
    (a / (V(1.0f) + a.neg().exp()) * b).store(out + i, n);
  }
}

// A token's k (rotated) and v of kv head `kv` out of its q|k|v row into the caches: k into its
// tile's column kd (dimension d at kd[16 d]), v into the row vd [hd]
static inline void store_kv(const float* qkv, const float* cos, const float* sin, float* kd, float* vd,
                            int64_t nh, int64_t nkv, int64_t kv, int64_t hd) {
  rope(qkv + (nh + kv) * hd, cos, sin, kd, hd, 1.0f, KT);
  for (int64_t d = 0; d < hd; ++d) vd[d] = qkv[(nh + nkv + kv) * hd + d];
}

"""

STEP = HELPERS + r"""
extern "C" void kernel(const float* emb, const float* cos, const float* sin, float* kc, float* vc,
                       const float* w_in, const float* w_qkv, const float* w_o, const float* w_post,
                       const float* w_gu, const float* w_down, const float* head, const float* norm,
                       float* logits, float* scratch, float* aux, const int64_t* aux_ids, int64_t n_aux,
                       int64_t L, int64_t cap, int64_t layers, int64_t H, int64_t nh,
                       int64_t nkv, int64_t hd, int64_t I, int64_t vocab, float eps, int64_t* team, int64_t threads) {
  // aux [n_aux, H]: the residual stream entering layer aux_ids[a] (an EAGLE-3 head's features)
  const int64_t nq = (nh + 2 * nkv) * hd, g = nh / nkv;
  const int64_t rows = cap * hd;  // one kv head's cache: K [capacity / 16, hd, 16], V [capacity, hd]
  const int64_t nt = (L + 1 + KT - 1) / KT;  // K tiles holding positions 0 .. L
  auto tile_at = [&](int64_t j) { return j / KT * hd * KT + j % KT; };  // position j's column in K's tiles
  float* x = scratch;         // [H] the residual stream
  float* qkv = x + H;         // [nq]
  float* att = qkv + nq;      // [nh hd]
  float* gu = att + nh * hd;  // [2I]
  for (int64_t i = 0; i < H; ++i) x[i] = emb[i];
  // the attention in nkv x C parts (a kv head's query heads over a C-th of the K tiles each), so
  // that every thread reads its share of the cache once; each part's [g, hd + 2] sums, then combined
  const int64_t C = threads, w = hd + 2;
  std::vector<float> part(nkv * C * g * w);
  #pragma omp parallel num_threads(threads)
  {
    #pragma omp atomic
    team[0] += 1;  // the threads that did work (llama_step.threads_used)
    std::vector<float> h(H > I ? H : I), q(g * hd), p(g * nt * KT);  // this thread's own
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t a = 0; a < n_aux; ++a)
        if (aux_ids[a] == l) {  // x is next written after two barriers
          #pragma omp for schedule(static) nowait
          for (int64_t i = 0; i < H; ++i) aux[a * H + i] = x[i];
        }
      rms_norm(x, w_in + l * H, h.data(), H, eps);
      gemv<false>(w_qkv + l * nq * H, h.data(), qkv, nq, H);
      float* kl = kc + l * nkv * rows;  // layer l's cache, kv head 0
      float* vl = vc + l * nkv * rows;
      #pragma omp for schedule(static)
      for (int64_t kv = 0; kv < nkv; ++kv)  // the token's k, v into the cache at L
        store_kv(qkv, cos, sin, kl + kv * rows + tile_at(L), vl + kv * rows + L * hd, nh, nkv, kv, hd);
      #pragma omp for schedule(static)
      for (int64_t kc = 0; kc < nkv * C; ++kc) {  // kv head kc / C over its part kc % C of the tiles
        const int64_t kv = kc / C, c = kc % C;
        for (int64_t i = 0; i < g; ++i)
          rope(qkv + (kv * g + i) * hd, cos, sin, q.data() + i * hd, hd, 1.0f / std::sqrt(float(hd)));
        attend_part(q.data(), kl + kv * rows, vl + kv * rows, nt * c / C, nt * (c + 1) / C, L + 1, L + 1, hd, g, g,
                    p.data(), part.data() + kc * g * w);
      }
      #pragma omp for schedule(static)
      for (int64_t head_i = 0; head_i < nh; ++head_i)
        combine(part.data() + ((head_i / g) * C * g + head_i % g) * w, C, g * w, hd, att + head_i * hd);
      gemv<true>(w_o + l * H * nh * hd, att, x, H, nh * hd);
      rms_norm(x, w_post + l * H, h.data(), H, eps);
      gemv<false>(w_gu + l * 2 * I * H, h.data(), gu, 2 * I, H);
      silu_mul(gu, h.data(), I);
      gemv<true>(w_down + l * H * I, h.data(), x, H, I);
    }
    rms_norm(x, norm, h.data(), H, eps);
    gemv<false>(head, h.data(), logits, vocab, H);
  }
}
"""

# S tokens after a cache of L: every matrix through packed_matmul's tile (each read once per pass),
# the rest as in the step. Output rows and the residual's width must be whole 16-row blocks.
PASS = packed_matmul.TILES + HELPERS + r"""
extern "C" void kernel(float* x, const float* cos, const float* sin, float* kc, float* vc,
                       const float* w_in, const float* p_qkv, const float* p_o, const float* w_post,
                       const float* p_gu, const float* p_down, const float* p_head, const float* norm,
                       float* logits, float* scratch, float* aux, const int64_t* aux_ids, int64_t n_aux,
                       int64_t S, int64_t L, int64_t cap, int64_t layers, int64_t H,
                       int64_t nh, int64_t nkv, int64_t hd, int64_t I, int64_t vocab_r, int64_t n_logits,
                       float eps, int64_t* team, int64_t threads) {
  // x [S, H] the tokens' embeddings, then the residual stream; cos, sin [S, hd]; logits [n_logits, vocab_r]
  // aux [S, n_aux, H]: each token's residual stream entering layer aux_ids[a]
  const int64_t nq = (nh + 2 * nkv) * hd, g = nh / nkv, na = nh * hd;
  const int64_t rows = cap * hd;  // one kv head's cache: K [capacity / 16, hd, 16], V [capacity, hd]
  const int64_t nt = (L + S + KT - 1) / KT;  // K tiles holding positions 0 .. L + S - 1
  auto tile_at = [&](int64_t j) { return j / KT * hd * KT + j % KT; };  // position j's column in K's tiles
  float* hn = scratch;        // [S, H]
  float* qkv = hn + S * H;    // [S, nq]
  float* att = qkv + S * nq;  // [S, nh hd]
  float* gu = att + S * na;   // [S, 2I]
  float* act = gu + S * 2 * I;  // [S, I]
  // the attention as in the step: per kv head and C-th of the K tiles, every
  // token's query heads at once (each cache row read once per pass, not once per token), then combined
  const int64_t C = threads, w = hd + 2;
  std::vector<float> part(nkv * C * S * g * w);
  #pragma omp parallel num_threads(threads)
  {
    #pragma omp atomic
    team[0] += 1;  // the threads that did work (llama_step.threads_used)
    std::vector<float> q(S * g * hd), p(S * g * nt * KT);  // this thread's own
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t a = 0; a < n_aux; ++a)
        if (aux_ids[a] == l) {  // x is next written after two barriers
          #pragma omp for schedule(static) nowait
          for (int64_t s = 0; s < S; ++s)
            for (int64_t i = 0; i < H; ++i) aux[(s * n_aux + a) * H + i] = x[s * H + i];
        }
      #pragma omp for schedule(static)
      for (int64_t s = 0; s < S; ++s) rms_norm(x + s * H, w_in + l * H, hn + s * H, H, eps);
      packed_matmul<false>(hn, p_qkv + l * nq * H, qkv, S, nq, H);
      float* kl = kc + l * nkv * rows;  // layer l's cache, kv head 0
      float* vl = vc + l * nkv * rows;
      #pragma omp for schedule(static)
      for (int64_t sk = 0; sk < S * nkv; ++sk) {  // the tokens' k, v into the cache at L + s
        const int64_t s = sk / nkv, kv = sk % nkv;
        store_kv(qkv + s * nq, cos + s * hd, sin + s * hd, kl + kv * rows + tile_at(L + s),
                 vl + kv * rows + (L + s) * hd, nh, nkv, kv, hd);
      }
      #pragma omp for schedule(static)
      for (int64_t kc = 0; kc < nkv * C; ++kc) {  // kv head kc / C: every token's query heads over part kc % C
        const int64_t kv = kc / C, c = kc % C;
        for (int64_t s = 0; s < S; ++s)
          for (int64_t i = 0; i < g; ++i)
            rope(qkv + s * nq + (kv * g + i) * hd, cos + s * hd, sin + s * hd, q.data() + (s * g + i) * hd, hd,
                 1.0f / std::sqrt(float(hd)));
        attend_part(q.data(), kl + kv * rows, vl + kv * rows, nt * c / C, nt * (c + 1) / C, L + S, L + 1, hd,
                    S * g, g, p.data(), part.data() + kc * S * g * w);
      }
      #pragma omp for schedule(static)
      for (int64_t sh = 0; sh < S * nh; ++sh) {  // token s, query head: its parts combined
        const int64_t s = sh / nh, head_i = sh % nh, kv = head_i / g;
        combine(part.data() + (kv * C * S * g + s * g + head_i % g) * w, C, S * g * w, hd, att + s * na + head_i * hd);
      }
      packed_matmul<true>(att, p_o + l * H * na, x, S, H, na);
      #pragma omp for schedule(static)
      for (int64_t s = 0; s < S; ++s) rms_norm(x + s * H, w_post + l * H, hn + s * H, H, eps);
      packed_matmul<false>(hn, p_gu + l * 2 * I * H, gu, S, 2 * I, H);
      #pragma omp for schedule(static)
      for (int64_t s = 0; s < S; ++s) silu_mul(gu + s * 2 * I, act + s * I, I);
      packed_matmul<true>(act, p_down + l * H * I, x, S, H, I);
    }
    #pragma omp for schedule(static)
    for (int64_t s = 0; s < n_logits; ++s) rms_norm(x + (S - n_logits + s) * H, norm, hn + s * H, H, eps);
    packed_matmul<false>(hn, p_head, logits, n_logits, vocab_r, H);
  }
}
"""


@functools.cache
def _kernel():
    return packed_matmul.build(["const float*"] * 3 + ["float*"] * 2 + ["const float*"] * 8 + ["float*"] * 3
                               + ["const int64_t*"] + ["int64_t"] * 10 + ["float", "int64_t*", "int64_t"], STEP)


@functools.cache
def _pass_kernel():
    return packed_matmul.build(["float*"] + ["const float*"] * 2 + ["float*"] * 2 + ["const float*"] * 8 + ["float*"] * 3
                               + ["const int64_t*"] + ["int64_t"] * 12 + ["float", "int64_t*", "int64_t"], PASS)


def build_failure() -> Optional[str]:
    """None when both kernels are built (or were, in inductor's cache), else why not."""
    if not packed_matmul.has_cxx_compiler():
        return "no C++ compiler (install g++)"
    return _build()


@functools.cache
def _build() -> Optional[str]:
    try:
        _kernel()
        _pass_kernel()
    except Exception as e:  # a compiler that cannot build it: the step runs eager
        why = "the step kernels did not build: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        print(f"torch: {why}; the forward runs eager", file=sys.stderr)
        return why
    return None


NO_AUX = (torch.zeros(1), torch.zeros(1, dtype=torch.long))  # (aux, aux_ids) when no layer's input is wanted
TEAM = torch.zeros(1, dtype=torch.long)  # the kernels count into it the threads that did work


def threads_used() -> int:
    """The threads that did work in the last kernel call (its OpenMP team, torch's thread count)."""
    return int(TEAM[0])


def _call(kernel, *args) -> None:
    """kernel(*args, TEAM, threads): a team of torch.get_num_threads() threads (--threads), counted."""
    TEAM.zero_()
    kernel(*args, TEAM, torch.get_num_threads())


def _check(**args) -> None:
    """name=(tensor, shape or element count, dtype): each a contiguous CPU tensor of exactly that
    shape (or size) and dtype, else one ValueError naming it. The kernels read raw pointers: a
    tensor of another shape, dtype or stride would be read past its end, never refused."""
    for name, (t, want, dtype) in args.items():
        ok = (isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dtype == dtype and t.is_contiguous()
              and (t.numel() == want if isinstance(want, int) else tuple(t.shape) == tuple(want)))
        if not ok:
            got = (f"{t.dtype} {list(t.shape)} on {t.device}{'' if t.is_contiguous() else ', not contiguous'}"
                   if isinstance(t, torch.Tensor) else type(t).__name__)
            size = f"{want} elements" if isinstance(want, int) else f"shape {list(want)}"
            raise ValueError(f"llama_step: {name} must be a contiguous CPU {dtype} tensor of {size}, got {got}")


def _check_aux(aux, aux_ids, rows: int, H: int, layers: int) -> tuple:
    """(aux, aux_ids) checked: aux [rows, n_aux, H] float32, aux_ids [n_aux] int64 in 0..layers-1."""
    if aux_ids is None:
        return NO_AUX
    _check(aux_ids=(aux_ids, (aux_ids.numel(),), torch.long), aux=(aux, rows * aux_ids.numel() * H, torch.float32))
    if aux_ids.numel() and not (0 <= int(aux_ids.min()) and int(aux_ids.max()) < layers):
        raise ValueError(f"llama_step: aux_ids {aux_ids.tolist()} must name layers 0..{layers - 1}")
    return aux, aux_ids


def _check_cache(k, v, layers: int, nkv: int, hd: int, end: int) -> int:
    """-> the caches' capacity: k [layers, nkv, capacity / 16, hd, 16] (K_TILE positions a tile),
    v [layers, nkv, capacity, hd], holding positions up to `end`."""
    cap = k.shape[2] * K_TILE if isinstance(k, torch.Tensor) and k.dim() == 5 else 0
    _check(k=(k, (layers, nkv, cap // K_TILE, hd, K_TILE), torch.float32), v=(v, (layers, nkv, cap, hd), torch.float32))
    if end > cap:
        raise ValueError(f"llama_step: positions up to {end} do not fit the {cap}-position cache")
    return cap


def _check_attention(nh: int, nkv: int, hd: int, length: int, what: str, more: str = "") -> None:
    """nh query heads in groups over nkv kv heads of hd each, at a position >= 0 (and nothing in
    `more`, what else the caller found wrong) -> else ValueError: not a Llama step/pass."""
    if nh <= 0 or nkv <= 0 or nh % nkv or hd <= 0 or length < 0 or more:
        raise ValueError(f"llama_step: {nh} query heads, {nkv} kv heads of {hd}, position {length}{more}: not a Llama {what}")


def step(emb_row, cos, sin, k, v, length: int, *, w_in, w_qkv, w_o, w_post, w_gu, w_down, head, norm,
         eps: float, nh: int, nkv: int, hd: int, aux=None, aux_ids=None) -> torch.Tensor:
    """One token through every layer -> logits [V]; its k, v written into the caches at position
    `length`: k [layers, nkv, capacity / K_TILE, hd, K_TILE], v [layers, nkv, capacity, hd]. Arguments as torch_llama.Weights holds them:
    w_in, w_post [layers, H]; w_qkv [layers, (nh+2nkv) hd, H]; w_o [layers, H, nh hd];
    w_gu [layers, 2I, H]; w_down [layers, H, I]; head [V, H]; norm [H]; cos, sin [hd].
    aux [1, n_aux, H] (contiguous) gets the residual stream entering each layer of aux_ids [n_aux].
    Every argument is checked first (ValueError naming the first that does not fit)."""
    f32 = torch.float32
    _check(w_in=(w_in, w_in.shape if w_in.dim() == 2 else (-1, -1), f32))
    layers, H = w_in.shape
    inter = w_down.shape[-1] if w_down.dim() == 3 else -1
    vocab = head.shape[0] if head.dim() == 2 else -1
    _check_attention(nh, nkv, hd, length, "step")
    _check(emb_row=(emb_row, (H,), f32), cos=(cos, (hd,), f32), sin=(sin, (hd,), f32),
           w_qkv=(w_qkv, (layers, (nh + 2 * nkv) * hd, H), f32), w_o=(w_o, (layers, H, nh * hd), f32),
           w_post=(w_post, (layers, H), f32), w_gu=(w_gu, (layers, 2 * inter, H), f32),
           w_down=(w_down, (layers, H, inter), f32), head=(head, (vocab, H), f32), norm=(norm, (H,), f32))
    cap = _check_cache(k, v, layers, nkv, hd, length + 1)
    aux, aux_ids = _check_aux(aux, aux_ids, 1, H, layers)
    logits = torch.empty(vocab, dtype=f32)
    scratch = torch.empty(H + (nh + 2 * nkv) * hd + nh * hd + 2 * inter, dtype=f32)
    _call(_kernel(), emb_row, cos, sin, k, v, w_in, w_qkv, w_o, w_post, w_gu, w_down, head, norm, logits, scratch,
          aux, aux_ids, aux_ids.numel() if aux_ids is not NO_AUX[1] else 0,
          length, cap, layers, H, nh, nkv, hd, inter, vocab, eps)
    return logits


def forward_tokens(emb_rows, cos, sin, k, v, length: int, *, w_in, p_qkv, p_o, w_post, p_gu, p_down, p_head, norm,
                   eps: float, nh: int, nkv: int, hd: int, inter: int, vocab: int, n_logits: int,
                   aux=None, aux_ids=None) -> torch.Tensor:
    """S tokens through every layer -> logits of the last n_logits [n_logits, V]; their k, v written
    into the caches at positions length .. length + S - 1. emb_rows [S, H] (overwritten: a copy);
    cos, sin [S, hd]; w_in, w_post [layers, H]; p_* the packed stacks [layers, packed_numel] of
    W_qkv, W_o, W_gu, W_down and the head's packed [V/16, H, 16]; norm [H].
    aux [S, n_aux, H] (contiguous) gets each token's residual stream entering the layers aux_ids.
    Every argument is checked first (ValueError naming the first that does not fit)."""
    f32, pn, B = torch.float32, packed_matmul.packed_numel, packed_matmul.BLOCK
    _check(w_in=(w_in, w_in.shape if w_in.dim() == 2 else (-1, -1), f32))
    layers, H = w_in.shape
    S = emb_rows.shape[0] if emb_rows.dim() == 2 else -1
    nq, na = (nh + 2 * nkv) * hd, nh * hd
    _check_attention(nh, nkv, hd, length, "pass", f", {n_logits} logits of {S} tokens" if not 1 <= n_logits <= S else "")
    if any(n % B for n in (nq, H, 2 * inter, na)):
        raise ValueError(f"llama_step: the pass kernel needs matrices of whole {B}-row blocks "
                         f"(qkv {nq}, hidden {H}, gate-up {2 * inter}, attention {na})")
    _check(emb_rows=(emb_rows, (S, H), f32), cos=(cos, (S, hd), f32), sin=(sin, (S, hd), f32),
           p_qkv=(p_qkv, layers * pn(nq, H), f32), p_o=(p_o, layers * pn(H, na), f32),
           w_post=(w_post, (layers, H), f32), p_gu=(p_gu, layers * pn(2 * inter, H), f32),
           p_down=(p_down, layers * pn(H, inter), f32), p_head=(p_head, pn(vocab, H), f32), norm=(norm, (H,), f32))
    cap = _check_cache(k, v, layers, nkv, hd, length + S)
    aux, aux_ids = _check_aux(aux, aux_ids, S, H, layers)
    vocab_r = -(-vocab // B) * B
    logits = torch.empty(n_logits, vocab_r, dtype=f32)
    scratch = torch.empty(S * (H + nq + na + 3 * inter), dtype=f32)
    _call(_pass_kernel(), emb_rows, cos, sin, k, v, w_in, p_qkv, p_o, w_post, p_gu, p_down, p_head, norm, logits, scratch,
          aux, aux_ids, aux_ids.numel() if aux_ids is not NO_AUX[1] else 0,
          S, length, cap, layers, H, nh, nkv, hd, inter, vocab_r, n_logits, eps)
    return logits[:, :vocab]
