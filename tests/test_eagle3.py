"""EAGLE-3 heads: trained on a tiny pair in seconds (models/eagle3_train.py), drafting in our loop
(runtimes/eagle3.py) over the torch runtime's forwards (its C++ kernels and its eager pass) and
llama.cpp's layer inputs, and in the real llama-server (the head converted by llama.cpp's own
converter); the drafting path computes what training computed; greedy output equal to the
baseline; speculative sampling keeps the target's distribution (chi-square, as
tests/test_sampling_distribution.py); bad heads are one line; runtimes without EAGLE-3 say so."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from spec_harness.core.drafters import parse as parse_drafter
from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.core.config import GenerationSettings, PairSpec, RuntimeSettings, SamplingParams
from spec_harness.core.errors import HarnessError
from spec_harness.models.presets import resolve_pair
from tests.numerics import beyond_dot_error

SETTINGS = RuntimeSettings(n_threads=1, n_ctx=512)
PROMPT = "What is 12 times 7? Show your work."


@pytest.fixture(scope="module")
def head():
    from spec_harness.models.eagle3_train import ensure_tiny_head

    return ensure_tiny_head("tiny")


@pytest.fixture(scope="module")
def pair(head):
    return replace(resolve_pair("tiny"), eagle3=str(head))


def _gen(gamma=3, n=40, drafter="eagle3", **kw):
    return GenerationSettings(gamma=gamma, max_new_tokens=n, ignore_eos=True, drafter=drafter, **kw)


def test_training_raises_held_out_agreement(head):
    """The tiny head's first drafting position agrees with the target far more after its 80 steps than at step 0."""
    evals = torch.load(head.parent / "ckpt.pt", weights_only=False)["evals"]
    assert evals[0]["step"] == 0 and evals[-1]["step"] == 80
    assert evals[-1]["top1"][0] > evals[0]["top1"][0] + 0.1, evals


@torch.inference_mode()
@pytest.mark.parametrize("kernels", [True, False])
def test_drafting_computes_what_training_computed(pair, kernels):
    """The target's features through the runtime's forward (C++ kernels, or eager) equal
    transformers' hidden states; the head's drafting cache gives the training forward's logits at
    step 0 (every position, from the target's features) and at step 1 (its own state fed back)."""
    from spec_harness import runtimes
    from spec_harness.models.eagle3_data import target_features
    from spec_harness.models.eagle3_train import batch_of, ttt_forward
    from spec_harness.runtimes.eagle3 import HeadCache, loaded_head

    rt = runtimes.get("torch")(SETTINGS)
    rt.load(pair)
    ids = rt.encode(PROMPT)
    seq = ids + rt.generate_baseline(ids, _gen(drafter="model")).token_ids
    head = loaded_head(rt, _gen().drafter)
    t = rt.target
    if not kernels:
        t.lean.why_no_kernels, t.lean.kernel_passes = "turned off", False
    t.reset()
    t.keep_features(head.cfg.layer_ids)
    for chunk in (seq[:20], seq[20:21], seq[21:25], seq[25:-1]):  # a long pass, a step, short passes
        t.forward(chunk, 1)
    f_rt = t.features(0, len(seq) - 1)
    ref = target_features(rt.hf.target, [{"ids": seq, "start": 0}], head.cfg.layer_ids, 4)[0]
    assert (f_rt - ref["feats"][: len(seq) - 1].float().flatten(1)).abs().max() < 1e-2
    t2d = torch.full((head.cfg.vocab,), -1, dtype=torch.long)
    t2d[head.to_target(torch.arange(head.cfg.draft_vocab))] = torch.arange(head.cfg.draft_vocab)
    feats = torch.cat([f_rt.view(len(seq) - 1, 3, -1), ref["feats"][-1:].float()])  # the last position is never read
    trained = ttt_forward(head, batch_of([{**ref, "feats": feats}], t2d), 2)
    cache = HeadCache(head)
    h = cache.forward(seq[1:], head.combine(f_rt), 0)  # head positions 0 .. n-2
    assert torch.allclose(head.logits(h), trained[0][0][0, : len(seq) - 1], atol=1e-3)
    i = 30  # one drafting step after position i, with the sequence's own next token
    cache.length = i + 1
    h1 = cache.forward([seq[i + 2]], h[i][None], i + 1)
    assert torch.allclose(head.logits(h1)[0], trained[1][0][0, i], atol=1e-3)


