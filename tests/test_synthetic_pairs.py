"""`--pair synthetic:TARGET,DRAFT`: random-weight models in the exact shapes of real ones.

The shipped shapes give the real models' FLOPs (Qwen2.5-0.5B drafting for 3B: c = 0.1601); a pair
built from two small config.json files has exactly their shapes in the HF folder, in the GGUF that
llama.cpp loads, and in the parameter count; `harness calibrate` measures it through torch, llamacpp
and llama-server (hf skipped: it cannot force acceptance); `harness run` refuses it; bad shapes are
one line.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from spec_harness.core.errors import HarnessError
from spec_harness.harness.cli import main
from spec_harness.models import synthetic
from spec_harness.models.shape import flops_for, load_config, shape_from_config

SMALL = {"model_type": "qwen2", "hidden_size": 96, "intermediate_size": 160, "num_hidden_layers": 3,
         "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 1000, "tie_word_embeddings": True,
         "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 512}
SMALLER = {**SMALL, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
           "tie_word_embeddings": False}
SHAPE = ("hidden", "layers", "heads", "kv_heads", "head_dim", "intermediate", "vocab")


def _configs(tmp_path):
    paths = []
    for name, cfg in (("small", SMALL), ("smaller", SMALLER)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(cfg))
        paths.append(p)
    return paths


def test_the_shipped_shapes_are_the_real_models():
    assert {"qwen2.5-0.5b", "qwen2.5-3b", "llama-3.2-1b", "llama-3.1-8b", "smollm2-135m"} <= set(synthetic.shipped())
    t = flops_for(str(synthetic.CONFIG_DIR / "qwen2.5-3b.json")).flops()
    d = flops_for(str(synthetic.CONFIG_DIR / "qwen2.5-0.5b.json")).flops()
    assert (t, d) == (6_171_394_048, 987_922_432) and round(d / t, 4) == 0.1601
    for name in synthetic.shipped():  # the Llama config built for each keeps every dimension of the shape
        real = shape_from_config(load_config(str(synthetic.CONFIG_DIR / f"{name}.json")))
        built = shape_from_config(synthetic.llama_config(synthetic.shape_config(name, "target"), "target"))
        assert [getattr(built, f) for f in SHAPE] == [getattr(real, f) for f in SHAPE], name


def test_a_synthetic_pair_has_the_shapes_it_names(tmp_path, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from spec_harness.models.presets import resolve_pair
    from spec_harness.models.shape import flops_from_gguf

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    small, smaller = _configs(tmp_path)
    spec = resolve_pair(f"synthetic:{small},{smaller}")
    assert spec.synthetic and spec.name == "synthetic:small.json,smaller.json"
    for folder, gguf, cfg in ((spec.target, spec.target_gguf, SMALL), (spec.draft, spec.draft_gguf, SMALLER)):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        got = shape_from_config(model.config)
        want = shape_from_config(load_config(str(small if cfg is SMALL else smaller)))
        assert [getattr(got, f) for f in SHAPE] == [getattr(want, f) for f in SHAPE]
        assert model.config.tie_word_embeddings == cfg["tie_word_embeddings"]
        assert flops_from_gguf(gguf).matmul_params == flops_for(folder).matmul_params  # the GGUF holds the same matmuls
        w = model.model.layers[0].mlp.up_proj.weight.detach()
        assert abs(float(w.std()) - synthetic.INIT_STD) < 0.002 and float(model.model.norm.weight.detach().min()) == 1.0
    assert resolve_pair(f"synthetic:{small},{smaller}") == spec  # built once, then reused


def test_bad_synthetic_pairs_are_one_line(tmp_path):
    from spec_harness.models.presets import resolve_pair

    with pytest.raises(HarnessError, match="give two shapes"):
        resolve_pair("synthetic:qwen2.5-3b")
    with pytest.raises(HarnessError, match="not a shipped shape .*qwen2.5-3b"):
        resolve_pair("synthetic:qwen2.5-3b,nope")
    opt = tmp_path / "opt.json"
    opt.write_text(json.dumps({"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                               "ffn_dim": 128, "vocab_size": 300, "word_embed_proj_dim": 64}))
    with pytest.raises(HarnessError, match="not a gated-MLP decoder"):
        resolve_pair(f"synthetic:{opt},qwen2.5-0.5b")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(HarnessError, match="not a JSON config"):
        resolve_pair(f"synthetic:{bad},qwen2.5-0.5b")
    res = CliRunner().invoke(main, ["run", "--pair", "synthetic:qwen2.5-3b,qwen2.5-0.5b"])
    assert res.exit_code == 2 and "harness calibrate" in res.output


@pytest.mark.slow
def test_calibrate_measures_a_synthetic_pair_in_every_runtime_that_forces(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    small, smaller = _configs(tmp_path)
    out = tmp_path / "cal"
    res = CliRunner().invoke(main, ["calibrate", "--runtime", "torch,llamacpp,llama-server,hf",
                                    "--pair", f"synthetic:{small},{smaller}", "--gamma", "2", "--alpha", "0,1",
                                    "--prompts", "math", "--max-new-tokens", "12", "--threads", "1", "--n-ctx", "256",
                                    "--warmup", "0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    spec = [r for r in rows if r["mode"] == "speculative" and not r["error"]]
    assert {r["runtime"] for r in spec} == {"torch", "llamacpp", "llama-server"}
    assert all(r["synthetic"] and r["pair"] == "synthetic:small.json,smaller.json" for r in spec)
    for r in spec:  # forced: nothing or everything accepted, whatever random weights propose
        drafted = [rd for rd in r["rounds"] if rd["drafted"]]
        assert drafted and all(rd["accepted"] == (rd["drafted"] if r["forced_rates"] == [1.0] else 0) for rd in drafted)
    assert [r["runtime"] for r in rows if r["error"]] == ["hf"]
    md = (out / "report" / "calibration.md").read_text()
    assert all(f"| {rt} | 2 |" in md for rt in ("torch [kernels]", "llamacpp", "llama-server"))


def test_a_built_model_has_its_rotary_frequencies():
    """build_model makes the model on the meta device and then empty CPU memory: its rotary
    embedding's buffers (not parameters) must be computed again, not left as that memory was
    (random weights in SmolLM2's shape gave NaN logits in some processes when they were not)."""
    import torch
    from transformers import LlamaForCausalLM

    from spec_harness.models.synthetic import build_model, llama_config, shape_config

    config = llama_config(shape_config("smollm2-135m", "draft"), "draft")
    rotary = build_model(config, seed=3).model.rotary_emb
    assert torch.equal(rotary.inv_freq, LlamaForCausalLM(config).model.rotary_emb.inv_freq)
