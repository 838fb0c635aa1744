"""Models without any Hub: tokenizer checks and their explanations, fingerprints, `models info`,
preset file patterns, a Hugging Face cache laid out by hand in a temporary folder, and the disk-full
path of the download helper."""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from spec_harness.models import shape
from spec_harness.harness.cli import main
from spec_harness.core.errors import HarnessError
from spec_harness.models import compat
from tests.fakehub import folder_files, write_gguf


def tokenizer(name: str, role: str = "target"):
    from transformers import AutoTokenizer

    from spec_harness.models.tiny import ensure_pair

    t, d = ensure_pair(name)
    return AutoTokenizer.from_pretrained(t if role == "target" else d)


class FakeTok:
    def __init__(self, vocab, **specials):
        self.vocab = vocab
        for k in compat.SPECIAL_KEYS:
            setattr(self, k, specials.get(k))

    def get_vocab(self):
        return dict(self.vocab)


# ---------------------------------------------------------------- tokenizer compatibility


def test_mismatch_names_the_ids_that_differ():
    with pytest.raises(HarnessError) as e:
        compat.check_tokenizers(tokenizer("tiny"), tokenizer("micro", "draft"))
    msg = str(e.value)
    assert msg.startswith("draft and target tokenizers differ (8 vs 257 ids (draft vs target)")
    assert "8 ids map to other tokens: 0-7" in msg and "249 ids only in the target: 8-256" in msg
    assert "e.g. id 0: target 'Ā' vs draft 'a'" in msg and "\n" not in msg


def test_special_token_mismatch_names_both_tokens():
    vocab = {"a": 0, "b": 1, "c": 2}
    with pytest.raises(HarnessError, match=r"eos_token_id: target 2 'c' vs draft 1 'b'"):
        compat.check_tokenizers(FakeTok(vocab, eos_token_id=2), FakeTok(vocab, eos_token_id=1))


def test_padded_embeddings_and_same_family_pass():
    compat.check_tokenizers(tokenizer("tiny"), tokenizer("tiny", "draft"))
    compat.check_tokenizers(tokenizer("tiny-padded"), tokenizer("tiny-padded", "draft"))  # 272 vs 264 rows


