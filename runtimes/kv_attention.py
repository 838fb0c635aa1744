"""The attention of the torch runtime's C++ kernels (runtimes/llama_step.py) over its KV cache,
and the cache's layout that it reads: C++ source (`ATTENTION`) that the kernels include.

Per kv head, a part of its positions (the kernels split the positions between threads) is read
once for all the query rows that attend to it: the kv head's query heads, times the tokens of a
pass. K, rotated, is held in tiles of K_TILE positions transposed, [layers, kv_heads,
capacity / K_TILE, hd, K_TILE], so that a tile's dimension d is K_TILE positions in one row: the
scores of R query rows against a tile are hd vector loads, each feeding R fused multiply-adds with
a broadcast q[d] (an outer product, as packed_matmul's tile: no horizontal sum). V is held as
rows, [layers, kv_heads, capacity, hd]: each V row feeds R rows' sums with a broadcast e^(s - m).
Each kv head's positions are contiguous, read in order (positions outermost put one head's rows
layers x kv_heads x hd floats apart: a page and a demand miss per row).

    for each tile of the part:                     # K read once
        s[rows, tile] = q[rows] . K[tile]          # R rows at a time, accumulators in registers
    m, e = max_j s, e^(s - m) per row; e = 0 where the row may not look (causal)
    for each 64 positions of the part:             # V read once, its rows in L1 for every row block
        o[rows] += e[rows, j] V_j                  # R rows at a time
    -> per row o, m, sum_j e: the parts are combined by `combine` (softmax over every position)

Outer products rather than a dot product per score: a dot product ends in a horizontal sum, and
with one per score a 5-token verify pass's attention at 4k positions is compute bound, growing
twice as fast as its bytes (the times of both: docs/findings.md). It owns the attention's
arithmetic and the cache's layout (K_TILE); not the cache's memory (runtimes/torch_llama.py)
nor the rest of the forward.
"""

K_TILE = 16  # positions per tile of the K cache: one AVX-512 vector, two AVX2

