"""Theory: FLOPs per token (HF configs built in-process, GGUF files written here), Leviathan's
formulas against his Table 1 and the first seed's theoretical column, breakeven and best gamma."""

from __future__ import annotations

import numpy as np
import pytest

from spec_harness.core import metrics, theory
from spec_harness.models import shape
from spec_harness.core.errors import HarnessError

# Known shapes of the first seed's pair (and its 1.5B candidate), from their public config.json.
QWEN = {
    "3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16),
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12),
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14),
}


def qwen(size: str):
    from transformers import Qwen2Config

    return Qwen2Config(**QWEN[size], num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True)


def test_qwen_flops_per_token_match_the_first_seed():
    t = shape.flops_from_config(qwen("3b"))
    d = shape.flops_from_config(qwen("0.5b"))
    assert t.flops() == 6_171_394_048
    assert d.flops() == 987_922_432
    assert round(theory.c_flops(t, d), 4) == 0.1601
    # the seed's second candidate: "c = 0.5002" for Qwen2.5-1.5B
    assert round(theory.c_flops(t, shape.flops_from_config(qwen("1.5b"))), 4) == 0.5002


def test_matmul_count_by_hand_and_attention_term():
    a = shape.shape_from_config(qwen("0.5b"))
    assert (a.head_dim, a.kv_heads, a.gated_mlp) == (64, 2, True)
    per_layer = 896 * 896 * 2 + 896 * 128 * 2 + 3 * 896 * 4864  # q,o + k,v + gate/up/down
    assert shape.matmul_params(a) == 24 * per_layer + 151936 * 896  # + the tied head, once
    f = shape.flops_from_config(qwen("0.5b"))
    assert f.flops(1000) - f.flops() == 4 * 24 * 896 * 1000
    with pytest.raises(HarnessError):
        f.flops(-1)


def test_non_gated_mlp_and_untied_head_count_the_head_once():
    from transformers import OPTConfig

    cfg = OPTConfig(hidden_size=64, ffn_dim=256, num_hidden_layers=2, num_attention_heads=4,
                    vocab_size=100, word_embed_proj_dim=64)
    a = shape.shape_from_config(cfg)
    assert not a.gated_mlp
    assert shape.matmul_params(a) == 2 * (4 * 64 * 64 + 2 * 64 * 256) + 100 * 64


def test_config_count_agrees_with_the_real_linear_layers(tiny_pair):
    """The formula against the actual nn.Linear weights of the tiny Llama target."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_pair.target)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert shape.flops_for(tiny_pair.target).matmul_params == linear


def _write_gguf(path, tied: bool, n_layers=2, hidden=64, heads=4, kv=2, ff=128, vocab=100):
    import gguf

    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_block_count(n_layers)
    w.add_embedding_length(hidden)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    kvd = kv * hidden // heads
    w.add_tensor("token_embd.weight", np.zeros((vocab, hidden), np.float32))
    for i in range(n_layers):
        shapes = {"attn_q": (hidden, hidden), "attn_k": (kvd, hidden), "attn_v": (kvd, hidden),
                  "attn_output": (hidden, hidden), "ffn_gate": (ff, hidden), "ffn_down": (hidden, ff)}
        for name, dims in shapes.items():
            w.add_tensor(f"blk.{i}.{name}.weight", np.zeros(dims, np.float16))
        for name in ("attn_q", "attn_k", "attn_v"):  # Qwen2's attention biases: not matmul weights
            w.add_tensor(f"blk.{i}.{name}.bias", np.zeros(shapes[name][0], np.float32))
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.zeros(hidden, np.float32))
        # ffn_up quantized Q8_0 (blocks of 32 values in 34 bytes): the logical shape must be used
        w.add_tensor(f"blk.{i}.ffn_up.weight", np.zeros((ff, hidden // 32 * 34), np.uint8),
                     raw_shape=(ff, hidden // 32 * 34), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    if not tied:
        w.add_tensor("output.weight", np.zeros((vocab, hidden), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("tied", [True, False])
def test_gguf_count_equals_config_count(tmp_path, tied):
    from transformers import Qwen2Config

    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=100, tie_word_embeddings=tied)
    g = shape.flops_for(str(_write_gguf(tmp_path / "m.gguf", tied)))
    c = shape.flops_from_config(cfg)
    assert (g.matmul_params, g.layers, g.attn_width) == (c.matmul_params, c.layers, c.attn_width)
    assert g.flops(10) == c.flops(10)


@pytest.mark.parametrize("outtype", ["f32", "q8_0"])
def test_exported_tiny_gguf_agrees_with_its_config(tiny_pair, outtype):
    """The GGUF writer's tiny exports count the same matmul weights as their HF configs."""
    from spec_harness.models.gguf_writer import ensure_tiny_gguf

    t_gguf, d_gguf = ensure_tiny_gguf("tiny", outtype)
    for folder, gguf_file in ((tiny_pair.target, t_gguf), (tiny_pair.draft, d_gguf)):
        assert shape.flops_for(str(gguf_file)).flops(64) == shape.flops_for(folder).flops(64)


