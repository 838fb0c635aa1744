"""The torch runtime's lean Llama forward (runtimes/torch_llama.py) against transformers' own forward
on the tiny pair: same logits through prefill, one-token steps, verify-sized batches, crops and a
cache that has to grow; the model it fused still computes what it computed before."""

from __future__ import annotations

import random

import pytest
import torch

from runtimes.pytorch import TorchKV
from runtimes.torch_llama import LlamaFast, Linear, unsupported_reason


@pytest.fixture()
def model(tiny_pair):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_pair.target, dtype=torch.float32).eval()


@torch.inference_mode()
def test_lean_logits_equal_transformers_through_steps_crops_and_growth(model):
    ref_model = type(model).from_pretrained(model.name_or_path, dtype=torch.float32).eval()
    kv = TorchKV(model, 257)
    assert kv.lean is not None
    rng = random.Random(0)
    seq: list[int] = []
    kv.reset()
    for step in range(100):  # mixes of 1- and 5-token passes, random crops; ends past 256 positions
        n = rng.choice([1, 5, 9])
        new = [rng.randrange(3, 257) for _ in range(n)]
        got = kv.forward(new, n)  # [n, V]
        seq += new
        ref = ref_model(input_ids=torch.tensor([seq])).logits[0, -n:, :257]
        assert torch.allclose(got, ref, atol=1e-4), f"step {step}, cache {len(kv)}"
        if rng.random() < 0.3:
            keep = len(seq) - rng.randint(1, n)
            kv.crop(keep)
            del seq[keep:]
        assert len(kv) == len(seq)
    assert kv.lean.k.shape[3] >= len(seq) > 256


@torch.inference_mode()
def test_fusing_keeps_the_models_own_forward_and_a_self_draft_shares_weights(model):
    ids = torch.tensor([[5, 17, 42, 9, 60]])
    before = model(input_ids=ids).logits.clone()
    a, b = LlamaFast(model), LlamaFast(model)  # target and self-draft
    assert a.layers is b.layers and a.head is b.head
    attn = model.model.layers[0].self_attn
    q, k = attn.q_proj.weight, attn.k_proj.weight  # row blocks of one fused [out, in] matrix
    assert q.untyped_storage().data_ptr() == k.untyped_storage().data_ptr() and k.is_contiguous()
    assert torch.equal(model(input_ids=ids).logits, before)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
def test_a_prepacked_matrix_computes_what_the_plain_one_does():
    w = torch.randn(96, 64)
    for shape in ([1, 1, 64], [1, 5, 64]):
        x = torch.randn(shape)
        plain, packed = Linear(w, packed=False)(x), Linear(w, packed=True)(x)
        assert packed.shape == plain.shape == (*shape[:2], 96)
        assert torch.allclose(packed, plain, atol=1e-5)


def test_float32_cpu_models_get_packed_matrices_others_plain(model):
    packed = torch.backends.mkldnn.is_available()
    assert LlamaFast(model).head.packed == packed
    other = type(model).from_pretrained(model.name_or_path, dtype=torch.bfloat16).eval()
    assert LlamaFast(other).head.packed is False


def test_other_architectures_fall_back_to_transformers(model):
    assert unsupported_reason(model) is None
    model.config.attention_bias = True
    assert "bias" in unsupported_reason(model)
    model.config.attention_bias = False
    assert TorchKV(model, 257, lean=False).lean is None


@torch.inference_mode()
def test_the_transformers_path_gives_the_same_logits_through_a_crop(model):
    ref_model = type(model).from_pretrained(model.name_or_path, dtype=torch.float32).eval()
    lean, slow = TorchKV(model, 257), TorchKV(ref_model, 257, lean=False)
    assert slow.lean is None and slow.why_not_lean == "turned off"
    for kv in (lean, slow):
        kv.reset()
    steps = [([5, 17, 42, 9], 4), ([60, 61, 2, 33, 44], 5), ([55], 1)]
    for ids, n in steps:
        assert torch.allclose(lean.forward(ids, n), slow.forward(ids, n), atol=1e-4)
    lean.crop(6)
    slow.crop(6)
    assert len(lean) == len(slow) == 6
    assert torch.allclose(lean.forward([70, 71], 2), slow.forward([70, 71], 2), atol=1e-4)
