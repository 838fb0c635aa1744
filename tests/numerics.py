"""Tolerances derived from float32's rounding, for the tests whose results depend on the order in
which float32 sums are taken: torch's CPU kernels sum in as many lanes as the vector ISA they were
dispatched to has (AVX-512 16, AVX2 8, none: ATEN_CPU_CAPABILITY), and so do the C++ kernels of
runtimes/llama_step.py and runtimes/packed_matmul.py, which inductor builds for that same ISA.
Each bound holds for any order of the sums, so on every SIMD width; a real bug (a wrong
temperature, a token or a position off by one) is orders of magnitude beyond it.
tests/test_simd_paths.py runs NUMERIC_FILES, the tests that use them, under each narrower ISA."""

from __future__ import annotations

import torch

U32 = torch.finfo(torch.float32).eps / 2  # float32's unit roundoff, 2^-24: the relative error of one rounding

# The tests whose float32 results depend on the SIMD width torch and the kernels run at
NUMERIC_FILES = (
    "tests/test_sampling_fast.py",
    "tests/test_sampling_rule.py",
    "tests/test_torch_llama.py",
    "tests/test_kv_cache.py",
    "tests/test_greedy.py",
    "tests/test_entropy.py",
    "tests/test_expected.py",
)


def softmax_rtol(n: int, spread: float) -> float:
    """Relative error, against the exact value, of a probability of a float32 softmax over n logits
    for a logit at most `spread` below the row's largest, whatever the order of its sum: the sum
    of n non-negative terms (n - 1) u, exp's argument x - max rounded (spread u), exp itself (one
    ulp, 2 u), the division and the float64 reference's rounding to float32 (u each)."""
    return (n - 1 + spread + 4) * U32


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
