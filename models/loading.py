"""Loading Hugging Face models and tokenizers with one-line errors, and prompt encoding.

A path that does not exist and is not a cached Hugging Face id, a folder without config.json, or
an id that is not in the cache while offline: each becomes a HarnessError naming the fix.

A .gguf file is converted by transformers once (dequantized to float32, tokenizer rebuilt from its
metadata) and the result kept as a Hugging Face folder under $HARNESS_CACHE/gguf-hf (default
~/.cache/spec-harness), keyed by the file's path, size and modification time: transformers reads
GGUF metadata in Python, slowly (`_gguf_parsed_once` makes each file's metadata parsed once per
conversion, not once per part transformers reads), and a saved folder loads far faster
(docs/findings.md). Where the cache cannot be written, the file is loaded directly. `model_folder`
gives the same folder to a library that loads Hugging Face folders itself (mlx-lm); `float_folder`
converts a target variant (models/quantize.py) with the tokenizer of its source's folder.
"""

from __future__ import annotations

import functools
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from spec_harness.core.errors import HarnessError
from spec_harness.models import chat
from spec_harness.models.chat import PromptInput


def cache_root() -> Path:
    """Where the harness keeps what it builds: converted GGUF files, the tiny pairs ($HARNESS_CACHE)."""
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "spec-harness"))


def looks_like_path(ref: str) -> bool:
    """Hugging Face ids are "name" or "org/name"; anything else is meant as a local path."""
    return ref.startswith((".", "/", "~")) or ref.count("/") > 1


def _check_ref(ref: str, role: str) -> tuple[str, dict]:
    """-> (ref, extra from_pretrained kwargs). A .gguf file loads through transformers' gguf_file."""
    if ref is None:
        raise HarnessError(f"no {role} model given: pass --{role} PATH_OR_ID or --pair NAME")
    p = Path(ref).expanduser()
    if p.suffix == ".gguf":
        if not p.is_file():
            raise HarnessError(f"{role} model file not found: {ref} (check the path, or download it with `harness models download`)")
        converted = _converted_gguf(p, role)
        return (str(converted), {}) if converted else (str(p.parent), {"gguf_file": p.name})
    if p.exists():
        if p.is_dir() and not (p / "config.json").exists():
            raise HarnessError(f"{role} model folder {ref} has no config.json: point at a Hugging Face model folder or a .gguf file")
        return str(p), {}
    if looks_like_path(ref):
        raise HarnessError(f"{role} model not found: {ref} (check the path, or give a Hugging Face id)")
    return ref, {}


def float_folder(gguf, tokenizer_from) -> Path:
    """The cached float32 Hugging Face folder of a GGUF file whose tokenizer is the one of the
    folder `tokenizer_from` (a target variant of models/quantize.py: its vocabulary metadata may be
    one transformers cannot read, the tiny pairs'); HarnessError where the cache cannot be written."""
    p = Path(gguf).expanduser()
    folder = _converted_gguf(p, "target", _resolved(tokenizer_from))
    if folder is None:
        raise HarnessError(f"the float32 folder of {p} could not be written under {cache_root() / 'gguf-hf'}; "
                           "set HARNESS_CACHE to a writable folder")
    return folder


def _resolved(folder) -> str:
    return str(Path(folder).expanduser().resolve())


def float_folder_made(gguf, tokenizer_from) -> bool:
    """Whether float_folder(gguf, tokenizer_from) is cached already (a progress line is due otherwise)."""
    return (_conversion_folder(Path(gguf).expanduser(), _resolved(tokenizer_from)) / "config.json").exists()


def converted_folder(gguf) -> Optional[Path]:
    """The cached float32 folder the runtimes that read Hugging Face folders run for a GGUF file,
    where it was made (None otherwise)."""
    p = Path(gguf).expanduser()
    folder = _conversion_folder(p) if p.is_file() else None
    return folder if folder is not None and (folder / "config.json").exists() else None


def _conversion_folder(p: Path, tokenizer_from: Optional[str] = None) -> Path:
    """Where the float32 folder of GGUF file p is cached: keyed by its path, size and modification
    time (and the folder its tokenizer comes from, where given)."""
    import hashlib

    st = p.stat()
    stamp = f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}" + (f"|tokenizer {tokenizer_from}" if tokenizer_from else "")
    return cache_root() / "gguf-hf" / f"{p.stem}-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}"