def test_id_ranges():
    assert compat.id_ranges([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10"
    assert compat.id_ranges(list(range(0, 20, 2)), limit=2) == "0, 2, ..."


def test_fingerprints_agree_across_formats_and_padding(tmp_path):
    hf = compat.fingerprint(*compat.hf_tokenizer_vocab(tokenizer("tiny")))
    assert hf == compat.fingerprint(*compat.hf_tokenizer_vocab(tokenizer("tiny-padded", "draft")))
    assert hf == compat.fingerprint(*compat.gguf_tokenizer_vocab(write_gguf(tmp_path / "a.gguf")))
    assert hf == compat.fingerprint(*compat.gguf_tokenizer_vocab(write_gguf(tmp_path / "p.gguf", extra_rows=5)))
    assert hf != compat.fingerprint(*compat.gguf_tokenizer_vocab(write_gguf(tmp_path / "e.gguf", eos=None)))
    assert hf != compat.fingerprint(*compat.hf_tokenizer_vocab(tokenizer("micro")))


# ---------------------------------------------------------------- models info


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def rows_of(output: str) -> dict[str, str]:
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in output.splitlines() if line.strip())


def test_info_of_a_gguf_file(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", n_layers=3, extra_rows=7)
    r = invoke("models", "info", str(path))
    assert r.exit_code == 0, r.output
    rows = rows_of(r.output)
    assert rows["architecture"] == "llama" and rows["layers"] == "3" and rows["hidden size"] == "64"
    assert rows["vocabulary"] == "257 tokenizer ids, 264 rows (padded)"
    assert rows["FLOPs/token"].startswith(f"{shape.flops_for(str(path)).flops():,} ")
    assert rows["format"].startswith("gguf (ALL_F32")


def test_info_of_an_hf_folder(tiny_pair):
    r = invoke("models", "info", tiny_pair.target)
    assert r.exit_code == 0, r.output
    rows = rows_of(r.output)
    assert rows["architecture"] == "LlamaForCausalLM (llama)" and rows["layers"] == "4"
    assert rows["vocabulary"] == "257 tokenizer ids, 257 embedding rows"
    assert rows["FLOPs/token"].startswith(f"{shape.flops_for(tiny_pair.target).flops():,} ")
    draft = rows_of(invoke("models", "info", tiny_pair.draft).output)
    assert draft["tokenizer"] == rows["tokenizer"] and draft["layers"] == "1"


@pytest.mark.parametrize("ref, needle", [
    ("/no/such/model.gguf", "GGUF file not found: /no/such/model.gguf"),
    ("/no/such/folder", "model not found: /no/such/folder"),
    ("embedded", "the embedded default pair is not built yet"),
    ("qwen2.5-0.5b-3b:Q4_K_M", "is not downloaded"),
])
def test_info_errors_are_one_line(cache, ref, needle):
    r = invoke("models", "info", ref)
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output


def test_info_of_a_preset_describes_both_models():
    r = invoke("models", "info", "tiny")
    assert r.exit_code == 0, r.output
    assert "[tiny target, hf]" in r.output and "[tiny draft, hf]" in r.output
    # the tiny preset carries HF folders and their GGUF exports: both pairs are compared
    assert "hf tokenizers of target and draft: the same" in r.output
    assert r.output.rstrip().endswith("gguf tokenizers of target and draft: the same")


# ---------------------------------------------------------------- presets and the cache


def test_quant_patterns_are_exact_case_insensitive_and_know_split_files():
    from spec_harness.models.presets import HubModel

    m = HubModel("target", gguf="x/y", file="Model-{quant}.gguf")
    files = ["Model-Q4_0.gguf", "Model-Q4_0_4_4.gguf", "model-q8_0.gguf", "README.md", "Model-Q4_K_M.gguf.part",
             "Model-Q6_K-00002-of-00002.gguf", "Model-Q6_K-00001-of-00002.gguf", "Model-F16-00001-of-00002.gguf"]
    assert m.quant_files(files) == {
        "Q4_0": ["Model-Q4_0.gguf"], "Q4_0_4_4": ["Model-Q4_0_4_4.gguf"], "Q8_0": ["model-q8_0.gguf"],
        "Q6_K": ["Model-Q6_K-00001-of-00002.gguf", "Model-Q6_K-00002-of-00002.gguf"],  # F16 lacks its 2nd shard
    }


def test_every_hub_preset_is_well_formed():
    from spec_harness.models.presets import hub_pair
    from spec_harness.models.presets import PRESETS

    hub = [n for n, p in PRESETS.items() if "target" in p]
    assert {"qwen2.5-0.5b-3b", "opt-125m-1.3b", "llama-3.2-1b-3b", "smollm2-135m-1.7b"} <= set(hub)
    for name in hub:
        pair = hub_pair(name)
        for m in pair.models:
            assert m.hf and m.hf.count("/") == 1
            if m.gguf:
                assert m.file.count("{quant}") == 1 and m.file.endswith(".gguf") and pair.quant
                assert list(m.quant_files([m.file.format(quant=pair.quant.lower())])) == [pair.quant]
    assert not hub_pair("opt-125m-1.3b").has_gguf


def put(cache: Path, repo: str, commit: str, files: dict[str, bytes], ref: str | None = "main") -> Path:
    """Lay out files as huggingface_hub does: blobs by hash, snapshot symlinks, refs/main."""
    root = cache / ("models--" + repo.replace("/", "--"))
    snap = root / "snapshots" / commit
    for name, data in files.items():
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        (snap / name).symlink_to(os.path.relpath(blob, (snap / name).parent))
    if ref:
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / ref).write_text(commit)
    return snap


@pytest.fixture
def cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "hub").mkdir()
    return tmp_path / "hub"


OLD, NEW = "a" * 40, "b" * 40


def test_resolve_pair_maps_a_cached_preset_to_local_paths(cache, tiny_pair, tmp_path, capsys):
    from spec_harness.models.presets import resolve_pair

    g = write_gguf(tmp_path / "g.gguf").read_bytes()
    put(cache, "Qwen/Qwen2.5-3B-Instruct-GGUF", OLD, {"qwen2.5-3b-instruct-q4_k_m.gguf": g}, ref=None)
    put(cache, "Qwen/Qwen2.5-3B-Instruct-GGUF", NEW, {"qwen2.5-3b-instruct-q8_0.gguf": g})  # main moved on
    put(cache, "Qwen/Qwen2.5-0.5B-Instruct-GGUF", NEW, {"qwen2.5-0.5b-instruct-q4_k_m.gguf": g,
                                                         "qwen2.5-0.5b-instruct-q8_0.gguf": g})
    spec = resolve_pair("qwen2.5-0.5b-3b")
    assert spec.target is None and spec.draft is None  # no HF files: torch/hf will say so
    assert spec.target_gguf.endswith(f"{OLD}/qwen2.5-3b-instruct-q4_k_m.gguf")  # the default quant, in an old revision
    assert "no HF weights (torch, hf runtimes) in the cache" in capsys.readouterr().err
    assert resolve_pair("qwen2.5-0.5b-3b:q8_0").name == "qwen2.5-0.5b-3b:Q8_0"
    assert resolve_pair("qwen2.5-0.5b-3b", draft="self").draft_gguf == spec.target_gguf

    put(cache, "Qwen/Qwen2.5-3B-Instruct", NEW, folder_files(tiny_pair.target))
    put(cache, "Qwen/Qwen2.5-0.5B-Instruct", NEW, folder_files(tiny_pair.draft))
    spec = resolve_pair("qwen2.5-0.5b-3b")
    assert Path(spec.target, "config.json").is_file() and Path(spec.draft).parent.name == "snapshots"


