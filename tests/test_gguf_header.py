"""models/gguf_header.py reads what gguf.GGUFReader reads of a header (every key's value, every
tensor's name, shape, type and sizes), and a file that is not GGUF, or is cut short, is one line."""

from pathlib import Path

import gguf
import numpy as np
import pytest

from spec_harness.core.errors import HarnessError
from spec_harness.models.gguf_header import GgufHeader
from spec_harness.models.shape import open_gguf

DRAFT = Path(__file__).resolve().parents[1] / "models" / "default" / "smollm2-draft.gguf"


def _same_as_gguf_reader(path):
    ours, theirs = GgufHeader(path), gguf.GGUFReader(str(path))
    fields = {k: f.contents() for k, f in theirs.fields.items() if not k.startswith("GGUF.")}  # its own pseudo-keys
    assert set(ours.fields) == set(fields)
    for k, v in fields.items():
        if isinstance(v, float) or (isinstance(v, list) and v and isinstance(v[0], float)):
            assert np.allclose(ours.fields[k], v), k
        else:
            assert ours.fields[k] == v, k
    assert [(t.name, t.shape, t.tensor_type, t.n_elements, t.n_bytes) for t in ours.tensors] == [
        (t.name, tuple(int(d) for d in t.shape), t.tensor_type, int(t.n_elements), int(t.n_bytes)) for t in theirs.tensors]
    return ours


def test_the_shipped_draft_and_a_tiny_f32_file_read_as_gguf_reads_them(tiny_gguf):
    draft = _same_as_gguf_reader(DRAFT)
    assert len(draft.fields["tokenizer.ggml.tokens"]) == 49152 and draft.fields["general.architecture"] == "llama"
    assert {t.tensor_type.name for t in draft.tensors} >= {"Q8_0", "F32"}
    _same_as_gguf_reader(tiny_gguf.target_gguf)


def test_a_file_that_is_not_gguf_or_is_cut_short_is_one_line(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(HarnessError, match="not a GGUF file"):
        open_gguf(bad)
    bad.write_bytes(DRAFT.read_bytes()[:200_000])  # inside the vocabulary
    with pytest.raises(HarnessError, match="cannot read GGUF file .*ends early|runs past"):
        open_gguf(bad)