def _converted_gguf(p: Path, role: str, tokenizer_from: Optional[str] = None):
    """The cached Hugging Face folder of GGUF file p (its tokenizer from the folder `tokenizer_from`
    where given, else from the file), converting it first if needed; None if the cache cannot be
    written (the caller then loads the GGUF directly)."""
    import shutil

    folder = _conversion_folder(p, tokenizer_from)
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    try:
        with _gguf_parsed_once():
            model = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=torch.float32)
            model.hf_quantizer = None  # its weights are dequantized already: they save as plain float32
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            tok = AutoTokenizer.from_pretrained(tokenizer_from) if tokenizer_from else \
                AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
            tok.save_pretrained(tmp)
        model.save_pretrained(tmp)
        tmp.replace(folder)  # atomic: a folder with config.json is always complete
    except OSError:
        return folder if (folder / "config.json").exists() else None  # another process won the race
    except ValueError as e:
        raise _hub_error(str(p), role, e) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


@contextmanager
def _gguf_parsed_once():
    """transformers reads a GGUF file three times (the config, the weights, the tokenizer), each
    time opening it with gguf.GGUFReader (which parses every metadata string into a numpy view)
    and converting every metadata value in Python, and it builds gguf's tensor-name map once per
    module of the model (docs/findings.md has the times). Within this
    block each file is opened once, its metadata converted once and the name map built once per
    (architecture, layers); what is handed out again is a copy or read-only."""
    import copy
    import functools

    import gguf
    import transformers.modeling_gguf_pytorch_utils as tg

    reader_cls, name_map, load = gguf.GGUFReader, gguf.get_tensor_name_map, tg.load_gguf_checkpoint
    readers, metadata = {}, {}

    def reader(path, mode="r"):
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = reader_cls(path, mode)
        return readers[key]

    def load_once(path, return_tensors=False, **kw):
        if return_tensors or kw:
            return load(path, return_tensors, **kw)
        key = os.path.realpath(path)
        if key not in metadata:
            metadata[key] = load(path, False)
        return copy.deepcopy(metadata[key])

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(None)(name_map)
    tg.load_gguf_checkpoint = load_once
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map, tg.load_gguf_checkpoint = reader_cls, name_map, load


def _hub_error(ref: str, role: str, e: Exception) -> HarnessError:
    if Path(ref).expanduser().exists():  # a local file the library could not read
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return HarnessError(f"cannot load {role} model {ref}: {msg}")
    return HarnessError(
        f"cannot load {role} model {ref!r}: not a local folder and not in the Hugging Face cache "
        f"({type(e).__name__}); run `harness models download` while online, or pass a local path"
    )


def model_folder(ref: str, role: str) -> str:
    """A model reference as a library that reads Hugging Face folders itself loads it (mlx-lm's
    load()): a local folder, a .gguf file's converted float32 folder (converting it first), or a
    Hub id; HarnessError as for loading. A .gguf file whose folder cannot be written has none."""
    path, kw = _check_ref(ref, role)
    if kw:  # transformers alone would read this GGUF file in place: there is no folder to give
        raise HarnessError(f"{role} model {ref}: its Hugging Face folder could not be written under "
                           f"{cache_root() / 'gguf-hf'}; set HARNESS_CACHE to a writable folder")
    return path


def load_hf_tokenizer(ref: str, role: str):
    """The tokenizer of a model, loaded once per process and folder (runtimes of one run share it:
    nothing here changes a tokenizer after loading it)."""
    path, kw = _check_ref(ref, role)
    try:
        return _tokenizer(path, tuple(sorted(kw.items())))
    except (OSError, ValueError) as e:
        raise _hub_error(ref, role, e) from None


@functools.lru_cache(maxsize=8)
def _tokenizer(path: str, kw: tuple):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, **dict(kw))


def load_hf_model(ref: str, role: str, dtype, device: str):
    from transformers import AutoModelForCausalLM

    path, kw = _check_ref(ref, role)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kw)
    except TypeError:  # transformers < 4.56 calls it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype, **kw)
    except (OSError, ValueError) as e:
        raise _hub_error(ref, role, e) from None
    return model.to(device).eval()


def encode_prompt(tokenizer, prompt: PromptInput) -> list[int]:
    """A prompt text or chat messages (models/chat.py) -> ids: through the chat template when the
    tokenizer has one, else the raw text."""
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(chat.messages(prompt), add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)
    return tokenizer.encode(chat.plain(prompt), add_special_tokens=False)