def test_an_incomplete_hf_snapshot_does_not_count(cache, tiny_pair):
    from spec_harness.models.hub import CacheIndex
    from spec_harness.models.presets import resolve_pair

    files = folder_files(tiny_pair.target)
    files["model.safetensors.index.json"] = b'{"weight_map": {"a": "model-00001-of-00002.safetensors"}}'
    put(cache, "Qwen/Qwen2.5-3B-Instruct", NEW, files)
    assert CacheIndex().hf_snapshot("Qwen/Qwen2.5-3B-Instruct") is None
    with pytest.raises(HarnessError, match="pair qwen2.5-0.5b-3b is not downloaded"):
        resolve_pair("qwen2.5-0.5b-3b")


def test_builtin_and_embedded_pairs():
    from spec_harness.models.presets import resolve_pair

    with pytest.raises(HarnessError, match="has no quantizations"):
        resolve_pair("tiny:Q4_K_M")
    with pytest.raises(HarnessError, match="embedded default pair is not built yet"):
        resolve_pair("embedded")


def test_disk_full_while_writing_is_one_line(monkeypatch):
    import huggingface_hub

    from spec_harness.models import download

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", full)
    with pytest.raises(HarnessError, match=r"^disk full in .*set HF_HOME to a larger disk"):
        download.fetch(download.Fetch("target", "gguf", "org/repo", ["m-q4_k_m.gguf"]))


def test_a_gguf_is_converted_once_and_reloaded_from_the_cache(tiny_pair, tmp_path, monkeypatch):
    """Second load of a .gguf comes from the cached folder: same logits, same tokenizer; a changed
    file (new mtime) is converted again, and an unwritable cache falls back to a direct load."""
    import os

    import torch

    from spec_harness.models.gguf_writer import write_gguf
    from spec_harness.models.loading import load_hf_model, load_hf_tokenizer

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    src = load_hf_model(tiny_pair.target, "target", torch.float32, "cpu")
    tok = load_hf_tokenizer(tiny_pair.target, "target")
    gguf = write_gguf(src, tmp_path / "t.gguf", qtype="f32", tokenizer=tok, reader="transformers")
    ids = torch.tensor([tok.encode("The water cycle moves water")])
    first = load_hf_model(str(gguf), "target", torch.float32, "cpu")
    folders = list((tmp_path / "cache" / "gguf-hf").iterdir())
    assert len(folders) == 1 and (folders[0] / "config.json").exists()
    again = load_hf_model(str(gguf), "target", torch.float32, "cpu")
    with torch.no_grad():
        assert torch.equal(first(ids).logits, again(ids).logits)
        assert torch.allclose(again(ids).logits, src(ids).logits, atol=1e-4)
    assert load_hf_tokenizer(str(gguf), "target").encode("hello world") == tok.encode("hello world")
    assert len(list((tmp_path / "cache" / "gguf-hf").iterdir())) == 1
    os.utime(gguf, ns=(1, 1))
    load_hf_tokenizer(str(gguf), "target")
    assert len(list((tmp_path / "cache" / "gguf-hf").iterdir())) == 2
    (tmp_path / "ro").write_text("a file, so no folder can be made under it")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "ro"))
    direct = load_hf_model(str(gguf), "target", torch.float32, "cpu")
    with torch.no_grad():
        assert torch.equal(direct(ids).logits, first(ids).logits)


# ---------------------------------------------------------------- labels


def test_pairs_are_labelled_from_their_files():
    """Name from the file, quantization from the metadata, and for a name without a size the shape,
    the parameters counted from the tensors and the file size; never llama.cpp's '?B'."""
    from spec_harness.models.info import model_label, pair_label
    from spec_harness.models.presets import DRAFT_GGUF, resolve_pair
    from spec_harness.models.smollm2 import smollm2_gguf

    assert model_label(str(smollm2_gguf())) == "SmolLM2-135M-Instruct Q4_1"
    draft = model_label(str(DRAFT_GGUF))
    assert draft.startswith("smollm2-draft 4×256 16M Q8_0 (") and draft.endswith(" MiB)") and "?" not in draft
    spec = resolve_pair("tiny")
    assert pair_label(spec.target, spec.draft) == "target 4×64 ← draft 1×64"
    assert pair_label(spec.target_gguf, spec.target_gguf).endswith("← itself")
    assert pair_label(spec.target_gguf, spec.draft_gguf).startswith("target 4×64 181K F32 (")
