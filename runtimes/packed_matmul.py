"""y = x W^T on a CPU in float32 for the torch runtime's passes of several tokens (the verify pass,
prefill, a draft's catch-up), over a copy of W packed in blocks of 16 output rows.

A pass of S tokens must read every matrix once, and does S times the arithmetic of a one-token
step; on a CPU it is as fast as the one-token step only if that arithmetic hides under the
streaming of the matrix. The kernel here does that with the classic outer-product tile: W is
packed as [out/16, in, 16] (16 consecutive output rows, transposed, so that column k of a block is
16 contiguous floats); for each block and each chunk of up to 8 tokens it keeps the [chunk, 16]
outputs in vector registers, and for each k loads the block's 16 weights once and adds x[s, k]
times them into every token's accumulators. Each weight is read from memory once per pass (the
block, 36-98 KiB for the models here, stays in the core's L2 across the token chunks), every
load feeds `chunk` fused multiply-adds, and nothing is reduced horizontally. (Its times against
oneDNN's prepacked matmul and MKL's: docs/findings.md.)

The kernel is C++, built when the first model is packed, by torchinductor's C++ builder (its compiler flags and
vector ISA, `at::vec::Vectorized`, OpenMP over the blocks, a team of torch.get_num_threads() named in the call), cached under
$HARNESS_CACHE/inductor, so only a machine's first model builds it. It owns the packing and the product;
not the choice of which pass uses it (runtimes/torch_llama.py), and no other dtype or device:
`unusable_reason` says why a model's passes use F.linear instead. The packed copy may be float16
(`exact_in_half`: a matrix stored in float16, e.g. an EAGLE-3 head, runtimes/eagle3.py): each
weight is widened to float32 as it is loaded, so the products are the float32 kernel's, bit for
bit, from half the bytes.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Optional

import torch

BLOCK = 16  # output rows per packed block: the kernel's tile width (one AVX-512 vector, two AVX2)

TILES = r"""
// at::vec by name: inductor's prelude includes it only where it picked a vector ISA; without one
// (ATEN_CPU_CAPABILITY=default, a CPU it knows no ISA of) Vectorized is the portable 8-float class.
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#define BLOCK 16
// V: one SIMD vector of floats; NV of them hold a block's 16 columns.
using V = at::vec::Vectorized<float>;
constexpr int NV = BLOCK / V::size();
// Tokens per chunk: their accumulators, the block's weights and a broadcast fit in the registers
// (32 with AVX-512: 8 + 1 + 1; 16 with AVX2: 12 + 2 + 1).
constexpr int CHUNK = V::size() == 16 ? 8 : 6;

// One vector of a block's weights as floats: float32 as is, float16 widened (exactly).
static inline void load_w(const float* p, V& w) { w = V::loadu(p); }
static inline void load_w(const c10::Half* p, V& w) { at::vec::load_fp32_from_fp16(p, w); }

// y[s, 0:16] (+)= x[s, :] . block for s < S; x [S, in] (row stride in), y row stride out.
template <int S, bool ADD, typename W>
static inline void tile(const float* x, const W* block, float* y, int64_t out, int64_t in) {
  V acc[S][NV];
  for (int s = 0; s < S; ++s)
    for (int v = 0; v < NV; ++v) acc[s][v] = ADD ? V::loadu(y + s * out + v * V::size()) : V(0.0f);
  for (int64_t k = 0; k < in; ++k) {
    V w[NV];
    for (int v = 0; v < NV; ++v) load_w(block + k * BLOCK + v * V::size(), w[v]);
    for (int s = 0; s < S; ++s) {
      V xs(x[s * in + k]);
      for (int v = 0; v < NV; ++v) acc[s][v] = at::vec::fmadd(w[v], xs, acc[s][v]);
    }
  }
  for (int s = 0; s < S; ++s)
    for (int v = 0; v < NV; ++v) acc[s][v].store(y + s * out + v * V::size());
}

