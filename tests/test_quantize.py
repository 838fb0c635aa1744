"""Target quantization (models/quantize.py, `harness models quantize`, `--target-quant`): bad input is
one line and exit 2 before anything is written; the tiny pair's target made in F32, F16 and Q8_0 by
the llama-quantize scripts/setup.sh builds, each loaded by llama-cpp-python with the logits of the
float folder it came from; and a run over two variants, the llama.cpp runtime measured once per
variant and torch once, with the report's "Target quantization" section.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from spec_harness.core.errors import HarnessError
from spec_harness.models import llama_files
from spec_harness.models import quantize as q
from tests.test_cli import harness, invoke

TEXT = "The quick brown fox jumps over the lazy dog."


def _one_line_exit_2(r, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def tiny_variants(tiny_gguf):
    """The tiny pair's target in F32, F16, Q8_0 and Q4_0 (made once, cached)."""
    return q.make(q.source_of_pair(tiny_gguf), ["F32", "F16", "Q8_0", "Q4_0"])


# ---------------------------------------------------------------- bad input: one line, exit 2


def test_unknown_type_lists_the_known_ones(tmp_path):
    line = _one_line_exit_2(invoke("models", "quantize", "--pair", "tiny", "--type", "F16,Q9_9"), "Q9_9", "Q8_0", "Q4_K_M")
    assert "F16," not in line.split(":")[1]  # the known type is not named as unknown
    _one_line_exit_2(invoke("run", "--runtime", "llamacpp", "--pair", "tiny", "--target-quant", "q8_0,Q3", "--out",
                            tmp_path / "run"), "Q3", "choose from")
    assert not (tmp_path / "run").exists()
    from spec_harness.harness import cli

    assert cli._target_quants("f16, q8_0,F16") == ["F16", "Q8_0"] and cli._target_quants(None) == [] == cli._target_quants("")


def test_a_quantized_target_is_not_widened(tiny_gguf, tiny_variants, tmp_path):
    """A pair whose only target is a Q4_0 GGUF: F16 or Q8_0 would only re-encode its rounding."""
    q4 = str(tiny_variants["Q4_0"])
    line = _one_line_exit_2(invoke("models", "quantize", "--target", q4, "--type", "F16"), "Q4_0", "F16",
                            "--target a Hugging Face float folder", "Q4_K_M")
    assert "Q8_0" not in line.rsplit("(", 1)[1]  # the types it may ask for are at most its bits
    out = tmp_path / "run"
    _one_line_exit_2(invoke("run", "--runtime", "llamacpp,torch", "--target", q4, "--draft", tiny_gguf.draft_gguf,
                            "--target-quant", "Q8_0", "--out", out), "re-encode its rounding")
    assert not out.exists()
    # at most its precision is made, from the file itself (requantized)
    got = q.make(q.source_of(q4), ["Q4_0"])
    assert q.describe(got["Q4_0"])["type"] == "Q4_0"


def test_llama_quantize_not_built_names_the_set_up(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))  # nothing made yet
    monkeypatch.setenv("HARNESS_LLAMA_QUANTIZE", str(tmp_path / "nowhere"))
    _one_line_exit_2(invoke("models", "quantize", "--pair", "tiny", "--type", "Q8_0"), "HARNESS_LLAMA_QUANTIZE",
                     "scripts/setup.sh")
    monkeypatch.delenv("HARNESS_LLAMA_QUANTIZE")
    monkeypatch.setattr(llama_files, "tool_places", lambda name: [tmp_path / name])
    monkeypatch.setenv("PATH", str(tmp_path))
    _one_line_exit_2(invoke("models", "quantize", "--pair", "tiny", "--type", "Q8_0"), "llama-quantize is not built",
                     "scripts/setup.sh")
    assert not list((tmp_path / "cache").glob("quantized/*/*.gguf"))


