"""The torch runtime's lean Llama forward (runtimes/torch_llama.py) against transformers' own forward
on the tiny pair: same logits through prefill, one-token steps (eager and through the step kernel),
verify-sized batches, crops and a cache that has to grow; the model it fused still computes what it
computed before; which models get the step kernel."""

from __future__ import annotations

import copy
import random
import re

import pytest
import torch

from spec_harness.core.machine import HUGE_PAGE
from spec_harness.runtimes import llama_step, packed_matmul, torch_llama
from spec_harness.runtimes.pytorch import TorchKV
from spec_harness.runtimes.torch_llama import Linear, LlamaFast, unsupported_reason
from tests.numerics import apart, beyond_dot_error


@pytest.fixture()
def model(tiny_pair):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_pair.target, dtype=torch.float32).eval()


@pytest.mark.parametrize("compiled", [False, True])
@torch.inference_mode()
def test_lean_logits_equal_transformers_through_steps_crops_and_growth(model, compiled):
    ref_model = type(model).from_pretrained(model.name_or_path, dtype=torch.float32).eval()
    kv = TorchKV(model, 257, kernels=compiled)
    assert kv.lean is not None and kv.lean.kernels == compiled
    assert kv.lean.kernel_passes == compiled  # the passes of 2, 5 and 9 tokens run through forward_tokens
    rng = random.Random(0)
    seq: list[int] = []
    kv.reset()
    for step in range(100):  # mixes of 1-, 2-, 5- and 9-token passes, random crops; ends past 256 positions
        n = rng.choice([1, 2, 5, 9])
        new = [rng.randrange(3, 257) for _ in range(n)]
        got = kv.forward(new, n)  # [n, V]
        seq += new
        ref = ref_model(input_ids=torch.tensor([seq])).logits[0, -n:, :257]
        assert not apart(got, ref, model.config, len(seq)), f"step {step}, cache {len(kv)}"
        if rng.random() < 0.3:
            keep = len(seq) - rng.randint(1, n)
            kv.crop(keep)
            del seq[keep:]
        assert len(kv) == len(seq)
    assert kv.lean.capacity >= len(seq) > 256
    assert kv.lean.kernels == compiled


@torch.inference_mode()
def test_the_tolerance_tells_a_cache_one_position_short(model):
    """`apart` must be able to fail: the logits of a step after a cache that lost its first token."""
    kv = TorchKV(model, 257)
    kv.reset()
    kv.forward([5, 17, 42, 9], 1)
    short = model(input_ids=torch.tensor([[17, 42, 9, 60]])).logits[0, -1:, :257]
    assert "x the tolerance" in apart(kv.forward([60], 1), short, model.config, 5)


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


@pytest.mark.parametrize("out", [96, 100, 7])  # whole blocks of 16 rows, and padded ones
@pytest.mark.parametrize("tokens", [1, 5, 8, 9, 23])  # one chunk of the kernel, a full one, several
def test_a_packed_matrix_computes_what_the_plain_one_does(out, tokens):
    assert packed_matmul.unusable_reason(torch.device("cpu"), torch.float32) is None  # g++ is part of the set-up
    w = torch.randn(out, 67)
    dest = torch.full((packed_matmul.packed_numel(out, 67),), float("nan"))
    lin = Linear(w, packed_matmul.pack(w, dest))
    x = torch.randn(1, tokens, 67)
    y = lin(x)
    assert y.shape == (1, tokens, out)
    assert not beyond_dot_error(y, x, w.T)


@pytest.mark.parametrize("tokens", [1, 5, 9])
def test_a_matrix_of_float16_values_packed_in_float16_gives_the_float32_products_exactly(tokens):
    w = torch.randn(96, 67).half().float()  # a model stored in float16, loaded as float32
    packed32 = packed_matmul.pack(w, torch.empty(packed_matmul.packed_numel(96, 67)))
    packed16 = packed_matmul.pack(w, torch.empty(packed_matmul.packed_numel(96, 67), dtype=torch.float16))
    x = torch.randn(tokens, 67)
    assert packed_matmul.exact_in_half(w) and packed16.dtype == torch.float16
    assert torch.equal(packed_matmul.matmul(x, packed16, 96), packed_matmul.matmul(x, packed32, 96))
    assert not beyond_dot_error(packed_matmul.matmul(x, packed16, 96), x, w.T)
    assert not packed_matmul.exact_in_half(w + 1e-4)  # values between float16's: kept in float32