def test_greedy_output_is_the_baselines_and_both_loops_draft_alike(pair):
    """torch and llamacpp (our loop over llama.cpp's layer inputs): every gamma gives the baseline's
    ids, and on the float32 tiny pair both draft and accept the same counts (the same features)."""
    from spec_harness import runtimes

    counts = {}
    for name in ("torch", "llamacpp"):
        rt = runtimes.get(name)(SETTINGS)
        rt.load(pair)
        try:
            ids = rt.encode(PROMPT)
            base = rt.generate_baseline(ids, _gen(drafter="model")).token_ids
            for g in (1, 3, 5):
                assert rt.supports(_gen(g)) is None
                s = rt.generate_speculative(ids, _gen(g))
                assert s.token_ids == base
                assert s.phases.draft_s > 0 and all(r.drafted <= g for r in s.rounds)
                counts.setdefault(name, []).append((sum(r.drafted for r in s.rounds), sum(r.accepted for r in s.rounds)))
        finally:
            rt.close()
    assert all(a > 0 for _, a in counts["torch"])
    assert counts["torch"] == counts["llamacpp"]


def test_in_llamacpp_the_heads_passes_get_the_runs_threads_and_sampling_one(pair):
    """The llamacpp runtime samples on one torch thread; the head's passes run on the run's
    threads (--threads 2 here), as llama.cpp's own draft model's, and the one is restored after."""
    from spec_harness import runtimes

    rt = runtimes.get("llamacpp")(RuntimeSettings(n_threads=2))
    rt.load(pair)
    try:
        drafter = rt.drafter(_gen(3))
        with rt.generating():
            assert torch.get_num_threads() == 1
            with drafter._passes():
                assert torch.get_num_threads() == 2
            assert torch.get_num_threads() == 1
        assert runtimes.get("torch")(SETTINGS).head_threads is None  # torch: the generation's own threads
    finally:
        rt.close()


@pytest.fixture(scope="module")
def deep_rt():
    """micro-deep (8 ids, 4 layers) in the torch runtime with an untrained head of 6 draft ids."""
    from spec_harness import runtimes
    from spec_harness.models.eagle3 import HeadConfig
    from spec_harness.models.eagle3_train import build_head
    from spec_harness.models.loading import load_hf_model
    from spec_harness.models.tiny import ensure_pair

    t, d = ensure_pair("micro-deep")
    target = load_hf_model(str(t), "target", torch.float32, "cpu")
    vocab = torch.tensor([0, 1, 2, 4, 5, 7])
    h = build_head(target, HeadConfig.for_target(target.config, len(vocab), (1, 2, 3)), vocab, seed=1)
    with torch.no_grad():  # a head whose q differs from p everywhere
        for lin in (h.o_proj, h.down_proj):
            lin.weight.normal_(0, 0.3)
    folder = Path(t).parent / "eagle3-untrained"
    h.save(folder, torch.float32)
    rt = runtimes.get("torch")(RuntimeSettings(device="cpu"))
    rt.load(replace(resolve_pair("tiny"), name="micro-deep", target=str(t), draft=str(d), target_gguf=None, draft_gguf=None,
                    eagle3=str(folder)))
    return rt, target


