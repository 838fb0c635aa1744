"""What the llama.cpp runtimes share: context settings and threads, llama.cpp's perf counters,
their run.json entry, text through the target's vocabulary (LlamaText), and the built binaries
(`find_binary`, models/llama_files.py's).

Both runtimes build their contexts from `context_params`, so `llamacpp` and `llamacpp-native`
run with the same threads, batch size, context length and attention kernel. What it does not
do: read GGUF files or vocabularies (models/llama_files.py), or decode, sample or time anything
(runtimes/llamacpp.py and runtimes/llamacpp_native.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import llama_cpp

from spec_harness.core.config import RuntimeSettings
from spec_harness.core.limits import threads_of
from spec_harness.models import llama_files
from spec_harness.models.chat import PromptInput
from spec_harness.models.shape import pair_sizes, sizes_from_gguf

N_BATCH = 512  # tokens per llama_decode call at most (prompts are fed in chunks of this)


class LlamaText:
    """encode/decode/context_length for runtimes over a llama.cpp vocabulary. Mix in before
    Runtime; the runtime provides text_model (the target's llama_model), vocab and n_ctx."""

    text_model = None
    vocab = None
    n_ctx = 0

    def encode(self, prompt: PromptInput) -> list[int]:
        return llama_files.encode_prompt(self.text_model, self.vocab, prompt)

    def decode(self, ids: list[int]) -> str:
        return llama_files.detokenize(self.vocab, ids)

    @property
    def context_length(self) -> int:
        return self.n_ctx


def n_threads(settings: RuntimeSettings) -> tuple[int, int]:
    """(threads for one-token decodes, threads for batches): --threads for both, else one per
    physical core for both (llama.cpp's own default; on a 2-vCPU VM without SMT that is 2).

    Not llama-cpp-python's default (half the logical CPUs for decodes, all of them for batches):
    it gives 1 decode thread on such a VM, and on a shared machine all-CPU batches wait on busy
    cores (docs/findings.md). On a loaded machine pass --threads 1.
    """
    n = threads_of(settings.n_threads)
    return n, n


def single_threaded_torch():
    """Python-side sampling on one torch thread, restored afterwards.

    Softmax, top-k/top-p and multinomial on one vocabulary row gain nothing from threads, and
    torch's thread pool competes with llama.cpp's threads for the same cores (docs/findings.md).
    """
    from spec_harness.core.limits import torch_threads

    return torch_threads(1)


def context_params(settings: RuntimeSettings, n_ctx: int):
    """The context settings of both runtimes (flash attention off, as Llama() defaults it)."""
    t, tb = n_threads(settings)
    p = llama_cpp.llama_context_default_params()
    p.n_ctx = n_ctx
    p.n_batch = min(N_BATCH, n_ctx)
    p.n_ubatch = min(N_BATCH, n_ctx)
    p.n_seq_max = 1
    p.n_threads = t
    p.n_threads_batch = tb
    p.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    p.no_perf = False
    return p


# ---- llama.cpp's own counters ---------------------------------------------------------------------


@dataclass
class PerfCounters:
    """llama_perf_context of one context: llama.cpp books a decode of >1 token as prompt eval."""

    p_eval_ms: float
    eval_ms: float
    n_p_eval: int
    n_eval: int
    n_reused: int

    @classmethod
    def read(cls, ctx) -> "PerfCounters":
        d = llama_cpp.llama_perf_context(ctx)
        return cls(d.t_p_eval_ms, d.t_eval_ms, d.n_p_eval, d.n_eval, d.n_reused)

    def to_dict(self) -> dict:
        return {"p_eval_ms": self.p_eval_ms, "eval_ms": self.eval_ms, "n_p_eval": self.n_p_eval,
                "n_eval": self.n_eval, "n_reused": self.n_reused}


def reset_perf(*ctxs) -> None:
    for c in ctxs:
        llama_cpp.llama_perf_context_reset(c)


def gpu_layers(settings: RuntimeSettings) -> int:
    """The layers llama.cpp offloads: --n-gpu-layers, else every one (-1) where this build offloads
    (CUDA, Metal), else 0."""
    if settings.n_gpu_layers is not None:
        return settings.n_gpu_layers
    return -1 if llama_cpp.llama_supports_gpu_offload() else 0


def describe_files(paths: tuple, settings: RuntimeSettings) -> dict:
    """device / dtype fields for results rows: where the layers run and each GGUF's quantization
    (from its metadata: llama.cpp's own model description guesses sizes, "?B" for a small draft)."""
    from spec_harness.models.info import gguf_quantization

    n = gpu_layers(settings)
    gpu = n != 0 and bool(llama_cpp.llama_supports_gpu_offload())
    return {"device": f"gpu ({'all' if n < 0 else n} layers)" if gpu else "cpu",
            "dtype": " / ".join(dict.fromkeys(gguf_quantization(p) for p in paths))}


def library_versions() -> dict:
    return {"llama_cpp_python": llama_cpp.__version__,
            "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip()}


def describe(settings, paths: tuple, n_ctx: int) -> dict:
    """run.json's entry for a llama.cpp runtime: files, context, threads, library versions, each
    model's sizes as stored (models/shape.py) (read once per runtime: the GGUF metadata is slow
    to parse, and every results row asks)."""
    return dict(_describe(settings, tuple(paths), n_ctx))


@functools.lru_cache(maxsize=16)
def _describe(settings, paths: tuple, n_ctx: int) -> dict:
    t, tb = n_threads(settings)
    return {
        **describe_files(paths, settings),
        "target_gguf": paths[0], "draft_gguf": paths[1],
        "n_ctx": n_ctx, "n_threads": t, "n_threads_batch": tb,
        **library_versions(),
        "model_sizes": pair_sizes(sizes_from_gguf, str(paths[0]), str(paths[1])),
    }


# ---- llama.cpp's C++ tools, built by scripts/setup.sh beside the libraries llama_cpp loads ---------

# found by models/llama_files.py (the models floor runs llama-quantize too); re-exported for the runtimes
SETUP, find_binary = llama_files.SETUP, llama_files.find_binary


# The layer inputs a context keeps (llama.cpp's EAGLE-3 path: src/llama-ext.h, C++ names, not in
# llama.h and not bound by llama-cpp-python): set(ctx, layer, on) before decoding, then get(ctx,
# layer) -> float [n_tokens, n_embd] of the last decode's tokens, in batch order.
LAYER_INP = {"set": ("llama_set_embeddings_layer_inp", "_Z30llama_set_embeddings_layer_inpP13llama_contextjb"),
             "get": ("llama_get_embeddings_layer_inp", "_Z30llama_get_embeddings_layer_inpP13llama_contextj")}


@functools.cache
def layer_inputs():
    """(set, get) bound with ctypes from the libllama llama-cpp-python loaded, or ValueError
    naming what this build lacks."""
    import ctypes

    lib = llama_cpp.llama_cpp._lib
    fns = {}
    for role, names in LAYER_INP.items():
        fn = next((getattr(lib, n) for n in names if hasattr(lib, n)), None)
        if fn is None:
            raise ValueError(f"this llama.cpp build exports no {names[0]} (the layer inputs an EAGLE-3 head reads)")
        fns[role] = fn
    fns["set"].argtypes = [llama_cpp.llama_context_p_ctypes, ctypes.c_uint32, ctypes.c_bool]
    fns["set"].restype = None
    fns["get"].argtypes = [llama_cpp.llama_context_p_ctypes, ctypes.c_uint32]
    fns["get"].restype = ctypes.POINTER(ctypes.c_float)
    return fns["set"], fns["get"]


# ---- batched passes: the cost model under load ------------------------------------------------------


def batched_pass_s(path: str, settings: RuntimeSettings, n: int, tokens: int, depth: int = 64, repeats: int = 5) -> float:
    """Seconds of one llama_decode of n sequences x `tokens` tokens each, every sequence `depth`
    tokens deep (a decode step of n requests at once: tokens 1; a verify pass of n: gamma + 1),
    the median of `repeats` after one warm-up; the model at `path`, the settings' threads."""
    import statistics
    import time

    model = llama_files.load_model(path, "model", gpu_layers(settings))
    per = depth + tokens
    p = context_params(settings, n * per + 8)
    p.n_seq_max = n
    p.n_batch = p.n_ubatch = max(n * depth, n * tokens)
    p.kv_unified = True
    ctx = llama_cpp.llama_init_from_model(model, p)
    batch = llama_cpp.llama_batch_init(n * max(depth, tokens), 0, 1)
    try:
        if not ctx:
            raise RuntimeError(f"llama.cpp could not create a context for {n} sequences")
        mem = llama_cpp.llama_get_memory(ctx)
        vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))

        def decode(length: int, start: int) -> None:
            batch.n_tokens = n * length
            for s in range(n):
                for j in range(length):
                    i = s * length + j
                    batch.token[i] = (7 * i + 13) % vocab
                    batch.pos[i] = start + j
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = s
                    batch.logits[i] = j == length - 1 or length > 1
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError(f"llama_decode failed for {n} x {length} tokens")

        decode(depth, 0)
        times = []
        for _ in range(repeats + 1):
            t = time.perf_counter()
            decode(tokens, depth)
            llama_cpp.llama_synchronize(ctx)
            times.append(time.perf_counter() - t)
            for s in range(n):
                llama_cpp.llama_memory_seq_rm(mem, s, depth, -1)
        return statistics.median(times[1:])
    finally:
        llama_cpp.llama_batch_free(batch)
        if ctx:
            llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