template <bool ADD, typename W>
static inline void chunk(int s, const float* x, const W* block, float* y, int64_t out, int64_t in) {
  switch (s) {
    case 1: tile<1, ADD, W>(x, block, y, out, in); break;
    case 2: tile<2, ADD, W>(x, block, y, out, in); break;
    case 3: tile<3, ADD, W>(x, block, y, out, in); break;
    case 4: tile<4, ADD, W>(x, block, y, out, in); break;
    case 5: tile<5, ADD, W>(x, block, y, out, in); break;
    case 6: tile<6, ADD, W>(x, block, y, out, in); break;
    case 7: tile<7, ADD, W>(x, block, y, out, in); break;
    case 8: tile<8, ADD, W>(x, block, y, out, in); break;
  }
}

// y (+)= x W^T for this thread's blocks: x [S, in], packed [out/16, in, 16], y [S, out]; out a
// multiple of 16. Inside an OpenMP parallel region; the loop's barrier ends it.
template <bool ADD, typename W>
static inline void packed_matmul(const float* x, const W* packed, float* y, int64_t S, int64_t out, int64_t in) {
  #pragma omp for schedule(static)
  for (int64_t b = 0; b < out / BLOCK; ++b)
    for (int64_t s0 = 0; s0 < S; s0 += CHUNK) {
      const int s = S - s0 < CHUNK ? int(S - s0) : CHUNK;
      chunk<ADD, W>(s, x + s0 * in, packed + b * in * BLOCK, y + s0 * out + b * BLOCK, out, in);
    }
}
"""

SOURCE = TILES + r"""
extern "C" void kernel(const float* x, const WEIGHT* packed, float* y, int64_t S, int64_t out, int64_t in,
                       int64_t threads) {
  #pragma omp parallel num_threads(threads)
  packed_matmul<false>(x, packed, y, S, out, in);
}
"""
WEIGHTS = {torch.float32: "float", torch.float16: "c10::Half"}  # the packed copy's dtype -> its C++ type


def use_harness_inductor_cache() -> None:
    """torchinductor's builds (this kernel, runtimes/llama_step.py's) under $HARNESS_CACHE/inductor
    unless TORCHINDUCTOR_CACHE_DIR says otherwise."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from spec_harness.models.loading import cache_root

    # torch writes its default into the environment at its first build, so that value is not a choice
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR") in (None, os.path.abspath(default_cache_dir())):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_root() / "inductor")


def build(argtypes: list[str], source: str):
    """`source`'s `extern "C" void kernel(...)` built by inductor's C++ builder (cached under
    $HARNESS_CACHE/inductor) and bound to Python: called with tensors for pointers, ints, floats.
    A library built before for the same source, torch and CPU is loaded directly (`_built`):
    inductor's own lookup imports torch._dynamo and test-compiles each vector ISA in every process."""
    key, known = _built(argtypes, source)
    try:
        return _load_built(key, Path(known.read_text().strip()))
    except (OSError, ImportError):
        pass
    from torch._inductor.codecache import CppPythonBindingsCodeCache

    use_harness_inductor_cache()
    fn = CppPythonBindingsCodeCache.load_pybinding(argtypes, source)
    try:
        known.parent.mkdir(parents=True, exist_ok=True)
        known.write_text(fn.__self__.__file__)
    except (OSError, AttributeError):
        pass
    return fn


def _built(argtypes: list[str], source: str) -> tuple[str, Path]:
    """(key, the file that names the library built for it) for a kernel's source and arguments on
    this torch, this CPU's flags and the vector ISA ATEN_CPU_CAPABILITY asks of inductor (avx2,
    default: none) instead of the widest the CPU has."""
    from spec_harness.core.limits import cpu_flags
    from spec_harness.models.loading import cache_root

    isa = os.environ.get("ATEN_CPU_CAPABILITY", "")
    what = "\n".join([torch.__version__, cpu_flags(), isa, *argtypes, source])
    key = "k" + hashlib.sha256(what.encode()).hexdigest()[:32]
    return key, cache_root() / "kernels" / f"{key}.path"