def test_a_kernel_for_another_vector_isa_is_another_build(monkeypatch):
    """ATEN_CPU_CAPABILITY picks the vector ISA inductor builds for (avx2; default: none) below the
    CPU's widest: a library built for the CPU's widest is not loaded for it."""
    keys = set()
    for isa in ("", "avx2", "default"):
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", isa)
        keys.add(packed_matmul._built(["int64_t"], packed_matmul.SOURCE)[0])
    assert len(keys) == 3


def test_float32_cpu_models_get_packed_matrices_others_plain(model):
    fast = LlamaFast(model)
    assert fast.head.packed is not None and fast.weights.why_not_packed is None
    other = type(model).from_pretrained(model.name_or_path, dtype=torch.bfloat16).eval()
    lean = LlamaFast(other)
    assert lean.head.packed is None and "float32" in lean.weights.why_not_packed


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
        assert not apart(lean.forward(ids, n), slow.forward(ids, n), model.config, len(lean))
    lean.crop(6)
    slow.crop(6)
    assert len(lean) == len(slow) == 6
    assert not apart(lean.forward([70, 71], 2), slow.forward([70, 71], 2), model.config, 8)


def test_the_matrices_live_in_one_aligned_arena_the_model_reads_too(model):
    fast = LlamaFast(model)
    w = fast.weights
    blocks = w.stacks + [fast.head.weight]  # [layers, out, in] per kind, then [V, H]
    base = blocks[0].untyped_storage().data_ptr()
    assert all(b.untyped_storage().data_ptr() == base for b in blocks)  # one buffer
    assert blocks[0].data_ptr() % HUGE_PAGE == 0
    assert all(b.data_ptr() % (torch_llama.ALIGN * 4) == 0 for b in blocks)
    assert w.nbytes == sum(p.numel() * 4 for name, p in model.named_parameters() if "proj" in name or "lm_head" in name) \
        or model.config.tie_word_embeddings  # a tied head is counted once, as the embedding
    layer = model.model.layers[1]
    assert layer.mlp.down_proj.weight.data_ptr() == w.stacks[3][1].data_ptr()
    assert layer.self_attn.k_proj.weight.data_ptr() == w.stacks[0][1, layer.self_attn.q_proj.weight.shape[0]].data_ptr()
    assert layer.input_layernorm.weight.data_ptr() == w.norms[0][1].data_ptr()
    assert model.lm_head.weight.data_ptr() == fast.head.weight.data_ptr()


def test_float32_cpu_models_get_the_step_kernel_by_default(model, monkeypatch):
    assert LlamaFast(model).kernels and LlamaFast(model).why_no_kernels is None
    assert LlamaFast(model, kernels=False).why_no_kernels == "turned off"
    other = type(model).from_pretrained(model.name_or_path, dtype=torch.bfloat16).eval()
    assert "float32" in LlamaFast(other).why_no_kernels
    monkeypatch.setattr(packed_matmul.shutil, "which", lambda name: None)
    assert "g++" in LlamaFast(model).why_no_kernels


@torch.inference_mode()
def test_a_step_kernel_that_does_not_build_is_said_once_and_the_step_runs_eager(model, monkeypatch, capsys):
    def broken():
        raise RuntimeError("CppCompileError: C++ compile error\nmore lines")

    ref = LlamaFast(model, kernels=False)
    monkeypatch.setattr(llama_step, "_kernel", broken)
    llama_step._build.cache_clear()
    try:
        fast = LlamaFast(model)
        LlamaFast(model)  # a second one in the same process: no second line
        why = fast.why_no_kernels
        assert why == "the step kernels did not build: CppCompileError: C++ compile error"
        assert capsys.readouterr().err.count(f"torch: {why}; the forward runs eager") == 1
        for kv in (ref, fast):
            kv.forward([5, 17, 42], 1)
        assert not apart(fast.forward([9], 1), ref.forward([9], 1), model.config, 4) and fast.length == 4
    finally:
        llama_step._build.cache_clear()


