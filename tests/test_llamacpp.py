"""The llama.cpp runtimes on the tiny pair exported to GGUF: export, tokenization, greedy
equalities (speculative == baseline, llamacpp == torch), rollback at every rejection position,
the phase identity, and sampling. CPU only, a few seconds each.

llama-cpp-python is a declared dependency: these tests import it and fail if it is missing.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import llama_cpp  # noqa: F401  (a hard dependency: no importorskip, see the module docstring)

from spec_harness.core import sampling
from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from spec_harness.models import llama_files
from spec_harness.models.gguf_writer import ensure_tiny_gguf, permute_qk
from spec_harness.runtimes import llama_common as lc
from spec_harness.runtimes.llamacpp import LlamaCppRuntime, LlamaKV
from spec_harness.runtimes.loop import DraftModel, Loop, Model

GREEDY = SamplingParams()
TEXTS = ["Hello world", "The quick brown fox jumps over the lazy dog.", "  two  spaces\n\ttab",
         "héllo ünïcödé 日本語 🎉", "1234567890 !@#$%^&*()"]
SETTINGS = RuntimeSettings(n_threads=1, n_ctx=512)


def gen(n=40, gamma=4, s=GREEDY, seed=0):
    return GenerationSettings(s, gamma, n, seed, ignore_eos=True)


@pytest.fixture(scope="session")
def llama_self(tiny_self):
    rt = LlamaCppRuntime(SETTINGS)
    rt.load(tiny_self)
    yield rt
    rt.close()


@pytest.fixture(scope="session")
def hf_tok(tiny_pair):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_pair.target)


# ---- export -------------------------------------------------------------------------------------


def test_permute_qk_interleaves_halves():
    """Head rows [a0 a1 | b0 b1] (HF rotate_half pairs a_i, b_i) -> [a0 b0 a1 b1] (adjacent pairs)."""
    w = np.arange(8, dtype=np.float32)[:, None]  # 2 heads x head_dim 4, hidden 1
    assert permute_qk(w, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_gguf_tokenizes_like_hf(llama_rt, hf_tok):
    for text in TEXTS:
        ids = hf_tok.encode(text, add_special_tokens=False)
        assert llama_files.tokenize(llama_rt.vocab, text, False, False) == ids, text
        assert llama_rt.encode(text) == ids  # no chat template, no BOS: raw ids as the torch runtime
        assert llama_rt.decode(ids) == text


@pytest.mark.parametrize("outtype,atol", [("f32", 2e-3), ("f16", 0.1), ("q8_0", 0.5)])
def test_gguf_logits_match_hf(tiny_pair, hf_tok, outtype, atol):
    """Same weights, same logits: catches a wrong q/k permutation, tensor name or norm epsilon."""
    from transformers import AutoModelForCausalLM

    t_gguf, _ = ensure_tiny_gguf("tiny", outtype)
    ids = hf_tok.encode(TEXTS[1], add_special_tokens=False)
    hf = AutoModelForCausalLM.from_pretrained(tiny_pair.target, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()  # [S, V]
    model = llama_files.load_model(str(t_gguf), "target")
    kv = LlamaKV(model, lc.context_params(SETTINGS, 256), 257)
    try:
        got = kv.forward(ids, len(ids)).numpy().copy()  # [S, V]
    finally:
        kv.close()
        llama_cpp.llama_model_free(model)
    assert np.abs(got - ref).max() < atol * np.abs(ref).max()
    if outtype == "f32":
        assert (got.argmax(-1) == ref.argmax(-1)).all()


def test_padded_vocab_exports_unused_rows():
    t, d = ensure_tiny_gguf("tiny-padded", "f32")
    models = [llama_files.load_model(str(p), "x") for p in (t, d)]
    try:
        vocabs = [llama_cpp.llama_model_get_vocab(m) for m in models]
        assert [llama_cpp.llama_vocab_n_tokens(v) for v in vocabs] == [257 + 15, 257 + 7]
        assert llama_files.check_vocabularies(*vocabs) == 257
    finally:
        for m in models:
            llama_cpp.llama_model_free(m)


# ---- greedy equalities ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def prompt_ids(llama_rt):
    return llama_rt.encode("The quick brown fox")


@pytest.fixture(scope="session")
def llama_baseline(llama_rt, prompt_ids):
    return llama_rt.generate_baseline(prompt_ids, gen(40)).token_ids


@pytest.mark.parametrize("gamma", range(1, 9))
def test_greedy_speculative_equals_baseline(llama_rt, prompt_ids, llama_baseline, gamma):
    g = llama_rt.generate_speculative(prompt_ids, gen(40, gamma))
    assert g.token_ids == llama_baseline
    assert sum(r.emitted for r in g.rounds) == 40
    assert all(r.drafted <= gamma for r in g.rounds)
    assert 0 < sum(r.accepted for r in g.rounds) < sum(r.drafted for r in g.rounds)  # a real mix


def test_llamacpp_greedy_equals_torch(llama_rt, torch_rt, prompt_ids, llama_baseline):
    """Same weights (f32 GGUF export), three runtimes' loops, one answer."""
    assert torch_rt.encode("The quick brown fox") == prompt_ids
    assert torch_rt.generate_baseline(prompt_ids, gen(40)).token_ids == llama_baseline
    assert torch_rt.generate_speculative(prompt_ids, gen(40, 4)).token_ids == llama_baseline