@pytest.mark.slow
def test_speculative_sampling_with_a_head_keeps_the_target_distribution(deep_rt):
    from tests.test_sampling_distribution import N, P_THRESHOLD, PROMPT as IDS, chi_square_p, exact_target_distribution

    rt, target = deep_rt
    s = SamplingParams(temperature=1.0)
    samples = [tuple(rt.generate_speculative(IDS, _gen(2, 3, seed=seed, sampling=s)).token_ids) for seed in range(N)]
    p = chi_square_p(samples, exact_target_distribution(target, s))
    assert p > P_THRESHOLD, p
    # and the same test rejects drafts accepted as they come (q's own distribution)
    rigged = []
    rt_accept = __import__("spec_harness.core.sampling", fromlist=["forced"]).forced((1.0,))
    from spec_harness.runtimes.loop import Loop

    for seed in range(N // 3):
        gen = _gen(2, 3, seed=seed, sampling=s)
        rigged.append(tuple(Loop(rt.target, rt.drafter(gen), rt.is_eos, rt_accept).generate(IDS, gen).token_ids))
    assert chi_square_p(rigged, exact_target_distribution(target, s)) < P_THRESHOLD


def test_llama_server_runs_the_head_through_llamas_converter(pair, tmp_path):
    """`-md HEAD.gguf --spec-type draft-eagle3`: greedy output equal to its baseline, the head's
    drafts counted, and the GGUF converted once (cached) for the next server."""
    from spec_harness import runtimes
    from spec_harness.runtimes.server import ServerSetting

    rt = runtimes.get("llama-server")(SETTINGS, workdir=tmp_path)
    rt.load(pair)
    try:
        ids = rt.encode(PROMPT)
        base = rt.generate_baseline(ids, _gen(drafter="model")).token_ids
        s = rt.generate_speculative(ids, _gen(3))
        assert s.token_ids == base
        assert sum(r.drafted for r in s.rounds) > 0 and sum(r.accepted for r in s.rounds) > 0
        argv = rt.servers[ServerSetting.of(_gen(3))].argv
        assert argv[argv.index("--spec-type") + 1] == "draft-eagle3" and argv[argv.index("-md") + 1].endswith(".gguf")
    finally:
        rt.close()


def test_a_head_the_converter_rejects_is_a_skipped_row_for_llama_server_only(pair, head, tmp_path):
    """A tensor llama.cpp's converter cannot map: llama-server skips the head with the converter's
    reason; the torch runtime (which reads only the tensors it needs) runs it."""
    from safetensors.torch import load_file, save_file

    from spec_harness import runtimes

    odd = tmp_path / "odd-head"
    shutil.copytree(head, odd)
    tensors = load_file(str(odd / "model.safetensors"))
    save_file({**tensors, "mystery.weight": torch.zeros(4, 4)}, str(odd / "model.safetensors"))
    gen = _gen(3, drafter=f"eagle3:{odd}")
    rt = runtimes.get("llama-server")(SETTINGS, workdir=tmp_path)
    rt.load(pair)
    try:
        why = rt.supports(gen)
    finally:
        rt.close()
    assert why and "converter refused" in why and "mystery" in why
    torch_rt = runtimes.get("torch")(SETTINGS)
    torch_rt.load(pair)
    assert torch_rt.supports(gen) is None


def test_the_converter_is_found_outside_a_checkout(monkeypatch, tmp_path):
    """Installed elsewhere (no build/ beside the package): the converter is the one in the
    llama-cpp-python source the environment was built from, or $HARNESS_CONVERT_HF_TO_GGUF's; one
    that is not there is refused in one line naming the variable."""
    from spec_harness.models import eagle3

    monkeypatch.setattr(eagle3, "CHECKOUT", tmp_path)
    monkeypatch.delenv(eagle3.CONVERTER_ENV, raising=False)
    if not eagle3.llama_cpp_source():
        pytest.skip("llama-cpp-python was not installed from a source folder (scripts/setup.sh)")
    found = eagle3.converter()
    assert found is not None and found.is_file() and tmp_path not in found.parents
    missing = tmp_path / "convert_hf_to_gguf.py"
    monkeypatch.setenv(eagle3.CONVERTER_ENV, str(missing))
    assert eagle3.converter() == missing
    with pytest.raises(ValueError, match=f"{missing}.*{eagle3.CONVERTER_ENV}"):
        eagle3.gguf_of(tmp_path, tmp_path, cache=tmp_path)


def test_a_head_for_another_target_is_one_line_and_exit_2(tmp_path):
    """A head trained for tiny-hd32 (128 wide) against the tiny target (64): named mismatch, exit 2, before any work."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main
    from spec_harness.models.eagle3_train import ensure_tiny_head

    other = ensure_tiny_head("tiny-hd32")
    res = CliRunner().invoke(main, ["run", "--runtime", "torch", "--pair", "tiny", "--drafter", f"eagle3:{other}",
                                    "--max-new-tokens", "8", "--prompts", "math", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert "reads hidden states 128 wide" in res.output and "target's are 64" in res.output
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_a_missing_head_folder_is_one_line_and_exit_2(tmp_path):
    from click.testing import CliRunner

    from spec_harness.harness.cli import main

    res = CliRunner().invoke(main, ["run", "--runtime", "torch", "--pair", "tiny", "--drafter", f"eagle3:{tmp_path / 'nope'}",
                                    "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no config.json there" in res.output, res.output


@pytest.mark.parametrize("name", ["hf", "llamacpp-native"])
def test_runtimes_without_eagle3_say_so(pair, name):
    from spec_harness import runtimes

    rt = runtimes.get(name)(SETTINGS)
    rt.load(pair)
    try:
        why = rt.supports(_gen())
    finally:
        rt.close()
    assert why and "no EAGLE-3 drafting" in why and "torch, llamacpp, llama-server and vllm" in why


def test_a_pair_without_a_head_names_the_fix():
    from spec_harness import runtimes
    from spec_harness.runtimes.eagle3 import head_folder

    rt = runtimes.get("torch")(SETTINGS)
    rt.load(resolve_pair("tiny"))
    assert rt.supports(_gen()) == "the pair tiny has no EAGLE-3 head of its own: give --drafter eagle3:PATH"
    # the one check every runtime refuses with (runtimes/eagle3.py): PATH first, else the pair's own head
    assert head_folder(parse_drafter("eagle3:/heads/h"), resolve_pair("tiny")) == "/heads/h"
    assert head_folder(Eagle3Spec(), PairSpec("p", eagle3="/heads/own")) == "/heads/own"
    with pytest.raises(ValueError, match="^the pair p has no EAGLE-3 head of its own: give --drafter eagle3:PATH$"):
        head_folder(Eagle3Spec(), PairSpec("p"))


def test_head_config_round_trips_and_refuses_variants_it_does_not_run(head):
    from spec_harness.models.eagle3 import HeadConfig, read_config

    cfg = read_config(head)
    assert HeadConfig.from_json(cfg.to_json()) == cfg
    d = json.loads((head / "config.json").read_text())
    assert d["speculators_model_type"] == "eagle3" and d["norm_before_residual"] is False
    with pytest.raises(HarnessError, match="fc_norm"):
        HeadConfig.from_json({**d, "fc_norm": True})


@pytest.mark.slow
def test_the_command_trains_resumes_and_writes_a_head_that_loads(tmp_path):
    """`harness models eagle3` on the tiny pair: 6 steps, then --resume to 10; the folder loads."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main
    from spec_harness.models.eagle3 import load_head, read_config
    from spec_harness.models.tiny import ensure_pair

    t, _ = ensure_pair("tiny")
    data = next(Path(t).parent.glob("eagle3-v2-*")) / "sequences.jsonl"
    args = ["models", "eagle3", "--target", str(t), "--teacher-jsonl", str(data), "--draft-vocab", "64", "--batch", "4",
            "--ckpt-every", "3", "--work", str(tmp_path / "w"), "--out", str(tmp_path / "head"), "--no-progress"]
    r1 = CliRunner().invoke(main, args + ["--steps", "6"])
    assert r1.exit_code == 0, r1.output
    r2 = CliRunner().invoke(main, args + ["--steps", "10", "--resume"])
    assert r2.exit_code == 0 and "resumed from step 6" in r2.output, r2.output
    assert "held-out top-1 agreement by position" in r2.output and "GGUF for llama.cpp" in r2.output
    cfg = read_config(tmp_path / "head")
    assert cfg.draft_vocab == 64
    h = load_head(tmp_path / "head", torch.zeros(cfg.vocab, cfg.hidden))
    assert int(h.to_target(torch.arange(64)).max()) < cfg.vocab
    grown = ["models", "eagle3", "--target", str(t), "--teacher-jsonl", str(data), "--draft-vocab", "80", "--batch", "4",
             "--steps", "1", "--init-from", str(tmp_path / "head"), "--work", str(tmp_path / "w2"),
             "--out", str(tmp_path / "grown"), "--no-progress", "--no-gguf"]
    r3 = CliRunner().invoke(main, grown)
    assert r3.exit_code == 0, r3.output
    g = load_head(tmp_path / "grown", torch.zeros(cfg.vocab, cfg.hidden))
    assert g.cfg.draft_vocab == 80 and set(h.to_target(torch.arange(64)).tolist()) < set(g.to_target(torch.arange(80)).tolist())


def test_init_from_starts_at_the_trained_heads_agreement_and_keeps_its_vocabulary(head, tmp_path):
    """`--init-from HEAD`: step 0 agrees with the target as the trained head does (far above a new
    head's step 0), the written head keeps its draft vocabulary; other --layers is one line, exit 2."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main
    from spec_harness.models.eagle3 import load_head, read_config
    from spec_harness.models.tiny import ensure_pair

    t, _ = ensure_pair("tiny")
    data = head.parent / "sequences.jsonl"
    trained = torch.load(head.parent / "ckpt.pt", weights_only=False)["evals"]
    args = ["models", "eagle3", "--target", str(t), "--teacher-jsonl", str(data), "--batch", "4", "--steps", "2",
            "--init-from", str(head), "--work", str(tmp_path / "w"), "--out", str(tmp_path / "head"), "--no-progress",
            "--no-gguf"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    evals = torch.load(tmp_path / "w" / "ckpt.pt", weights_only=False)["evals"]
    assert evals[0]["step"] == 0
    assert abs(evals[0]["top1"][0] - trained[-1]["top1"][0]) < 0.02, (evals[0], trained[-1])
    assert evals[0]["top1"][0] > trained[0]["top1"][0] + 0.1
    cfg = read_config(tmp_path / "head")
    assert cfg.draft_vocab == read_config(head).draft_vocab and cfg.layer_ids == read_config(head).layer_ids
    embed = torch.zeros(cfg.vocab, cfg.hidden)
    assert torch.equal(load_head(tmp_path / "head", embed).d2t, load_head(head, embed).d2t)
    other = sorted({*range(cfg.layer_ids[-1] + 1)} - set(cfg.layer_ids))[:1] + list(cfg.layer_ids[1:])
    bad = CliRunner().invoke(main, args + ["--layers", ",".join(map(str, sorted(other)))])
    assert bad.exit_code == 2 and "--init-from head reads layers" in bad.output, bad.output
    missing = CliRunner().invoke(main, [a if a != str(head) else str(tmp_path / "nothing") for a in args])
    assert missing.exit_code == 2 and "--init-from" in missing.output and "not an EAGLE-3 head" in missing.output


@torch.inference_mode()
def test_the_loss_and_held_out_agreement_count_the_answers_only(head):
    """The head drafts answers: the teacher's distributions at positions that predict a prompt's
    tokens change neither the loss nor the held-out agreement; one at an answer's position does."""
    from spec_harness.models.eagle3 import load_head
    from spec_harness.models.eagle3_data import target_features
    from spec_harness.models.eagle3_train import batch_of, heldout_agreement, ttt_loss
    from spec_harness.models.loading import load_hf_model
    from spec_harness.models.tiny import ensure_pair

    t, _ = ensure_pair("tiny")
    target = load_hf_model(str(t), "target", torch.float32, "cpu")
    h = load_head(head, target.get_input_embeddings().weight.detach().float(), target.config)
    g = torch.Generator().manual_seed(3)
    lines = (head.parent / "sequences.jsonl").read_text().splitlines()[:2]  # the tiny target's own text
    seqs = [{"ids": json.loads(line)["ids"][:40], "start": s} for line, s in zip(lines, (12, 20))]
    items = target_features(target, seqs, h.cfg.layer_ids, 4)
    t2d = torch.arange(h.cfg.vocab)

    def scores(items):
        return float(ttt_loss(h, batch_of(items, t2d), 3)[0]), heldout_agreement(h, items, t2d, 3)

    def shuffled(items, where):  # the teacher's top-k at positions `where` of each item replaced
        out = []
        for it in items:
            ti, tl = it["top_ids"].clone(), it["top_lp"].clone()
            for p in where(it):
                ti[p] = torch.randperm(h.cfg.vocab - 1, generator=g)[: ti.shape[1]].int()
                tl[p] = torch.log_softmax(torch.randn(ti.shape[1], generator=g), -1).sort(descending=True).values.half()
            out.append({**it, "top_ids": ti, "top_lp": tl})
        return out

    loss, agree = scores(items)
    # position p holds the distribution of token p + 1: the prompt's tokens are predicted at 0 .. start - 2
    loss_p, agree_p = scores(shuffled(items, lambda it: range(it["start"] - 1)))
    assert loss_p == pytest.approx(loss, abs=1e-6) and agree_p == agree
    assert agree["positions"][0] == sum(len(s["ids"]) - s["start"] for s in seqs)
    loss_a, agree_a = scores(shuffled(items, lambda it: range(it["start"] - 1, len(it["ids"]) - 1)))
    assert abs(loss_a - loss) > 0.1 and agree["top1"][0] > 0.2 and agree_a["top1"] != agree["top1"]


@torch.inference_mode()
def test_a_grown_vocabulary_keeps_the_heads_rows_and_adds_the_targets():
    """grow_vocab (--init-from with a larger --draft-vocab): the new draft vocabulary holds the old
    one and the most frequent ids it lacked, ascending; the logits of old ids are the head's, of new
    ids the target's output rows', and every other weight is the head's."""
    from spec_harness.models.eagle3 import HeadConfig
    from spec_harness.models.eagle3_data import grow_vocab
    from spec_harness.models.eagle3_train import build_head
    from spec_harness.models.loading import load_hf_model
    from spec_harness.models.tiny import ensure_pair

    t, _ = ensure_pair("tiny")
    target = load_hf_model(str(t), "target", torch.float32, "cpu")
    tcfg = target.config
    old_ids = torch.arange(40, 104)
    small = build_head(target, HeadConfig.for_target(tcfg, 64), old_ids, seed=0)
    small.lm_head.weight.normal_()  # rows of its own, not the target's
    ranked = torch.tensor([50, 7, 60, 3, 200, 9, 11])  # most frequent first; 50 and 60 it has
    grown, ids = grow_vocab(small, target, ranked, 68)
    assert ids.tolist() == sorted(old_ids.tolist() + [7, 3, 200, 9])
    assert grown.cfg.draft_vocab == 68 and grown.to_target(torch.arange(68)).tolist() == ids.tolist()
    x = torch.randn(5, tcfg.hidden_size)
    big, ref = grown.target_logits(grown.logits(x)), small.target_logits(small.logits(x))  # [5, V]
    normed = small._rms(x, small.norm)
    for logits in (big, ref):  # both within float32's rounding of the exact products of the head's rows
        assert not beyond_dot_error(logits[:, old_ids], normed, small.lm_head.weight.T)
    new = torch.tensor([3, 7, 9, 200])
    assert not beyond_dot_error(big[:, new], normed, target.get_output_embeddings().weight[new].T)
    assert torch.isinf(big[:, 4]).all()  # still outside
    for name, w in small.state().items():
        if name != "lm_head.weight":
            assert torch.equal(grown.state()[name], w), name


@pytest.mark.slow
@pytest.mark.parametrize("forward", ["kernels", "eager"])
def test_the_shipped_head_is_greedy_lossless_on_the_default_pair(forward):
    """The default pair's shipped head in the torch runtime (float32, both forwards): greedy, its
    speculative ids are the baseline's on every factual prompt, and it gets drafts accepted."""
    from spec_harness import runtimes
    from spec_harness.core import metrics
    from spec_harness.harness.prompts import builtin

    pair = resolve_pair(None)
    assert pair.eagle3 and Path(pair.eagle3).is_dir()
    rt = runtimes.get("torch")(RuntimeSettings(n_threads=2, torch_forward=forward))
    rt.load(pair)
    try:
        rounds = []
        for p in builtin("factual"):
            ids = rt.encode(p.text)
            base = rt.generate_baseline(ids, _gen(gamma=4, n=32, drafter="model")).token_ids
            s = rt.generate_speculative(ids, _gen(gamma=4, n=32))
            assert s.token_ids == base, p.id
            rounds += [r.to_dict() for r in s.rounds]
    finally:
        rt.close()
    assert metrics.alpha_hat(rounds) > 0.35  # a head that drafts what the target says, not only a lossless loop