def test_not_enough_disk_is_one_line(tmp_path):
    import shutil

    with pytest.raises(HarnessError, match="not enough free disk .* set HARNESS_CACHE"):
        q.check_space(shutil.disk_usage(tmp_path).free + (1 << 40), tmp_path / "a" / "b", "the variants")
    q.check_space(1, tmp_path / "a" / "b", "the variants")


# ---------------------------------------------------------------- the variants themselves


@pytest.mark.parametrize("qtype,atol", [("F32", 2e-3), ("F16", 0.05), ("Q8_0", 0.3)])
def test_variants_load_in_llama_cpp_with_the_float_folders_logits(tiny_pair, tiny_variants, qtype, atol):
    """The F32 GGUF written from the float folder gives its logits (the source of every type is
    right), and F16 and Q8_0 from it stay close; each file holds what it says."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spec_harness.runtimes import llama_common as lc
    from spec_harness.runtimes.llamacpp import LlamaKV
    import llama_cpp
    from spec_harness.core.config import RuntimeSettings

    path = tiny_variants[qtype]
    d = q.describe(path)
    assert d["type"] == qtype and path.name.endswith(f".{qtype}.gguf")
    assert abs(d["bits_per_weight"] - q.TYPES[qtype]) < 0.3, d  # the tiny rows are whole blocks of 32: no fallbacks
    ids = AutoTokenizer.from_pretrained(tiny_pair.target).encode(TEXT, add_special_tokens=False)
    hf = AutoModelForCausalLM.from_pretrained(tiny_pair.target, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    model = llama_files.load_model(str(path), "target")
    kv = LlamaKV(model, lc.context_params(RuntimeSettings(n_threads=1, n_ctx=256), 256), 257)
    try:
        got = kv.forward(ids, len(ids)).numpy().copy()
    finally:
        kv.close()
        llama_cpp.llama_model_free(model)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < atol, err
    if qtype == "F32":
        assert (got.argmax(-1) == ref.argmax(-1)).all()


def _llama_logits(path, ids) -> np.ndarray:
    import llama_cpp

    from spec_harness.core.config import RuntimeSettings
    from spec_harness.runtimes import llama_common as lc
    from spec_harness.runtimes.llamacpp import LlamaKV

    model = llama_files.load_model(str(path), "target")
    kv = LlamaKV(model, lc.context_params(RuntimeSettings(n_threads=1, n_ctx=256), 256),
                 llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model)))
    try:
        return kv.forward(ids, len(ids)).numpy().copy()
    finally:
        kv.close()
        llama_cpp.llama_model_free(model)


@pytest.mark.slow  # the default target: a 135M float32 folder, its F32 GGUF (540 MB) and Q4_1 (once, cached)
def test_the_default_targets_variants_keep_its_weights():
    """The default pair's source is the float32 folder of its Q4_1 file: the F32 GGUF gives that
    folder's logits (tokenizer metadata copied: the same ids), and Q4_1 made from it the logits of
    the shipped Q4_1 file."""
    from transformers import AutoModelForCausalLM

    from spec_harness.models.loading import model_folder
    from spec_harness.models.presets import resolve_pair

    src = q.source_of_pair(resolve_pair(None))
    assert (src.kind, src.precision) == ("converted", "float32")
    paths = q.make(src, ["F32", "Q4_1"])
    model = llama_files.load_model(str(paths["F32"]), "target", vocab_only=True)
    import llama_cpp

    ids = llama_files.encode_prompt(model, llama_cpp.llama_model_get_vocab(model), "What is the capital of France?")
    llama_cpp.llama_model_free(model)
    hf = AutoModelForCausalLM.from_pretrained(model_folder(src.path, "target"), dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    f32 = _llama_logits(paths["F32"], ids)[:, :ref.shape[1]]
    assert np.abs(f32 - ref).max() < 5e-3 * np.abs(ref).max() and (f32.argmax(-1) == ref.argmax(-1)).all()
    np.testing.assert_allclose(_llama_logits(paths["Q4_1"], ids), _llama_logits(src.path, ids), rtol=0, atol=1e-3)


def test_a_second_call_finds_them_cached(tiny_gguf, tiny_variants):
    said = []
    again = q.make(q.source_of_pair(tiny_gguf), ["Q8_0", "F16"], log=said.append)
    assert again == {t: tiny_variants[t] for t in ("Q8_0", "F16")}
    assert said == [f"Q8_0: cached, {tiny_variants['Q8_0']}", f"F16: cached, {tiny_variants['F16']}"]
    vs = q.variants(tiny_gguf, ["Q8_0"])
    assert [(v.name, v.target_quant, v.target_gguf, v.draft_gguf) for v in vs] == [
        ("tiny@Q8_0", "Q8_0", str(tiny_variants["Q8_0"]), tiny_gguf.draft_gguf)]
    assert (Path(vs[0].target) / "config.json").is_file()  # its weights in float32, for the acceptance check


def test_models_quantize_prints_each_variant(tiny_variants):
    r = invoke("models", "quantize", "--pair", "tiny", "--type", "F16,Q8_0")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("source: the float folder ") and "float32" in out[0]
    table = out[out.index(next(ln for ln in out if ln.startswith("type "))) + 1:]
    assert [ln.split()[0] for ln in table] == ["F16", "Q8_0"]
    assert [ln.split()[-1] for ln in table] == [str(tiny_variants["F16"]), str(tiny_variants["Q8_0"])]
    assert [float(ln.split()[3]) for ln in table] == pytest.approx([16.0, 8.5], abs=0.3)


# ---------------------------------------------------------------- the axis in a run


@pytest.mark.slow  # a run in a process of its own: two llama.cpp variants, torch once, the report
def test_run_measures_llama_cpp_per_variant_and_torch_once(tmp_path):
    out = tmp_path / "run"
    r = harness("run", "--runtime", "llamacpp,torch", "--pair", "tiny", "--target-quant", "F16,Q8_0", "--prompts", "factual",
                "--max-new-tokens", "8", "--gamma", "3", "--threads", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "target quantizations of tiny: F16, Q8_0" in r.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert not [x for x in rows if x["error"]]
    base = [x for x in rows if x["mode"] == "baseline"]
    prompts = len({x["prompt_id"] for x in rows})
    llama = [x for x in base if x["runtime"] == "llamacpp"]
    assert sorted((x["pair"], x["target_quant"]) for x in llama) == sorted(
        [("tiny@F16", "F16")] * prompts + [("tiny@Q8_0", "Q8_0")] * prompts)
    assert {x["dtype"].split(" / ")[0] for x in llama} == {"F16", "Q8_0"}
    torch_rows = [x for x in rows if x["runtime"] == "torch"]
    assert len(torch_rows) == 2 * prompts and {(x["pair"], x["target_quant"]) for x in torch_rows} == {("tiny", None)}
    assert {x["pair_label"].rsplit(" ", 1)[-1] for x in llama} == {"@F16", "@Q8_0"}
    info = json.loads((out / "run.json").read_text())
    assert info["config"]["target_quants"] == ["F16", "Q8_0"]
    assert [(p["name"], p["target_quant"]) for p in info["config"]["pairs"]] == [
        ("tiny", None), ("tiny@F16", "F16"), ("tiny@Q8_0", "Q8_0")]
    md = (out / "report" / "report.md").read_text()
    section = md[md.index("## Target quantization"):]
    section = section[:section.index("\n## ", 1)]
    table = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| runtime")]
    assert [ln.split(" | ")[:2] for ln in table] == [["| llamacpp", "F16"], ["| llamacpp", "Q8_0"],
                                                    ["| torch [kernels]", "as given (float32)"]]
    assert all(len(ln.strip("|").split(" | ")) <= 10 for ln in table)
    csv = (out / "report" / "quantization.csv").read_text().splitlines()
    assert len(csv) == 4 and csv[0].startswith("runtime_name,pair,")
