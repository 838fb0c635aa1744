"""What both llama.cpp runtimes share: context settings, tokenization through the GGUF's own
vocabulary (and chat template), the draft/target vocabulary check, and llama.cpp's perf counters.

Both runtimes build their contexts from `context_params`, so `llamacpp` and `llamacpp-native`
run with the same threads, batch size, context length and attention kernel. What it does not
do: decode, sample or time anything (runtimes/llamacpp.py and runtimes/llamacpp_native.py).
"""

from __future__ import annotations

import ctypes
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import llama_cpp

from harness.config import RuntimeSettings
from harness.errors import HarnessError

N_BATCH = 512  # tokens per llama_decode call at most (prompts are fed in chunks of this)
DEFAULT_N_CTX = 4096  # capped by the model's training context; --n-ctx overrides


def quiet_logs(verbose: bool = False) -> None:
    """llama.cpp logs every load to stderr; keep errors only unless verbose."""
    logging.getLogger("llama-cpp-python").setLevel(logging.DEBUG if verbose else logging.ERROR)


def physical_cores() -> int:
    """Physical cores this process may use (SMT siblings counted once), from Linux's CPU topology;
    elsewhere, or when it cannot be read, half the logical CPUs."""
    try:
        cpus = os.sched_getaffinity(0)
        cores = {Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read_text().strip() for c in cpus}
        return max(len(cores), 1)
    except (AttributeError, OSError):
        return max((os.cpu_count() or 2) // 2, 1)


def n_threads(settings: RuntimeSettings) -> tuple[int, int]:
    """(threads for one-token decodes, threads for batches): --n-threads for both, else one per
    physical core for both (llama.cpp's own default; on a 2-vCPU VM without SMT that is 2).

    Not llama-cpp-python's default (half the logical CPUs for decodes, all of them for batches):
    it gives 1 decode thread on such a VM, and on a shared machine all-CPU batches wait on busy
    cores (a 40-token SmolLM2 prefill took 12 s instead of 1 s here under load). On a loaded
    machine pass --n-threads 1.
    """
    n = settings.n_threads or physical_cores()
    return n, n


@contextmanager
def single_threaded_torch():
    """Python-side sampling on one torch thread, restored afterwards.

    Softmax, top-k/top-p and multinomial on one vocabulary row gain nothing from threads, and
    torch's thread pool competes with llama.cpp's threads for the same cores: measured on a
    loaded 2-core VM, a [1, 257] softmax took 4 ms with 2 torch threads and 0.02 ms with one.
    """
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def check_gguf(path: Optional[str], role: str) -> str:
    if not path:
        raise HarnessError(f"no {role} GGUF file: pass --{role}-gguf PATH (or a preset with GGUF files)")
    if not Path(path).expanduser().is_file():
        raise HarnessError(f"{role} GGUF file not found: {path}")
    return str(Path(path).expanduser())


def resolve_n_ctx(settings: RuntimeSettings, n_ctx_train: int) -> int:
    return settings.n_ctx or min(n_ctx_train or DEFAULT_N_CTX, DEFAULT_N_CTX)


def model_params(settings: RuntimeSettings):
    p = llama_cpp.llama_model_default_params()
    p.n_gpu_layers = settings.n_gpu_layers
    return p


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


def load_model(path: str, settings: RuntimeSettings, role: str):
    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(path.encode(), model_params(settings))
    if not model:
        raise HarnessError(f"llama.cpp could not load the {role} GGUF file {path} (corrupt, or an architecture this build does not know)")
    return model


def n_ctx_train(path: str, role: str) -> int:
    """The training context of a GGUF file, reading its header and vocabulary only."""
    llama_cpp.llama_backend_init()
    p = llama_cpp.llama_model_default_params()
    p.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), p)
    if not model:
        raise HarnessError(f"llama.cpp could not read the {role} GGUF file {path}")
    try:
        return llama_cpp.llama_model_n_ctx_train(model)
    finally:
        llama_cpp.llama_model_free(model)


# ---- vocabulary --------------------------------------------------------------------------------


def token_text(vocab, i: int) -> str:
    return llama_cpp.llama_vocab_get_text(vocab, i).decode("utf-8", errors="replace")


def real_vocab(vocab) -> int:
    """Ids the tokenizer really has: n_tokens minus trailing unused rows (padded embeddings)."""
    n = llama_cpp.llama_vocab_n_tokens(vocab)
    while n > 0 and llama_cpp.llama_vocab_get_attr(vocab, n - 1) & llama_cpp.LLAMA_TOKEN_ATTR_UNUSED:
        n -= 1
    return n