def test_self_draft_accepts_everything(llama_self, prompt_ids, llama_baseline):
    """Draft = target: every draft is accepted. Fails if the draft misses d_gamma after a full
    accept (its cache one position short), a defect of the first write-up's code."""
    g = llama_self.generate_speculative(prompt_ids, gen(40, 4))
    assert g.token_ids == llama_baseline
    assert all(r.accepted == r.drafted for r in g.rounds)


# ---- rollback -------------------------------------------------------------------------------------


class _RejectAt(DraftModel):
    """Self-draft drafter whose draft is wrong at position j of every round: rejection at j."""

    j = 0

    def pick(self, logits, s, rng, i):
        d, q = super().pick(logits, s, rng, i)
        return ((d + 1) % self.model.vocab if i == self.j else d), q


class _Checked(Model):
    """A context that, after each decode, compares its logits with a fresh context's on the
    tokens we believe it holds."""

    def __init__(self, kv: LlamaKV, role: str, fresh: LlamaKV, checked: list):
        self.kv, self.vocab, self.role, self.fresh, self.checked = kv, kv.vocab, role, fresh, checked

    def forward(self, ids, n_logits):
        logits = self.kv.forward(ids, n_logits)
        self.fresh.reset()
        ref = self.fresh.forward(list(self.kv.ids), len(logits))
        np.testing.assert_allclose(logits, ref, rtol=0, atol=1e-3 * float(ref.abs().max()))
        self.checked.append(self.role)
        return logits

    def crop(self, length):
        self.kv.crop(length)

    def reset(self):
        self.kv.reset()

    def __len__(self):
        return len(self.kv)


@pytest.mark.parametrize("j", range(6))
def test_rollback_at_every_rejection_position(llama_self, tiny_self, prompt_ids, llama_baseline, j):
    """After each decode, the context's logits equal a fresh context's on the tokens we believe it
    holds: a rejected draft's KV left in place (cropped one position too late) would change them."""
    gamma = 6
    rt = llama_self
    fresh = LlamaKV(rt.models[0], lc.context_params(SETTINGS, 512), rt.target.vocab)
    checked = []
    target = _Checked(rt.target, "target", fresh, checked)
    drafter = _RejectAt(_Checked(rt.draft, "draft", fresh, checked))
    drafter.j = j
    try:
        g = Loop(target, drafter, rt.is_eos).generate(prompt_ids, gen(30, gamma))
    finally:
        fresh.close()
    assert g.token_ids == llama_baseline[:30]
    full = [r for r in g.rounds if r.drafted > j]
    assert full and all(r.accepted == j for r in full)
    assert {"target", "draft"} <= set(checked)
    assert len(target) == len(prompt_ids) + 30 - 1  # both caches hold seq[:-1] after a rejection


def test_crop_removes_the_rejected_kv(llama_rt):
    """llama_memory_seq_rm really forgets: decoding x after cropping y equals decoding x fresh."""
    kv = llama_rt.target
    kv.reset()
    kv.forward([72, 101, 108], 1)
    kv.forward([200, 201], 1)
    kv.crop(3)
    got = kv.forward([108, 111], 2).clone()
    kv.reset()
    ref = kv.forward([72, 101, 108, 108, 111], 2).clone()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-3 * float(ref.abs().max()))


# ---- phases and counters ----------------------------------------------------------------------------


def _identity(p):
    parts = [p.prefill_s, p.draft_s, p.verify_s, p.sampling_s, p.unaccounted_s]
    assert all(x is not None and x >= 0 for x in parts)
    assert abs(sum(parts) - p.wall_s) < 1e-6


