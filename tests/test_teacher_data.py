"""Teacher data (models/teacher_data.py) on the tiny f32 pair: llama.cpp's batched generation gives
the target's own greedy continuation and its top-k log-probs (checked against transformers), a
stopped run resumes without repeating or losing answers, and distillation's held-out agreement
measures what it says."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("llama_cpp")

from spec_harness.models.gguf_writer import ensure_tiny_gguf  # noqa: E402
from spec_harness.models.teacher_data import top_logprobs, ensure_generated, generate_sequences  # noqa: E402
from tests.numerics import log_softmax_atol  # noqa: E402


@pytest.fixture(scope="module")
def tiny_target():
    from spec_harness.models.tiny import ensure_pair

    t, _ = ensure_pair("tiny")
    t_gguf, _ = ensure_tiny_gguf("tiny", "f32")
    return str(t), str(t_gguf)


def _hf_greedy(folder: str, prompt: list[int], n: int, k: int):
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids, tops = list(prompt), []
    with torch.no_grad():
        for _ in range(n):
            lp = torch.log_softmax(m(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)  # [V]
            tops.append(lp.topk(k))
            ids.append(int(lp.argmax()))
    return ids[len(prompt):], tops


def test_top_logprobs_are_the_sorted_log_softmax_top_k():
    x = torch.randn(3, 50)
    ids, lp = top_logprobs(x.numpy(), 5)
    ref = torch.log_softmax(x, -1).topk(5)
    assert ids.tolist() == ref.indices.tolist()
    # numpy's float32 and torch's, each within its own rounding whatever order either sums in
    assert torch.allclose(torch.from_numpy(lp).float(), ref.values, rtol=0, atol=2 * log_softmax_atol(50, ref.values))
    assert not torch.allclose(torch.from_numpy(lp).float(), torch.log_softmax(x / 1.01, -1).topk(5).values,
                              rtol=0, atol=2 * log_softmax_atol(50, ref.values))  # a temperature 1 % off


def test_batched_greedy_generation_is_the_targets_own(tiny_target):
    folder, gguf = tiny_target
    prompts = [[5, 17, 42, 9], [88, 3, 120], [7, 7, 7, 7, 7, 30]]  # different lengths share a batch
    recs = list(generate_sequences(gguf, prompts, max_new=8, k=4, temperature=0.0, seed=0, batch=2, threads=1))
    assert [r["ids"][: r["start"]] for r in recs] == prompts
    for p, r in zip(prompts, recs):
        gen = r["ids"][r["start"]:]
        ref_ids, ref_tops = _hf_greedy(folder, p, len(gen), 4)
        assert gen == ref_ids
        for (ti, tl), ref in zip(zip(r["top_ids"], r["top_lp"]), ref_tops):
            assert ti[0] == int(ref.indices[0])
            assert torch.allclose(torch.tensor(tl), ref.values, rtol=3e-3, atol=1e-2)  # llama.cpp keeps K/V in f16


def test_ensure_generated_resumes_and_cuts_a_torn_line(tiny_target, tmp_path):
    folder, gguf = tiny_target
    out = tmp_path / "gen.jsonl"
    ensure_generated(gguf, out, 3, max_new=6, k=4, temperature=0.8, seed=0, batch=2, threads=1, progress=False)
    first = out.read_text().splitlines()
    assert len(first) == 3
    out.write_text("\n".join(first) + "\n" + first[0][: len(first[0]) // 2])  # a run killed mid-line
    ensure_generated(gguf, out, 5, max_new=6, k=4, temperature=0.8, seed=0, batch=2, threads=1, progress=False)
    lines = out.read_text().splitlines()
    assert len(lines) == 5 and lines[:3] == first
    assert all(len(json.loads(x)["top_ids"]) == len(json.loads(x)["ids"]) - json.loads(x)["start"] for x in lines)


def test_heldout_agreement_of_the_teacher_with_itself(tiny_target):
    """A draft that is the teacher agrees on every argmax, and its alpha bound is the top-k mass."""
    from transformers import AutoModelForCausalLM

    from spec_harness.models.distill import heldout_agreement

    folder, _ = tiny_target
    m = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = torch.tensor([[5, 17, 42, 9, 60, 61, 2], [88, 3, 120, 4, 4, 1, 0]])
    with torch.no_grad():
        lp = torch.log_softmax(m(input_ids=ids).logits.float(), -1)
    top_lp, top_ids = lp.topk(6, -1)
    mask = torch.ones(ids.shape, dtype=torch.bool)
    held = [{"ids": ids[b], "top_ids": top_ids[b].int(), "top_lp": top_lp[b].half(), "mask": mask[b]} for b in range(2)]
    r = heldout_agreement(m, held, pad=0)
    assert r["top1"] == 1.0 and r["positions"] == 14
    assert r["alpha_t1"] == pytest.approx(float(top_lp.exp().sum(-1).mean()), abs=2e-3)
    other = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        for w in other.parameters():
            w.mul_(-1.0)
    assert heldout_agreement(other, held, pad=0)["alpha_t1"] < r["alpha_t1"]


def test_a_missing_or_broken_target_is_one_clear_error(tmp_path):
    from spec_harness.core.errors import HarnessError

    with pytest.raises(HarnessError, match="not found"):
        next(generate_sequences(str(tmp_path / "nope.gguf"), [[1, 2]], 4, 2, 0.0, 0))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF but not really")
    with pytest.raises(HarnessError, match="could not load"):
        next(generate_sequences(str(bad), [[1, 2]], 4, 2, 0.0, 0))


def test_prompt_sets_are_reproducible_and_never_the_measurement_prompts():
    from spec_harness.harness.prompts import CATEGORIES, builtin as prompts_of
    from spec_harness.models.teacher_prompts import make_prompts

    builtin = {p.text for c in CATEGORIES for p in prompts_of(c)}
    for kind in ("mixed", "explain", "explain-wide", "explain-3"):
        a = make_prompts(200, 3, kind)
        assert a == make_prompts(200, 3, kind) and a != make_prompts(200, 4, kind)
        assert not builtin & set(a)
    for kind in ("explain", "explain-wide", "explain-3"):
        explain = make_prompts(2000, 3, kind)
        assert all(" and " in p and "," in p for p in explain)  # each names at least three parts
        for word in ("photosynthesis", "refrigerator", "circulatory", "industrial revolution", "vaccin", "calvin cycle",
                     "chlorophyll", "compressor, the condenser") + (("immune", "antibod", "heart") if kind == "explain-3" else ()):
            assert not any(word in p.lower() for p in explain), (kind, word)
    from spec_harness.models.teacher_prompts import EXPLAIN_TOPICS, EXPLAIN_TOPICS_2, EXPLAIN_TOPICS_3

    wide = make_prompts(2000, 3, "explain-wide")
    every = EXPLAIN_TOPICS + EXPLAIN_TOPICS_2 + EXPLAIN_TOPICS_3
    assert len({t for t, _ in every}) == len(every)  # no subject in two lists
    assert any(t in p for p in wide for t, _ in EXPLAIN_TOPICS_2) and any(t in p for p in wide for t, _ in EXPLAIN_TOPICS)
    third = make_prompts(2000, 3, "explain-3")
    assert {t for t, _ in EXPLAIN_TOPICS_3} == {t for p in third for t, _ in EXPLAIN_TOPICS_3 if t in p}
    assert all(any(t in p for t, _ in EXPLAIN_TOPICS_3) for p in third)  # the third list's subjects only


@pytest.mark.slow
def test_self_requests_are_the_targets_own_reproducible_and_never_the_measurement_subjects(tmp_path):
    """`--prompts self` on the default target: requests it wrote after the chat template's user
    turn (the same for the same seed), each a usable one; the filter drops the measurement
    prompts' subjects and text that is not plain; the answers' prompts are those requests."""
    import llama_cpp

    from spec_harness.models import llama_files
    from spec_harness.models.smollm2 import smollm2_gguf
    from spec_harness.models.teacher_data import self_requests, usable_request, user_turn

    gguf = str(smollm2_gguf())
    a = self_requests(gguf, 6, seed=1, batch=8, threads=1)
    assert len(a) == 6 and a == self_requests(gguf, 6, seed=1, batch=8, threads=1) != self_requests(gguf, 6, seed=2, batch=8, threads=1)
    assert all(usable_request(r) for r in a)
    assert not usable_request("Explain how vaccines train the immune system.")
    assert not usable_request("Summarize photosynthesis for me, please.")
    assert not usable_request("Ø£ÙĩØ± ØŃØª ÙĦÙħØ´Ø¹ÙĦÙĬØ© text")
    assert not usable_request("Hi")
    model = llama_files.load_model(gguf, "target", vocab_only=True)
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        turn = user_turn(model, vocab)
        assert llama_files.encode_prompt(model, vocab, a[0])[: len(turn)] == turn
        assert [llama_files.token_text(vocab, i) for i in turn[-3:]] == ["<|im_start|>", "user", "Ċ"]
    finally:
        llama_cpp.llama_model_free(model)
    out = ensure_generated(gguf, tmp_path / "self.jsonl", 3, max_new=4, k=2, temperature=0.0, seed=1, batch=8, threads=1,
                           progress=False, prompt_set="self")
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    kept_file = tmp_path / "self.jsonl.requests.json"
    kept = json.loads(kept_file.read_text())
    assert kept["requests"] == a[:3]
    kept_file.write_text(json.dumps({"key": kept["key"], "requests": ["Kept one.", "Kept two.", "Kept three."]}))
    out.write_text("\n".join(out.read_text().splitlines()[:2]) + "\n")  # a stopped run: the third answer is asked again
    ensure_generated(gguf, out, 3, max_new=4, k=2, temperature=0.0, seed=1, batch=8, threads=1, progress=False, prompt_set="self")
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    again = json.loads(lines[2])
    model = llama_files.load_model(gguf, "target", vocab_only=True)
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        assert [r["ids"][: r["start"]] for r in recs] == [llama_files.encode_prompt(model, vocab, q) for q in a[:3]]
        assert again["ids"][: again["start"]] == llama_files.encode_prompt(model, vocab, "Kept three.")  # from the kept requests
    finally:
        llama_cpp.llama_model_free(model)