def test_local_config_folder_and_file(tmp_path):
    qwen("0.5b").save_pretrained(tmp_path)
    assert shape.flops_for(str(tmp_path)).flops() == 987_922_432
    assert shape.flops_for(str(tmp_path / "config.json")).flops() == 987_922_432


@pytest.mark.parametrize("ref,msg", [
    ("no-such-org/no-such-model-xyz", "not in the Hugging Face cache"),
    ("/no/such/folder", "not found"),
    ("/no/such/model.gguf", "GGUF file not found"),
])
def test_unavailable_configs_give_one_line(ref, msg):
    with pytest.raises(HarnessError, match=msg) as e:
        shape.flops_for(ref, "target")
    assert "\n" not in str(e.value)


# Leviathan et al. 2023, Table 1 (c = c^ = 0): alpha, gamma, operations, speed
LEVIATHAN_TABLE_1 = [
    (0.6, 2, 1.53, 1.96), (0.7, 3, 1.58, 2.53), (0.8, 2, 1.23, 2.44),
    (0.8, 5, 1.63, 3.69), (0.9, 2, 1.11, 2.71), (0.9, 10, 1.60, 6.86),
]


@pytest.mark.parametrize("alpha,gamma,ops,speed", LEVIATHAN_TABLE_1)
def test_leviathan_table_1(alpha, gamma, ops, speed):
    assert round(theory.expected_speedup(alpha, gamma, 0.0), 2) == speed
    assert round(theory.expected_tokens(alpha, gamma), 2) == speed  # c = 0: speedup = tokens/round
    assert round(theory.expected_operations(alpha, gamma, 0.0), 2) == ops


@pytest.mark.parametrize("alpha,gamma,expected", [(0.392, 4, 0.99), (0.336, 7, 0.71), (0.197, 8, 0.55)])
def test_first_seed_theoretical_column(alpha, gamma, expected):
    assert round(theory.expected_speedup(alpha, gamma, 0.1601), 2) == expected


def test_expected_tokens_edge_cases_and_consistency_with_metrics():
    assert theory.expected_tokens(1.0, 4) == 5
    assert theory.expected_speedup(1.0, 4, 1.0) == 1.0  # the draft that is the target: exactly 1.00x
    assert theory.expected_tokens(0.0, 4) == 1
    for a in (0.1, 0.5, 0.99, 1.0):  # E[tokens] = 1 + E[accepted], as metrics.py documents it
        assert theory.expected_tokens(a, 6) == pytest.approx(1 + 6 * metrics.expected_alpha_acceptance_rate(a, 6))


def test_breakeven_alpha():
    assert theory.breakeven_alpha(1, 0.5) == pytest.approx(0.5)  # (1 + a) / (1 + c) = 1
    for g in (2, 4, 7):
        a = theory.breakeven_alpha(g, 0.1601)
        assert theory.expected_speedup(a, g, 0.1601) == pytest.approx(1.0, abs=1e-9)
    assert theory.breakeven_alpha(4, 0.0) == 0.0
    assert theory.breakeven_alpha(4, 1.2) is None
    # the seed: the 1.5B draft (c = 0.5002) "would need 69 to 84 percent acceptance" for gamma 3..8
    assert [round(theory.breakeven_alpha(g, 0.5002), 2) for g in (3, 8)] == [0.69, 0.84]


def test_optimal_gamma_is_the_argmax():
    for alpha, c in ((0.8, 0.05), (0.6, 0.16), (0.392, 0.1601), (0.95, 0.02)):
        g = theory.optimal_gamma(alpha, c)
        best = max(theory.expected_speedup(alpha, k, c) for k in range(1, theory.MAX_GAMMA + 1))
        assert theory.expected_speedup(alpha, g, c) == best
    assert theory.optimal_gamma(0.8, 0.0, max_gamma=12) == 12
    assert theory.optimal_gamma(0.0, 0.1) == 1


def test_check_inputs_names_the_flag():
    for kw, flag in ((dict(alpha=1.5), "--alpha"), (dict(gamma=0), "--gamma"), (dict(c=-0.1), "--c")):
        with pytest.raises(HarnessError, match=flag):
            theory.check_inputs(**kw)