ATTENTION = f"constexpr int64_t KT = {K_TILE};" + r"""               // positions per K tile
constexpr int NKT = KT / V::size();          // vectors per tile row: 1 with AVX-512, 2 with AVX2
constexpr int RS = V::size() == 16 ? 8 : 6;  // query rows per score tile: RS NKT accumulators + NKT loads
constexpr int RP = V::size() == 16 ? 6 : 2;  // query rows per sum over V: RP x 4 accumulators + 4 loads
constexpr int64_t JC = 64;                   // positions per sweep over V

// c[i, 0 : N W] (+)= sum_k a[i, k] b[k, 0 : N W] for R rows i: an outer product, each row of b
// (N vectors) loaded once for all R rows' broadcast a[i, k], the accumulators in registers, no
// horizontal sum. Row strides lda, ldb, ldc; ADD: onto c's values, else from 0; PREFETCH: b's row
// k + K (the next block's) is asked for as row k is read, so the stream stays ahead of the arithmetic.
template <int R, int N, bool ADD, bool PREFETCH>
static inline void outer(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t K, float* c, int64_t ldc) {
  V acc[R][N];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < N; ++v) acc[i][v] = ADD ? V::loadu(c + i * ldc + v * V::size()) : V(0.f);
  for (int64_t k = 0; k < K; ++k) {
    if (PREFETCH) __builtin_prefetch(b + (K + k) * ldb);
    V bk[N];
    for (int v = 0; v < N; ++v) bk[v] = V::loadu(b + k * ldb + v * V::size());
    for (int i = 0; i < R; ++i) {
      const V ai(a[i * lda + k]);
      for (int v = 0; v < N; ++v) acc[i][v] = at::vec::fmadd(ai, bk[v], acc[i][v]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < N; ++v) acc[i][v].store(c + i * ldc + v * V::size());
}

// Scores q . K_j for R query rows against one K tile's 16 positions (its hd rows of 16): s [R, 16]
// (row stride ld); q [R, hd]
template <int R>
static inline void score_tile(const float* q, const float* kt, int64_t hd, float* s, int64_t ld) {
  outer<R, NKT, false, true>(q, hd, kt, KT, hd, s, ld);
}

static inline void score_rows(int r, const float* q, const float* kt, int64_t hd, float* s, int64_t ld) {
  switch (r) {
    case 1: score_tile<1>(q, kt, hd, s, ld); break;
    case 2: score_tile<2>(q, kt, hd, s, ld); break;
    case 3: score_tile<3>(q, kt, hd, s, ld); break;
    case 4: score_tile<4>(q, kt, hd, s, ld); break;
    case 5: score_tile<5>(q, kt, hd, s, ld); break;
    case 6: score_tile<6>(q, kt, hd, s, ld); break;
    case 7: score_tile<7>(q, kt, hd, s, ld); break;
    case 8: score_tile<8>(q, kt, hd, s, ld); break;
  }
}

// o[i, 0 : NC W] += sum_j p[i, j] V_j[0 : NC W] over n positions for R rows; p row stride ldp,
// V rows hd apart, o row stride ldo
template <int R, int NC>
static inline void pv_tile(const float* p, int64_t ldp, const float* vr, int64_t n, int64_t hd, float* o, int64_t ldo) {
  outer<R, NC, true, false>(p, ldp, vr, hd, n, o, ldo);
}

// pv_tile over all hd columns: 4 vectors at a time, then the whole vectors left, then the rest
template <int R>
static inline void pv_cols(const float* p, int64_t ldp, const float* vr, int64_t n, int64_t hd, float* o, int64_t ldo) {
  constexpr int64_t W = V::size();
  int64_t c0 = 0;
  for (; c0 + 4 * W <= hd; c0 += 4 * W) pv_tile<R, 4>(p, ldp, vr + c0, n, hd, o + c0, ldo);
  switch ((hd - c0) / W) {
    case 1: pv_tile<R, 1>(p, ldp, vr + c0, n, hd, o + c0, ldo); break;
    case 2: pv_tile<R, 2>(p, ldp, vr + c0, n, hd, o + c0, ldo); break;
    case 3: pv_tile<R, 3>(p, ldp, vr + c0, n, hd, o + c0, ldo); break;
  }
  for (c0 += (hd - c0) / W * W; c0 < hd; ++c0)
    for (int i = 0; i < R; ++i)
      for (int64_t j = 0; j < n; ++j) o[i * ldo + c0] += p[i * ldp + j] * vr[j * hd + c0];
}

static inline void pv_rows(int r, const float* p, int64_t ldp, const float* vr, int64_t n, int64_t hd, float* o, int64_t ldo) {
  switch (r) {
    case 1: pv_cols<1>(p, ldp, vr, n, hd, o, ldo); break;
    case 2: pv_cols<2>(p, ldp, vr, n, hd, o, ldo); break;
    case 3: pv_cols<3>(p, ldp, vr, n, hd, o, ldo); break;
    case 4: pv_cols<4>(p, ldp, vr, n, hd, o, ldo); break;
    case 5: pv_cols<5>(p, ldp, vr, n, hd, o, ldo); break;
    case 6: pv_cols<6>(p, ldp, vr, n, hd, o, ldo); break;
  }
}

// The r query rows of one kv head (q [r, hd], rotated and scaled; row h is the g-th part of a
// token's query heads, token h / g) against its cache, K as tiles Kt [capacity / 16, hd, 16] and V
// as rows Vc [capacity, hd], over tiles t0 .. t1 - 1 (positions 16 t0 .. 16 t1 - 1; the cache holds
// those before `end`), row h seeing the positions before end0 + h / g (causal). Each tile and V row is read once
// for all rows. out [r, hd + 2]: per row the unnormalised sum_j e^(s_j - m) V_j, then
// m = max_j s_j and sum_j e^(s_j - m) (-inf and 0 for no position); p [r, 16 (t1 - t0)] scratch.
static inline void attend_part(const float* q, const float* Kt, const float* Vc, int64_t t0, int64_t t1,
                               int64_t end, int64_t end0, int64_t hd, int64_t r, int64_t g, float* p, float* out) {
  const int64_t j0 = t0 * KT, n = (t1 - t0) * KT, w = hd + 2;
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t h = 0; h < r; h += RS)
      score_rows(int(std::min<int64_t>(RS, r - h)), q + h * hd, Kt + t * hd * KT, hd, p + h * n + (t - t0) * KT, n);
  for (int64_t h = 0; h < r; ++h) {
    const int64_t seen = std::max<int64_t>(0, std::min(j0 + n, end0 + h / g) - j0);
    float* ph = p + h * n;
    V mv(-INFINITY);
    int64_t i = 0;
    for (; i + V::size() <= seen; i += V::size()) mv = at::vec::maximum(mv, V::loadu(ph + i));
    float m = at::vec::vec_reduce_all<float>([](V& a, V& b) { return at::vec::maximum(a, b); }, mv);
    for (; i < seen; ++i) m = std::max(m, ph[i]);
    V acc(0.f);
    for (i = 0; i < seen; i += V::size()) {  // at::vec's exp, a vector at a time
      const int64_t k = seen - i < V::size() ? seen - i : V::size();
      const V e = (V::loadu(ph + i, k) - V(m)).exp();
      e.store(ph + i, k);
      acc = acc + V::set(V(0.f), e, k);  // the lanes past the last position add nothing
    }
    for (i = seen; i < n; ++i) ph[i] = 0.f;  // positions the row does not see add nothing to its sum over V
    out[h * w + hd] = seen ? m : -INFINITY;
    out[h * w + hd + 1] = at::vec::vec_reduce_all<float>([](V& a, V& b) { return a + b; }, acc);
    for (int64_t d = 0; d < hd; ++d) out[h * w + d] = 0.f;
  }
  const int64_t nv = std::min(n, end - j0);  // the V rows that hold positions
  for (int64_t jc = 0; jc < nv; jc += JC) {  // JC positions at a time: their V rows stay in L1 for every row block
    const int64_t nj = std::min(JC, nv - jc);
    for (int64_t h = 0; h < r; h += RP)
      pv_rows(int(std::min<int64_t>(RP, r - h)), p + h * n + jc, n, Vc + (j0 + jc) * hd, nj, hd, out + h * w, w);
  }
}

// o [hd] = softmax_j(q . K_j) V_j of one query head from its n_parts parts (attend_part's rows for
// this head, `stride` floats apart), each part's sums rescaled to the largest score of all
static inline void combine(const float* parts, int64_t n_parts, int64_t stride, int64_t hd, float* o) {
  float m = -INFINITY, sum = 0.f;
  for (int64_t c = 0; c < n_parts; ++c)
    if (parts[c * stride + hd + 1] > 0.f) m = std::max(m, parts[c * stride + hd]);
  for (int64_t d = 0; d < hd; ++d) o[d] = 0.f;
  for (int64_t c = 0; c < n_parts; ++c) {
    const float* pc = parts + c * stride;
    if (pc[hd + 1] <= 0.f) continue;  // a part without positions
    const float f = std::exp(pc[hd] - m);
    sum += f * pc[hd + 1];
    for (int64_t d = 0; d < hd; ++d) o[d] += f * pc[d];
  }
  for (int64_t d = 0; d < hd; ++d) o[d] /= sum;
}

"""