@torch.inference_mode()
def test_the_step_kernel_writes_the_cache_the_eager_step_writes(model):
    """Its k, v at position L equal the eager forward's, and a step from an empty cache works."""
    eager, fast = LlamaFast(model, kernels=False), LlamaFast(model)
    for kv in (eager, fast):
        kv.forward([5, 17, 42, 9], 1)
        kv.forward([60], 1)
    assert not apart(torch_llama.key_rows(fast.k, 5, True), torch_llama.key_rows(eager.k, 5, False), model.config, 5)
    assert not apart(fast.v[:, :, :5], eager.v[:, :, :5], model.config, 5)
    eager.reset()
    fast.reset()
    assert not apart(fast.forward([7], 1), eager.forward([7], 1), model.config, 1) and fast.length == 1
    long = list(range(3, 3 + torch_llama.PASS_MAX_TOKENS + 8))  # a long prefill: eager, then the kernels on top
    for kv in (eager, fast):
        kv.reset()
        kv.forward(long, 1)
    assert fast.tiled and not eager.tiled  # the eager prefill wrote K into the kernels' tiles
    n = len(long)
    assert not apart(torch_llama.key_rows(fast.k, n, True), torch_llama.key_rows(eager.k, n, False), model.config, n)
    assert not apart(fast.forward([9, 10, 11], 3), eager.forward([9, 10, 11], 3), model.config, len(long) + 3)


@torch.inference_mode()
def test_a_kernel_that_does_not_build_is_said_once_and_the_passes_use_f_linear(model, monkeypatch, capsys):
    def broken():
        raise RuntimeError("CppCompileError: C++ compile error\nmore lines")

    ref = type(model).from_pretrained(model.name_or_path, dtype=torch.float32).eval()
    monkeypatch.setattr(packed_matmul, "_kernel", broken)
    packed_matmul._build_failure.cache_clear()
    try:
        fast = LlamaFast(model)
        LlamaFast(ref)  # a second model in the same process: no second line
        why = fast.weights.why_not_packed
        assert why == "the kernel did not build: CppCompileError: C++ compile error"
        assert capsys.readouterr().err.count(f"torch: packed matmul: {why}; passes of several tokens use F.linear") == 1
        assert fast.head.packed is None
        ids = torch.tensor([[5, 17, 42, 9, 60]])
        assert not apart(fast.forward(ids[0].tolist(), 5), ref(input_ids=ids).logits[0], model.config, 5)
    finally:
        packed_matmul._build_failure.cache_clear()


@pytest.fixture(scope="module")
def smollm2_shape():
    """Random weights in SmolLM2-135M's shape (30 layers, 576 wide, 9 query and 3 kv heads of 64,
    1536 intermediate, 49152 tokens), float32."""
    from spec_harness.models.synthetic import build_model, llama_config, shape_config

    return build_model(llama_config(shape_config("smollm2-135m", "target"), "target"), seed=3).float()


@pytest.mark.slow
@torch.inference_mode()
def test_the_kernels_at_smollm2s_real_shape_on_two_threads_compute_what_pytorch_does(smollm2_shape):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        eager = TorchKV(copy.deepcopy(smollm2_shape), 49152, kernels=False, packed=False)  # weights are laid out once per model
        fast = TorchKV(smollm2_shape, 49152)
        assert fast.lean.kernels and fast.lean.kernel_passes and eager.lean.weights.why_not_packed == "turned off (the eager forward)"
        prompt = list(range(100, 400))  # a prefill longer than a kernel pass, then steps and verify passes over it
        for ids, n in ((prompt, 1), ([7], 1), ([8, 9, 10, 11, 12], 5), ([13], 1)):
            want, got = eager.forward(ids, n), fast.forward(ids, n)
            assert not apart(got, want, smollm2_shape.config, len(fast)), len(ids)
            if len(ids) <= torch_llama.PASS_MAX_TOKENS:  # a step or a pass through the kernels, on both threads
                assert llama_step.threads_used() == 2
    finally:
        torch.set_num_threads(before)