def _load_built(key: str, path: Path):
    """The `kernel` of an extension module inductor built (as its codecache loads one)."""
    import importlib.util

    name = f"{key}.kernel"  # the module's init function is PyInit_kernel
    if name not in sys.modules:
        if not path.is_file():
            raise ImportError(f"{path} is gone")
        os.environ["_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"] = str(
            torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr)  # what inductor's bindings read
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name].kernel


@functools.cache
def _kernel(weight: torch.dtype = torch.float32):
    w = WEIGHTS[weight]
    return build(["const float*", f"const {w}*", "float*", "int64_t", "int64_t", "int64_t", "int64_t"],
                 SOURCE.replace("WEIGHT", w))


def has_cxx_compiler() -> bool:
    """Whether a C++ compiler is on PATH: torchinductor's builds (this kernel, the step kernel) need one."""
    return any(shutil.which(name) for name in ("g++", "c++", "clang++"))


@functools.cache
def _build_failure() -> Optional[str]:
    if not has_cxx_compiler():
        return "no C++ compiler (install g++)"
    try:
        _kernel()
    except Exception as e:  # a compiler that cannot build it: the passes use F.linear
        why = "the kernel did not build: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        print(f"torch: packed matmul: {why}; passes of several tokens use F.linear", file=sys.stderr)
        return why
    return None


def unusable_reason(device: torch.device, dtype: torch.dtype) -> Optional[str]:
    """None when matrices on `device` in `dtype` can be packed and multiplied here, else why not."""
    if device.type != "cpu" or dtype != torch.float32:
        return "packed matrices only on a CPU in float32"
    return _build_failure()


def packed_numel(out: int, inn: int) -> int:
    return -(-out // BLOCK) * BLOCK * inn


def pack(weight: torch.Tensor, dest: torch.Tensor) -> torch.Tensor:
    """weight [out, in] -> dest viewed as [ceil(out/16), in, 16]; rows past `out` are zero."""
    out, inn = weight.shape
    blocks = -(-out // BLOCK)
    packed = dest.view(blocks, inn, BLOCK)
    rows = weight if out % BLOCK == 0 else torch.cat([weight, weight.new_zeros(blocks * BLOCK - out, inn)])
    packed.copy_(rows.view(blocks, BLOCK, inn).transpose(1, 2))  # [blocks, 16, in] -> [blocks, in, 16]
    return packed


def matmul(x: torch.Tensor, packed: torch.Tensor, out: int) -> torch.Tensor:
    """x [..., in] float32 times the packed [blocks, in, 16] matrix of `out` rows (float32, or
    float16 widened to float32 as it is read: the same products at half the bytes) -> [..., out]."""
    if not (packed.dim() == 3 and packed.shape[2] == BLOCK and packed.dtype in WEIGHTS and packed.is_contiguous()
            and x.dtype == torch.float32 and x.shape[-1] == packed.shape[1] and 0 < out <= packed.shape[0] * BLOCK):
        raise ValueError(f"packed_matmul: x {x.dtype} {list(x.shape)} times packed {packed.dtype} {list(packed.shape)} "
                         f"(contiguous float32 or float16 [blocks, in, {BLOCK}]) for {out} rows does not fit")
    inn = packed.shape[1]
    rows = x.reshape(-1, inn).contiguous()  # [S, in]
    y = torch.empty(rows.shape[0], packed.shape[0] * BLOCK, dtype=x.dtype)  # [S, out rounded up]
    _kernel(packed.dtype)(rows, packed, y, rows.shape[0], y.shape[1], inn, torch.get_num_threads())
    if y.shape[1] != out:
        y = y[:, :out].contiguous()
    return y.view(*x.shape[:-1], out)


def exact_in_half(weight: torch.Tensor) -> bool:
    """Whether every value of a float32 matrix is a float16 value (a model stored in float16):
    then a float16 packed copy gives exactly the float32 products, at half the bytes read."""
    return bool(torch.equal(weight.half().float(), weight))