def test_phase_identity_and_counters(llama_rt, prompt_ids):
    for g in (llama_rt.generate_baseline(prompt_ids, gen(16)), llama_rt.generate_speculative(prompt_ids, gen(16, 4))):
        _identity(g.phases)
        for r in g.rounds:
            assert abs(r.draft_s + r.verify_s + r.sampling_s + r.unaccounted_s - r.wall_s) < 1e-6
        perf = g.extra["llama_perf"]["target"]
        assert perf["n_p_eval"] + perf["n_eval"] > 0  # reset per generation, counted again
    spec = g
    assert spec.phases.draft_s > 0 and spec.extra["llama_perf"]["draft"]["n_eval"] > 0
    for role, c in spec.extra["decode_ms"].items():  # our booking of decodes agrees with llama.cpp's clock
        assert c["llama_ms"] <= c["ours_ms"] * 1.05 + 0.5, (role, c)
    # llama.cpp books every multi-token decode as prompt eval: the verify batches land there
    assert spec.extra["llama_perf"]["target"]["n_p_eval"] == len(prompt_ids) - 1 + sum(r.drafted + 1 for r in spec.rounds if r.drafted)


# ---- sampling -------------------------------------------------------------------------------------


def test_sampling_runs_to_the_end_at_every_length(llama_rt, prompt_ids):
    """max_new_tokens small enough that the last round drafts nothing (g = 0)."""
    s = SamplingParams(temperature=0.9, top_p=0.95, top_k=50)
    for n in range(1, 7):
        for seed in range(3):
            g = llama_rt.generate_speculative(prompt_ids, gen(n, 4, s, seed))
            assert len(g.token_ids) == n and sum(r.emitted for r in g.rounds) == n


def test_sampled_baseline_equals_torch(llama_rt, torch_rt, prompt_ids):
    """Same logits, same sampling code, same seed: the same tokens."""
    s = SamplingParams(temperature=1.0)
    for seed in range(3):
        a = llama_rt.generate_baseline(prompt_ids, gen(20, 4, s, seed)).token_ids
        b = torch_rt.generate_baseline(prompt_ids, gen(20, 4, s, seed)).token_ids
        assert a == b


def test_speculative_sampling_keeps_the_target_distribution(llama_rt):
    """The first emitted token passes the ratio test (gamma 1); its frequencies follow p."""
    from scipy.stats import chisquare

    s = SamplingParams(temperature=4.0)
    prompt = llama_rt.encode("fox")
    llama_rt.target.reset()
    logits = llama_rt.target.forward(prompt, 1).clone()  # [1, V]
    p = sampling.probs_from_logits(logits, s)[0].double().numpy()
    n = 600
    counts = np.zeros(len(p))
    for seed in range(n):
        counts[llama_rt.generate_speculative(prompt, gen(2, 1, s, seed)).token_ids[0]] += 1
    top = np.argsort(p)[::-1][:5]  # the likeliest ids, the rest pooled
    obs = np.append(counts[top], n - counts[top].sum())
    exp = np.append(p[top], 1 - p[top].sum())
    exp = exp / exp.sum() * n
    assert exp.min() > 5, exp
    assert chisquare(obs, exp).pvalue > 1e-3


def test_gpu_layers_default_follows_the_build_and_rows_say_the_device(llama_rt, tiny_gguf):
    """--n-gpu-layers unset: every layer where this llama.cpp build offloads, else 0; a value given
    is kept; the runtime's device (run.json, rows, verdict) says where the layers ran."""
    import llama_cpp

    from spec_harness.core.config import RuntimeSettings
    from spec_harness.runtimes import llama_common as lc

    offloads = bool(llama_cpp.llama_supports_gpu_offload())
    assert lc.gpu_layers(RuntimeSettings()) == (-1 if offloads else 0)
    assert lc.gpu_layers(RuntimeSettings(n_gpu_layers=0)) == 0 and lc.gpu_layers(RuntimeSettings(n_gpu_layers=7)) == 7
    desc = lc.describe_files((tiny_gguf.target_gguf,), RuntimeSettings())
    assert desc["device"] == ("gpu (all layers)" if offloads else "cpu")
    assert lc.describe_files((tiny_gguf.target_gguf,), RuntimeSettings(n_gpu_layers=0))["device"] == "cpu"
    assert llama_rt.describe()["device"] == ("gpu (all layers)" if offloads else "cpu")
