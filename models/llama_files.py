"""GGUF files as llama.cpp reads them: loading a model (quietly, with one-line errors), what the file
says of itself (name, file type, shape, training context, parameters), its vocabulary (the real ids, text, tokenization and detokenization), its chat template,
and the check that a draft speaks its target's vocabulary; and where llama.cpp's C++ tools are
(`find_binary`: llama-server, llama-bench, llama-quantize, built by scripts/setup.sh).

Shared by the llama.cpp runtimes and by the teacher data of models/teacher_data.py, so a prompt is
encoded the same way wherever llama.cpp runs it. What it does not do: create contexts, decode,
sample or time anything (runtimes/llama_common.py, runtimes/llamacpp.py).
"""

from __future__ import annotations

import ctypes
import functools
import logging
from pathlib import Path
from typing import Optional

import llama_cpp

from spec_harness.core.errors import HarnessError
from spec_harness.models import chat
from spec_harness.models.chat import PromptInput


LOGGER = "llama-cpp-python"  # llama-cpp-python prints llama.cpp's log lines at or above this logger's level


def quiet_logs() -> None:
    """llama.cpp logs every load to stderr: errors only, unless the command line asked for more
    (harness/console.py sets the level first; an unset level is taken as quiet)."""
    log = logging.getLogger(LOGGER)
    if log.level == logging.NOTSET:
        log.setLevel(logging.ERROR)


def verbose() -> bool:
    """Whether llama.cpp's own log lines are wanted (for Llama(verbose=...))."""
    return logging.NOTSET < logging.getLogger(LOGGER).level <= logging.DEBUG


def check_gguf(path: Optional[str], role: str) -> str:
    """The path of an existing GGUF file, or one line saying which flag gives it."""
    if not path:
        raise HarnessError(f"no {role} GGUF file: pass --{role}-gguf PATH (or a preset with GGUF files)")
    if not Path(path).expanduser().is_file():
        raise HarnessError(f"{role} GGUF file not found: {path}")
    return str(Path(path).expanduser())


def load_model(path: str, role: str, n_gpu_layers: int = 0, vocab_only: bool = False):
    """A llama_model from a GGUF file (vocab_only: its vocabulary and metadata), or one HarnessError line."""
    quiet_logs()
    llama_cpp.llama_backend_init()
    p = llama_cpp.llama_model_default_params()
    p.n_gpu_layers = n_gpu_layers
    p.vocab_only = vocab_only
    model = llama_cpp.llama_model_load_from_file(path.encode(), p)
    if not model:
        raise HarnessError(f"llama.cpp could not load the {role} GGUF file {path} (corrupt, or an architecture this build does not know)")
    return model


@functools.lru_cache(maxsize=64)
def _facts(path: str, mtime_ns: int) -> dict:
    llama_cpp.llama_backend_init()
    p = llama_cpp.llama_model_default_params()
    p.vocab_only = True  # header and vocabulary only, read by llama.cpp (far faster than Python's gguf reader)
    model = llama_cpp.llama_model_load_from_file(path.encode(), p)
    if not model:
        raise HarnessError(f"llama.cpp could not read the GGUF file {path} (corrupt, or an architecture this build does not know)")
    try:
        buf = ctypes.create_string_buffer(512)

        def meta(key: str):
            n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
            return buf.value.decode("utf-8", errors="replace") if n >= 0 else None

        arch = meta("general.architecture") or "?"
        as_int = lambda v: int(v) if v and v.isdigit() else None  # noqa: E731
        return {"name": meta("general.name"), "file_type": as_int(meta("general.file_type")),
                "layers": as_int(meta(f"{arch}.block_count")), "width": as_int(meta(f"{arch}.embedding_length")),
                "context": as_int(meta(f"{arch}.context_length")), "n_params": int(llama_cpp.llama_model_n_params(model))}
    finally:
        llama_cpp.llama_model_free(model)


def facts(path: str) -> dict:
    """What a GGUF file says of itself, read by llama.cpp: name, file type, layers, width, training
    context and parameter count (once per file version)."""
    quiet_logs()
    p = Path(path).expanduser()
    return dict(_facts(str(p.resolve()), p.stat().st_mtime_ns))


def n_ctx_train(path: str, role: str) -> int:
    """The training context of a GGUF file (0 when it does not say)."""
    return facts(path)["context"] or 0


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


def encode_prompt(model, vocab, prompt: PromptInput) -> list[int]:
    """A prompt text or chat messages (models/chat.py) -> ids: through the GGUF's chat template
    when it has one, else the raw text,
    with the BOS the vocabulary asks for (as models/loading.encode_prompt does for HF)."""
    template = llama_cpp.llama_model_chat_template(model, None)
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    if not template:
        return tokenize(vocab, chat.plain(prompt), add_bos, False)
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    bos, eos = llama_cpp.llama_vocab_bos(vocab), llama_cpp.llama_vocab_eos(vocab)
    fmt = Jinja2ChatFormatter(template.decode("utf-8"), token_text(vocab, eos) if eos >= 0 else "",
                              token_text(vocab, bos) if bos >= 0 else "", add_generation_prompt=True)
    text = fmt(messages=chat.messages(prompt)).prompt
    ids = tokenize(vocab, text, False, True)
    if add_bos and bos >= 0 and (not ids or ids[0] != bos):
        ids = [bos] + ids
    return ids


# ---- llama.cpp's C++ tools, built by scripts/setup.sh beside the libraries llama_cpp loads ---------

SETUP = "scripts/setup.sh"


def tool_places(name: str) -> list[Path]:
    """Where scripts/setup.sh puts llama.cpp's tool `name`: beside llama_cpp's own libraries (the
    same build), and beside the environment's Python (a link to it)."""
    import sys

    return [Path(llama_cpp.__file__).parent / "lib" / name, Path(sys.executable).parent / name]


def find_binary(name: str) -> str:
    """The path of llama.cpp's `name` (llama-server, llama-bench, llama-quantize): $HARNESS_<NAME>
    if set, else the copy scripts/setup.sh puts beside llama_cpp's own libraries (same build), else
    the PATH. RuntimeUnavailable (one line naming the set-up command) when there is none."""
    import os
    import shutil

    from spec_harness.core.errors import RuntimeUnavailable

    env = f"HARNESS_{name.upper().replace('-', '_')}"
    if os.environ.get(env):
        p = Path(os.environ[env]).expanduser()
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        raise RuntimeUnavailable(f"{env}={p} is not an executable file: unset it to use the {name} {SETUP} builds")
    for p in tool_places(name):
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    found = shutil.which(name)
    if found:
        return found
    raise RuntimeUnavailable(f"{name} is not built: run {SETUP} (it builds llama.cpp's tools beside llama-cpp-python)")