@torch.inference_mode()
def test_the_kernels_attention_off_the_vector_grid_computes_what_pytorch_does():
    """Heads of 24 (a dot product of a whole vector and a part, on AVX-512 and AVX2 alike), lengths
    off every multiple of 16, and a verify pass's 15 query rows per kv head, its positions split
    between the threads: the kernels against the eager forward."""
    from spec_harness.models.synthetic import build_model, llama_config

    cfg = {"model_type": "llama", "hidden_size": 144, "intermediate_size": 192, "num_hidden_layers": 2,
           "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 24, "vocab_size": 300,
           "max_position_embeddings": 256}
    model = build_model(llama_config(cfg, "target"), seed=5).float()
    eager = TorchKV(copy.deepcopy(model), 300, kernels=False, packed=False)
    fast = TorchKV(model, 300)
    assert fast.lean.kernels and fast.lean.kernel_passes
    for ids, n in ((list(range(3, 74)), 1), ([7], 1), ([8, 9, 10, 11, 12], 5), ([13], 1), ([14, 15, 16], 3)):
        want, got = eager.forward(ids, n), fast.forward(ids, n)
        assert not apart(got, want, model.config, len(fast)), len(ids)


@torch.inference_mode()
def test_n_threads_1_runs_the_kernels_on_one_thread(tiny_pair):
    """The kernels' team is the thread count --threads sets (torch_common), counted by the kernels."""
    from spec_harness.core.config import GenerationSettings, PairSpec, RuntimeSettings
    from spec_harness.runtimes.pytorch import TorchRuntime

    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            rt = TorchRuntime(RuntimeSettings(n_threads=n, torch_forward="kernels"))
            rt.load(PairSpec(name="tiny", target=tiny_pair.target, draft=tiny_pair.draft))
            rt.generate_baseline(rt.encode("hello there"), GenerationSettings(max_new_tokens=4))
            assert rt.describe()["torch_forward"] == "kernels" and llama_step.threads_used() == n
            rt.close()
    finally:
        torch.set_num_threads(before)


def test_the_kernels_refuse_arguments_that_do_not_fit_with_one_line(model):
    """A tensor of another dtype, shape or stride would be read past its end: refused, named."""
    fast = LlamaFast(model)
    w, inner = fast.weights, model.model
    hd, H = fast.hd, inner.embed_tokens.weight.shape[1]
    fast._reserve(4)
    args = dict(emb_row=inner.embed_tokens.weight[5], cos=torch.ones(hd), sin=torch.zeros(hd), k=fast.k, v=fast.v,
                length=0, w_in=w.norms[0], w_qkv=w.stacks[0], w_o=w.stacks[1], w_post=w.norms[1], w_gu=w.stacks[2],
                w_down=w.stacks[3], head=fast.head.weight, norm=inner.norm.weight, eps=1e-5, nh=fast.nh, nkv=fast.nkv, hd=hd)
    assert llama_step.step(**args).shape == (fast.head.weight.shape[0],)
    for bad, why in ((dict(emb_row=torch.ones(H, dtype=torch.float64)), "emb_row must be a contiguous CPU torch.float32 tensor of shape"),
                     (dict(w_qkv=w.stacks[0][:, :-16]), "w_qkv must be"),
                     (dict(head=fast.head.weight.t().contiguous().t()), "head must be"),
                     (dict(length=fast.capacity), f"do not fit the {fast.capacity}-position cache"),
                     (dict(nkv=fast.nkv + 1), "not a Llama step")):
        with pytest.raises(ValueError, match="llama_step: .*" + re.escape(why)):
            llama_step.step(**{**args, **bad})
    with pytest.raises(ValueError, match="packed_matmul: .* does not fit"):
        packed_matmul.matmul(torch.ones(3, H + 1), fast.head.packed, fast.head.weight.shape[0])