def check_vocabularies(target_vocab, draft_vocab) -> int:
    """Raise HarnessError when the draft speaks another vocabulary; -> the common id count V."""
    vt, vd = real_vocab(target_vocab), real_vocab(draft_vocab)
    if vt != vd:
        raise HarnessError(f"draft and target GGUF vocabularies differ in size ({vd} vs {vt} ids): choose a draft of the target's model family")
    diffs = [i for i in range(vt) if llama_cpp.llama_vocab_get_text(target_vocab, i) != llama_cpp.llama_vocab_get_text(draft_vocab, i)]
    if diffs:
        ex = "; ".join(f"id {i}: target {token_text(target_vocab, i)!r} vs draft {token_text(draft_vocab, i)!r}" for i in diffs[:3])
        raise HarnessError(f"draft and target GGUF vocabularies differ ({len(diffs)} tokens; {ex}): choose a draft of the target's model family")
    for name in ("bos", "eos"):
        f = getattr(llama_cpp, f"llama_vocab_{name}")
        if f(target_vocab) != f(draft_vocab):
            raise HarnessError(f"draft and target GGUF {name} tokens differ ({f(draft_vocab)} vs {f(target_vocab)})")
    return vt


def tokenize(vocab, text: str, add_special: bool, parse_special: bool) -> list[int]:
    data = text.encode("utf-8")
    cap = len(data) + 8
    buf = (llama_cpp.llama_token * cap)()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, cap, add_special, parse_special)
    if n < 0:  # more tokens than bytes + 8 cannot happen for BPE, but follow the API
        cap = -n
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, cap, add_special, parse_special)
    return list(buf[:n])


def detokenize(vocab, ids: list[int]) -> str:
    """Ids -> text, special tokens left out (as the HF runtimes' skip_special_tokens=True)."""
    out = bytearray()
    buf = ctypes.create_string_buffer(256)
    for t in ids:
        n = llama_cpp.llama_token_to_piece(vocab, t, buf, len(buf), 0, False)
        out += buf.raw[: max(n, 0)]
    return out.decode("utf-8", errors="replace")


def encode_prompt(model, vocab, prompt: str) -> list[int]:
    """Prompt text -> ids: through the GGUF's chat template when it has one, else raw text,
    with the BOS the vocabulary asks for (as models/loading.encode_prompt does for HF)."""
    template = llama_cpp.llama_model_chat_template(model, None)
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    if not template:
        return tokenize(vocab, prompt, add_bos, False)
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    bos, eos = llama_cpp.llama_vocab_bos(vocab), llama_cpp.llama_vocab_eos(vocab)
    fmt = Jinja2ChatFormatter(template.decode("utf-8"), token_text(vocab, eos) if eos >= 0 else "",
                              token_text(vocab, bos) if bos >= 0 else "", add_generation_prompt=True)
    text = fmt(messages=[{"role": "user", "content": prompt}]).prompt
    ids = tokenize(vocab, text, False, True)
    if add_bos and bos >= 0 and (not ids or ids[0] != bos):
        ids = [bos] + ids
    return ids


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


def model_desc(model) -> str:
    buf = ctypes.create_string_buffer(256)
    llama_cpp.llama_model_desc(model, buf, len(buf))
    return buf.value.decode(errors="replace")


def describe_models(models: list, settings: RuntimeSettings) -> dict:
    """device / dtype fields for results rows: where the layers run and the GGUF's weight type."""
    gpu = settings.n_gpu_layers != 0 and bool(llama_cpp.llama_supports_gpu_offload())
    return {"device": f"gpu ({settings.n_gpu_layers} layers)" if gpu else "cpu",
            "dtype": " / ".join(dict.fromkeys(model_desc(m) for m in models))}


def library_versions() -> dict:
    return {"llama_cpp_python": llama_cpp.__version__,
            "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip()}


def describe(models: list, settings, paths: tuple, n_ctx: int) -> dict:
    """run.json's entry for a llama.cpp runtime: models, files, context, threads, library versions."""
    t, tb = n_threads(settings)
    return {
        **describe_models(models, settings),
        "target_gguf": paths[0], "draft_gguf": paths[1],
        "n_ctx": n_ctx, "n_threads": t, "n_threads_batch": tb,
        **library_versions(),
    }
