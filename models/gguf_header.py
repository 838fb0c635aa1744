"""A GGUF file's metadata and tensor table, read from its header alone.

gguf.GGUFReader maps the whole file and builds a numpy view per part of every metadata value: for a
vocabulary of 49,152 tokens and as many merges that is about a million views, paid by every
runtime's description and every report (the time: docs/findings.md). This reader parses the same
header (format versions 2 and 3) with struct in one pass, and keeps what the
harness asks of a file: each key's value (`fields`: scalars as Python values, arrays as lists) and
each tensor's name, dimensions (GGUF's order, fastest first), type, element and byte counts.
What it does not do: read tensor data, write files (models/gguf_writer.py), or check a model's
meaning (models/shape.py, models/compat.py).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
# GGUF value types -> struct format of one item; 8 (string) and 9 (array) are read by hand
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


class GgufFormatError(ValueError):
    """The file is not a GGUF file this reader understands (one line says why)."""


@dataclass(frozen=True)
class GgufTensor:
    name: str
    shape: tuple[int, ...]  # as stored: ne0 (the fastest dimension) first
    tensor_type: Any  # gguf.GGMLQuantizationType
    n_elements: int
    n_bytes: int


class GgufHeader:
    """`fields` (key -> value) and `tensors` of the GGUF file at `path`."""

    def __init__(self, path):
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

        self.path = Path(path)
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            self._buf, self._pos = buf, len(MAGIC)
            try:
                if buf[:4] != MAGIC:
                    raise GgufFormatError(f"not a GGUF file (it starts with {bytes(buf[:4])!r}, not {MAGIC!r})")
                version, n_tensors, n_kv = self._read("I"), self._read("Q"), self._read("Q")
                if version not in (2, 3):
                    raise GgufFormatError(f"GGUF version {version} (this reader knows 2 and 3)")
                self.fields: dict[str, Any] = {}
                for _ in range(n_kv):
                    key = self._string()
                    self.fields[key] = self._value(self._read("I"))
                self.tensors: list[GgufTensor] = []
                for _ in range(n_tensors):
                    name = self._string()
                    dims = tuple(self._read("Q") for _ in range(self._read("I")))
                    kind = GGMLQuantizationType(self._read("I"))
                    self._read("Q")  # the data's offset: not read here
                    n = 1
                    for d in dims:
                        n *= d
                    block, size = GGML_QUANT_SIZES[kind]
                    self.tensors.append(GgufTensor(name, dims, kind, n, n * size // block))
            except (struct.error, IndexError) as e:
                raise GgufFormatError(f"its header ends early ({e})") from None
            finally:
                self._buf = None

    def _read(self, fmt: str):
        (v,) = struct.unpack_from("<" + fmt, self._buf, self._pos)
        self._pos += struct.calcsize(fmt)
        return v

    def _string(self) -> str:
        n = self._read("Q")
        raw = self._buf[self._pos:self._pos + n]
        if len(raw) != n:
            raise GgufFormatError("a string runs past the end of the file")
        self._pos += n
        return raw.decode("utf-8", errors="replace")

    def _value(self, kind: int):
        if kind == STRING:
            return self._string()
        if kind == ARRAY:
            item, count = self._read("I"), self._read("Q")
            if item in SCALARS:
                fmt = f"<{count}{SCALARS[item]}"
                values = list(struct.unpack_from(fmt, self._buf, self._pos))
                self._pos += struct.calcsize(fmt)
                return values
            return [self._value(item) for _ in range(count)]
        if kind in SCALARS:
            return self._read(SCALARS[kind])
        raise GgufFormatError(f"unknown metadata value type {kind}")
