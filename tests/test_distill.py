"""`harness models distill` on the tiny pair: the loss goes down, a checkpoint resumes to the same
result as an uninterrupted run, and the exported GGUF loads in transformers, in llama.cpp (where
the installed build runs on this CPU) and as the draft of the torch runtime."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from spec_harness.core.errors import HarnessError
from spec_harness.models.distill import build_draft, distill_loss, train
from spec_harness.models.distill_config import DistillConfig

TEXT = (
    "The water cycle moves water between the oceans, the air and the land. Heat from the sun evaporates "
    "water from seas and lakes; the vapour rises, cools and condenses into clouds; the clouds release rain "
    "or snow; and rivers carry the water back to the sea. Plants take up water through their roots. "
) * 6


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("text") / "water.txt"
    p.write_text(TEXT)
    return p


def _cfg(tiny_pair, text_file, out, **kw) -> DistillConfig:
    base = dict(target=tiny_pair.target, out=str(out), steps=12, batch=4, seq_len=32, lr=1e-2, width=32, layers=1,
                top_k=8, max_chunks=16, ckpt_every=4, text=(str(text_file),), seed=0)
    return DistillConfig(**{**base, **kw})


def test_loss_goes_down(tiny_pair, text_file, tmp_path):
    r = train(_cfg(tiny_pair, text_file, tmp_path / "w"), progress=False)
    losses = r["losses"]
    assert len(losses) == 12 and r["step"] == 12
    assert sum(losses[-3:]) / 3 < 0.8 * sum(losses[:3]) / 3, losses
    assert (tmp_path / "w" / "ckpt.pt").exists() and (tmp_path / "w" / "teacher.pt").exists()


def test_resume_matches_an_uninterrupted_run(tiny_pair, text_file, tmp_path):
    whole = train(_cfg(tiny_pair, text_file, tmp_path / "a", steps=8), progress=False)
    cfg = _cfg(tiny_pair, text_file, tmp_path / "b", steps=8)
    part = train(cfg, progress=False, stop_after=4)
    assert part["step"] == 4
    logs = []
    rest = train(cfg, resume=True, progress=False, log=logs.append)
    assert "resumed from step 4" in logs and rest["step"] == 8
    assert rest["losses"][:4] == part["losses"]
    assert rest["losses"] == pytest.approx(whole["losses"], rel=1e-4)


def test_resume_with_a_changed_corpus_does_not_reuse_wrong_teacher_rows(tiny_pair, text_file, tmp_path):
    """The teacher cache is keyed by chunk content: new text on disk means new teacher rows, not
    the old rows of whatever chunk used to sit at that position."""
    from spec_harness.models.distill import TeacherCache

    cfg = _cfg(tiny_pair, text_file, tmp_path / "c", steps=2)
    train(cfg, progress=False)
    other = tmp_path / "other.txt"
    other.write_text(TEXT.upper())
    cfg2 = _cfg(tiny_pair, other, tmp_path / "c", steps=3)
    train(cfg2, resume=True, progress=False)
    cache = TeacherCache(tmp_path / "c")
    assert all(isinstance(k, str) for k in cache.data) and len(cache.data) > 8


def test_a_grown_draft_starts_as_its_source_and_keeps_training(tiny_pair, text_file, tmp_path):
    """--init-from a 1-layer run with --layers 3: the two new layers are the identity at first (same
    logits as the source), and training the grown draft moves them and lowers the loss further."""
    from transformers import LlamaForCausalLM

    from spec_harness.models.distill import grow_draft

    first = train(_cfg(tiny_pair, text_file, tmp_path / "a", steps=6), progress=False)
    src = LlamaForCausalLM.from_pretrained(first["draft_dir"]).eval()
    ids = torch.tensor([[1, 5, 9, 13, 7]])
    grown = grow_draft(LlamaForCausalLM.from_pretrained(first["draft_dir"]).eval(), 3)
    assert len(grown.model.layers) == 3 and grown.config.num_hidden_layers == 3
    assert torch.allclose(grown(input_ids=ids).logits, src(input_ids=ids).logits, atol=1e-5)
    with pytest.raises(HarnessError, match="would drop some"):
        grow_draft(src, 0)

    second = train(_cfg(tiny_pair, text_file, tmp_path / "b", steps=6, layers=3, init_from=first["draft_dir"]),
                   progress=False)
    assert second["losses"][0] == pytest.approx(first["losses"][-1], rel=0.5)  # starts where the source ended
    assert second["losses"][0] < 0.8 * first["losses"][0]
    out = LlamaForCausalLM.from_pretrained(second["draft_dir"])
    assert out.config.num_hidden_layers == 3 and out.model.layers[2].self_attn.o_proj.weight.abs().max() > 0


def test_no_training_text_is_one_clear_error(tiny_pair, tmp_path):
    with pytest.raises(HarnessError, match="no training text"):
        train(DistillConfig(target=tiny_pair.target, out=str(tmp_path / "w"), steps=1, width=32, max_chunks=0),
              progress=False)
    with pytest.raises(HarnessError, match="wider than the target"):
        train(DistillConfig(target=tiny_pair.target, out=str(tmp_path / "w"), steps=1, width=512), progress=False)


def test_distill_loss_is_zero_gradient_at_the_teacher():
    logits = torch.randn(2, 3, 10)
    top_lp, top_ids = torch.log_softmax(logits, -1).topk(10, -1)
    s = logits.clone().requires_grad_(True)
    distill_loss(s, top_ids.int(), top_lp.half(), torch.ones(2, 3, dtype=torch.bool)).backward()
    assert s.grad.abs().max() < 1e-3


def test_position_alpha_is_the_overlap_of_the_two_distributions():
    from spec_harness.models.agreement import position_alpha

    p = torch.tensor([[[2.0, 0.0, -1.0]]])  # [1, 1, 3]
    assert position_alpha(p, p.clone())[0, 0].item() == pytest.approx(1.0)
    one_hot = lambda i: torch.full((1, 1, 3), -30.0).index_fill(-1, torch.tensor([i]), 30.0)  # noqa: E731
    assert position_alpha(one_hot(0), one_hot(1))[0, 0].item() == pytest.approx(0.0, abs=1e-6)
    # a half/half draft against a sure target: min(1, 0.5) + min(0, 0.5) = 0.5
    half = torch.tensor([[[0.0, 0.0, -60.0]]])
    assert position_alpha(one_hot(0), half)[0, 0].item() == pytest.approx(0.5, abs=1e-6)
    # temperature sharpens both sides: at T -> 0 the overlap is top-1 agreement
    assert position_alpha(torch.tensor([[[1.0, 0.9, 0.0]]]), torch.tensor([[[0.9, 1.0, 0.0]]]), 0.01)[0, 0].item() < 0.01


@pytest.fixture(scope="module")
def exported(tiny_pair, tmp_path_factory):
    from spec_harness.models.gguf_writer import write_gguf
    from spec_harness.models.loading import load_hf_model, load_hf_tokenizer

    target = load_hf_model(tiny_pair.target, "target", torch.float32, "cpu")
    tok = load_hf_tokenizer(tiny_pair.target, "target")
    draft = build_draft(target, 32, 1, seed=1)
    folder = tmp_path_factory.mktemp("gguf")
    return draft, tok, {q: write_gguf(draft, folder / f"draft-{q}.gguf", qtype=q, tokenizer=tok, reader="transformers")
                        for q in ("f32", "q8_0")}


def test_exported_gguf_loads_in_transformers(exported):
    from spec_harness.models.gguf_writer import roundtrip_error
    from spec_harness.models.loading import load_hf_tokenizer

    draft, tok, paths = exported
    ids = tok.encode("The water cycle moves water")
    assert roundtrip_error(draft, paths["f32"], ids) < 1e-4
    assert roundtrip_error(draft, paths["q8_0"], ids) < 0.1 * 8  # q8_0 noise, logits of std ~ a few units
    assert load_hf_tokenizer(str(paths["q8_0"]), "draft").encode("hello") == tok.encode("hello")


def test_a_4_bit_embedding_is_smaller_and_still_close(exported, tmp_path):
    """--embed-quant q4_0: the embedding/output matrix in 4 bits, the rest as before."""
    from spec_harness.models.gguf_writer import roundtrip_error, write_gguf

    draft, tok, paths = exported
    q4 = write_gguf(draft, tmp_path / "draft-q4e.gguf", qtype="q8_0", tokenizer=tok, embed_qtype="q4_0", reader="transformers")
    assert q4.stat().st_size < paths["q8_0"].stat().st_size
    ids = tok.encode("The water cycle moves water")
    err8, err4 = roundtrip_error(draft, paths["q8_0"], ids), roundtrip_error(draft, q4, ids)
    logits = draft(input_ids=torch.tensor([ids])).logits
    spread = float(logits.max() - logits.min())
    assert err8 < err4 < 0.25 * spread, (err8, err4, spread)


def test_exported_gguf_is_a_draft_in_the_torch_runtime(tiny_pair, exported):
    from spec_harness.core.config import GenerationSettings, RuntimeSettings
    from spec_harness.models.presets import resolve_pair
    from spec_harness.runtimes.pytorch import TorchRuntime

    pair = resolve_pair(target=tiny_pair.target, draft=str(exported[2]["q8_0"]))
    rt = TorchRuntime(RuntimeSettings(device="cpu"))
    rt.load(pair)
    ids = rt.encode("Photosynthesis is")
    gen = GenerationSettings(gamma=3, max_new_tokens=10, ignore_eos=True)
    assert rt.generate_speculative(ids, gen).token_ids == rt.generate_baseline(ids, gen).token_ids


def _llama_cpp_loads(path) -> subprocess.CompletedProcess:
    code = (
        "import sys, llama_cpp\n"
        "m = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, verbose=False)\n"
        "m.eval([1, 2, 3]); print('vocab', m.n_vocab())\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    if r.returncode < 0:  # killed by a signal: e.g. SIGILL, a build for an ISA this CPU lacks (AVX-512)
        pytest.fail(f"llama.cpp died with signal {-r.returncode}: scripts/setup.sh builds it for this CPU")
    return r


def test_shipped_draft_loads_in_llama_cpp():
    """The default draft (SmolLM2 tokenizer, copied from the target GGUF) loads and runs in llama.cpp.
    (The tiny pairs' byte-level vocabulary has no BPE merges, which llama.cpp's gpt2 loader requires,
    so the tiny export is checked in transformers and the torch runtime only.)"""
    pytest.importorskip("llama_cpp")
    from spec_harness.models.presets import DRAFT_GGUF

    if not DRAFT_GGUF.is_file():
        pytest.skip(f"{DRAFT_GGUF} not built")
    r = _llama_cpp_loads(DRAFT_GGUF)
    assert r.returncode == 0, r.stderr
    assert "vocab 49152" in r.stdout
    assert DRAFT_GGUF.stat().st_size <= 16 * 2**20


def test_cli_distill_writes_a_gguf(tiny_pair, text_file, tmp_path):
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    out = tmp_path / "d.gguf"
    r = CliRunner().invoke(main, ["models", "distill", "--target", tiny_pair.target, "--out", str(out),
                                  "--work", str(tmp_path / "w"), "--steps", "3", "--batch", "2", "--seq-len", "16",
                                  "--width", "32", "--layers", "1", "--max-chunks", "8", "--text", str(text_file),
                                  "--no-progress"])
    assert r.exit_code == 0, r.output
    assert out.is_file() and "wrote" in r.output


def test_training_on_generated_answers_reports_heldout_agreement(tiny_pair, tmp_path):
    """The target's own answers (llama.cpp, tiny GGUF) train the draft; the last of them are held
    out, never trained on, and agreement on them is logged and kept in the checkpoint."""
    pytest.importorskip("llama_cpp")
    from spec_harness.models.distill import heldout_split, teacher_records
    from spec_harness.models.gguf_writer import ensure_tiny_gguf
    from spec_harness.models.teacher_data import ensure_generated

    t_gguf, _ = ensure_tiny_gguf("tiny", "f32")
    gen = ensure_generated(str(t_gguf), tmp_path / "gen.jsonl", 44, max_new=8, k=8, temperature=1.0,
                           batch=22, threads=1, progress=False)
    recs = teacher_records((str(gen),), 32, 8)
    held = heldout_split(recs)
    assert len(recs) == 44 and len(held) == 2
    logs = []
    cfg = DistillConfig(target=tiny_pair.target, out=str(tmp_path / "w"), steps=4, batch=4, seq_len=32, lr=1e-2,
                        width=32, layers=1, top_k=8, max_chunks=0, ckpt_every=4, eval_every=2,
                        teacher_jsonl=(str(gen),))
    r = train(cfg, progress=False, log=logs.append)
    assert [e["step"] for e in r["evals"]] == [0, 2, 4]
    assert r["evals"][0]["positions"] == sum(int(h["mask"].sum()) for h in held) > 0
    assert all(0.0 <= e["alpha_t1"] <= 1.0 and 0.0 <= e["top1"] <= 1.0 for e in r["evals"])
    assert sum("held-out alpha" in line for line in logs) == 3
    assert torch.load(tmp_path / "w" / "ckpt.pt", weights_only=False)["evals"] == r["evals"]


def test_cli_generate_needs_a_gguf_target(tiny_pair, tmp_path):
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    r = CliRunner().invoke(main, ["models", "distill", "--target", tiny_pair.target, "--out", str(tmp_path / "d.gguf"),
                                  "--generate", "10", "--no-progress"])
    assert r.exit_code != 0 and "--generate runs the target in llama.cpp" in r.output
    assert not (tmp_path / "d.gguf").exists()


def test_early_exit_export_from_the_command_line(tiny_pair, tmp_path):
    """`models distill --early-exit 1 --embed-quant q4_0`: the target's first layer, norm and head,
    with the embedding stored in 4 bits."""
    import gguf
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    out = tmp_path / "ee.gguf"
    r = CliRunner().invoke(main, ["models", "distill", "--target", tiny_pair.target, "--early-exit", "1",
                                  "--embed-quant", "q4_0", "--out", str(out)])
    assert r.exit_code == 0, r.output
    reader = gguf.GGUFReader(str(out))
    types = {t.name: t.tensor_type for t in reader.tensors}
    assert types["token_embd.weight"] == gguf.GGMLQuantizationType.Q4_0
    assert not any(n.startswith("blk.1.") for n in types) and any(n.startswith("blk.0.") for n in types)


@pytest.mark.parametrize("args, needle", [(["--steps", "-1"], "--steps must be >= 0"), (["--batch", "0"], "--batch must be >= 1"),
                                          (["--lr", "0"], "--lr must be > 0"),
                                          (["--teacher-top-k", "0"], "--teacher-top-k must be >= 1")])
def test_impossible_distill_settings_are_one_line(tiny_pair, tmp_path, args, needle):
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    r = CliRunner().invoke(main, ["models", "distill", "--target", tiny_pair.target, "--out", str(tmp_path / "d.gguf"),
                                  "--work", str(tmp_path / "w"), *args, "--no-progress"])
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output
    assert not (tmp_path / "w").exists()  # refused before anything was loaded or written


@pytest.mark.slow
def test_the_writer_reproduces_the_shipped_draft_byte_for_byte(tmp_path):
    """The one GGUF writer, fed the shipped draft's own weights (dequantized by transformers) and the
    recipe's settings, writes the very file the repository ships."""
    from spec_harness.models.gguf_writer import write_gguf
    from spec_harness.models.loading import load_hf_model
    from spec_harness.models.presets import DRAFT_GGUF
    from spec_harness.models.smollm2 import smollm2_gguf

    draft = load_hf_model(str(DRAFT_GGUF), "draft", torch.float32, "cpu")
    out = write_gguf(draft, tmp_path / "again.gguf", qtype="q8_0", embed_qtype="q4_0", name="distilled draft",
                     reference_gguf=str(smollm2_gguf()))
    assert out.read_bytes() == DRAFT_GGUF.read_bytes()
