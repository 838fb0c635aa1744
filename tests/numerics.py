"""Tolerances derived from float32's rounding, for the tests whose results depend on the order in
which float32 sums are taken: torch's CPU kernels sum in as many lanes as the vector ISA they were
dispatched to has (16 floats with AVX-512, 8 with AVX2 and in the portable code without one;
ATEN_CPU_CAPABILITY picks it), and so do the C++ kernels of runtimes/llama_step.py and
runtimes/packed_matmul.py, which inductor builds for that same ISA. Each tolerance holds for any
order of the sums, so on every SIMD width (forward_atol as a probabilistic model, the others as
bounds); a real bug (a wrong temperature, a token or a position off by one) is orders of magnitude
beyond it. tests/test_simd_paths.py runs NUMERIC_TESTS, the tests that use them, under each
narrower ISA."""

from __future__ import annotations

import math

import torch

U32 = torch.finfo(torch.float32).eps / 2  # float32's unit roundoff, 2^-24: one rounding's largest relative error

# The tests whose float32 results depend on the SIMD width torch and the kernels run at: whole
# files, and single tests of files whose other tests run llama.cpp's own build or train for minutes
NUMERIC_TESTS = (
    "tests/test_sampling_fast.py",
    "tests/test_sampling_rule.py",
    "tests/test_expected.py",
    "tests/test_torch_llama.py",
    "tests/test_kv_cache.py",
    "tests/test_greedy.py",
    "tests/test_same_ids.py",
    "tests/test_entropy.py",
    "tests/test_teacher_data.py::test_top_logprobs_are_the_sorted_log_softmax_top_k",
    "tests/test_eagle3.py::test_a_grown_vocabulary_keeps_the_heads_rows_and_adds_the_targets",
)


def softmax_rtol(n: int, spread: float) -> float:
    """Relative error, against the exact value, of a probability of a float32 softmax over n logits
    for a logit at most `spread` below the row's largest, whatever the order of its sum: the sum
    of n non-negative terms (n - 1) u, exp's argument x - max rounded (spread u), exp itself (one
    ulp, 2 u), the division and the float64 reference's rounding to float32 (u each)."""
    return (n - 1 + spread + 4) * U32


def log_softmax_atol(n: int, values: torch.Tensor) -> float:
    """Absolute error of float32 log-softmax values (the largest of them in magnitude) over n
    logits, whatever the order of its sum: the sum's (n - 1) u and exp's 2 u, and the roundings of
    x - max, of the log and of the subtraction, u of magnitudes at most |value| + log n each."""
    return (n + 1 + 3 * (float(values.abs().max()) + math.log(n))) * U32


def dot_error(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise bound on the error of a float32 a @ b [.., m, k] x [k, n] against the exact
    product, in any order of its sums, fused or not: gamma_k |a| @ |b|, gamma_k = k u / (1 - k u)
    (Higham, Accuracy and Stability of Numerical Algorithms, 3.1)."""
    k = a.shape[-1]
    return k * U32 / (1 - k * U32) * (a.double().abs() @ b.double().abs())


def beyond_dot_error(y: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> str:
    """'' when a float32 product y is within dot_error of the exact a @ b, else by how much it is not."""
    worst = float(((y.double() - a.double() @ b.double()).abs() / dot_error(a, b)).max())
    return f"{worst:.1f}x float32's rounding bound" if worst > 1 else ""


def forward_terms(config, positions: int) -> int:
    """The terms a float32 Llama forward sums on its way to one logit (config: a transformers
    LlamaConfig; positions: the cache length attended over): per layer its two norms and its
    products over the hidden size, attention's scores over a head and its softmax and weighted sum
    over the positions, the output product over the heads and the down product over the
    intermediate size; then the final norm and the head."""
    H, nh = config.hidden_size, config.num_attention_heads
    hd = getattr(config, "head_dim", None) or H // nh
    layer = 2 * H + H + hd + 2 * positions + nh * hd + H + config.intermediate_size
    return config.num_hidden_layers * layer + 2 * H


def forward_atol(values: torch.Tensor, config, positions: int) -> float:
    """How far apart two float32 forwards' outputs (values: one of them) may be, whatever order and
    SIMD width they sum in. A model of the error, not a bound: each forward's n = forward_terms
    roundings are of random sign, each up to u of the values' scale, so their sum's standard
    deviation is sqrt(n / 3) u (Higham and Mary 2019, probabilistic rounding error analysis); the
    difference of two such walks, to six standard deviations, is within 5 sqrt(n) u of that scale
    (the worst case, n u, is tens of times larger on these models)."""
    return 5 * math.sqrt(forward_terms(config, positions)) * U32 * float(values.abs().max())


def apart(got: torch.Tensor, want: torch.Tensor, config, positions: int) -> str:
    """'' when two float32 forwards' outputs have one shape and are within forward_atol of each
    other, else how they differ."""
    if got.shape != want.shape:
        return f"shapes {list(got.shape)} and {list(want.shape)}"
    diff, tol = float((got - want).abs().max()), forward_atol(want, config, positions)
    return f"{diff:.2e} apart, {diff / tol:.1f}x the tolerance {tol:.2e}" if diff > tol else ""
