"""The `mlx` runtime (mlx-lm's own stream_generate loop) on the tiny pairs, through the real mlx-lm:
greedy lossless against its own baseline and equal to torch, accepted counts against the
from_draft flags of an uninstrumented stream_generate, rounds, the phase identity, the sampled
distribution and the acceptance rule (sample-match), what it cannot do as skipped rows, config
folders written by transformers 5, and the install message when mlx-lm is missing."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from spec_harness.core.config import GenerationSettings, PairSpec, RuntimeSettings, SamplingParams
from spec_harness.core.errors import RuntimeUnavailable
from tests.phases import check_phases

PROMPTS = ["The quick brown fox", "Speculative decoding is", "def fib(n):"]
GREEDY = SamplingParams()
SAMPLED = SamplingParams(temperature=0.8, top_p=0.9, top_k=20)
NS = 1e-9


def settings(gamma=4, n=20, sampling=GREEDY, seed=0, ignore_eos=True, policy="fixed", drafter="model") -> GenerationSettings:
    return GenerationSettings(sampling, gamma, n, seed, ignore_eos, policy, drafter)


def counts(g) -> list[tuple[int, int, int]]:
    return [(r.drafted, r.accepted, r.emitted) for r in g.rounds]


@pytest.fixture(scope="module")
def mlx_lm():
    return pytest.importorskip("mlx_lm")  # the `mlx` extra (tests/extras.py), installed by scripts/setup.sh


@pytest.fixture(scope="module")
def mlx_rt(mlx_lm, tiny_pair):
    from spec_harness.runtimes.mlx import MlxRuntime

    rt = MlxRuntime(RuntimeSettings())
    rt.load(tiny_pair)
    yield rt
    rt.close()


# ---- missing mlx-lm -------------------------------------------------------------------------------


def test_missing_mlx_is_a_skipped_row_saying_how_to_install(monkeypatch, tiny_pair, tmp_path):
    from spec_harness import runtimes
    from spec_harness.harness.prompts import load_prompts
    from spec_harness.harness.run_config import RunConfig
    from spec_harness.harness.runner import Runner

    for name in ("mlx", "mlx.core", "mlx_lm"):
        monkeypatch.setitem(sys.modules, name, None)  # what `import mlx` finds when it is not installed
    monkeypatch.delitem(sys.modules, "spec_harness.runtimes.mlx", raising=False)
    with pytest.raises(RuntimeUnavailable, match=r"^install with pip install -e '\.\[mlx\]'"):
        runtimes.get("mlx")
    rows = Runner(RunConfig(["mlx"], [tiny_pair], load_prompts("code")[:1], max_new_tokens=[4], warmup=0,
                            out=tmp_path / "o")).run()
    assert len(rows) == 1 and rows[0]["error"].startswith("skipped: install with pip install -e '.[mlx]'")


# ---- greedy -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_greedy_is_lossless_and_equals_torch(mlx_rt, torch_rt, gamma):
    """Speculative == its own baseline == torch's, and the rounds are torch's: the same tokens per
    round, the same acceptances but in the last round. Once gamma reaches the end mlx-lm drafts up
    to the last token (min(gamma, left)), the shared loop one fewer."""
    for prompt in PROMPTS:
        ids = mlx_rt.encode(prompt)
        assert ids == torch_rt.encode(prompt)
        gen = settings(gamma)
        spec, base = mlx_rt.generate_speculative(ids, gen), mlx_rt.generate_baseline(ids, gen)
        t_spec = torch_rt.generate_speculative(ids, gen)
        assert len(spec.token_ids) == gen.max_new_tokens
        assert spec.token_ids == base.token_ids == torch_rt.generate_baseline(ids, gen).token_ids
        assert [r.emitted for r in spec.rounds] == [r.emitted for r in t_spec.rounds]
        assert [r.accepted for r in spec.rounds][:-1] == [r.accepted for r in t_spec.rounds][:-1]
        assert base.target_entropy == pytest.approx(torch_rt.generate_baseline(ids, gen).target_entropy, rel=1e-4)


def test_self_draft_accepts_everything(mlx_lm, tiny_pair):
    from spec_harness.runtimes.mlx import MlxRuntime

    rt = MlxRuntime(RuntimeSettings())
    rt.load(PairSpec("tiny-self", tiny_pair.target, tiny_pair.target))
    ids, gen = rt.encode(PROMPTS[1]), settings(gamma=3, n=12)
    spec = check_phases(lambda: rt.generate_speculative(ids, gen), speculative=True)
    assert spec.token_ids == rt.generate_baseline(ids, gen).token_ids
    assert all(r.accepted == r.drafted for r in spec.rounds)


def test_eos_rule_matches_torch(mlx_rt, torch_rt, monkeypatch):
    """Stop right after EOS (it is the last token), or run to max_new_tokens with ignore_eos."""
    ids = mlx_rt.encode(PROMPTS[0])
    full = mlx_rt.generate_baseline(ids, settings(n=16)).token_ids
    eos = full[5]  # pretend a token that occurs mid-output is EOS
    monkeypatch.setattr(mlx_rt, "eos_id", eos)
    monkeypatch.setattr(torch_rt, "eos_id", eos)
    stop = full[: full.index(eos) + 1]
    for gen in (settings(n=16, ignore_eos=False), settings(n=16, ignore_eos=True)):
        want = full if gen.ignore_eos else stop
        for g in (mlx_rt.generate_speculative(ids, gen), mlx_rt.generate_baseline(ids, gen),
                  torch_rt.generate_speculative(ids, gen)):
            assert g.token_ids == want
            assert sum(r.emitted for r in g.rounds) == len(want)


# ---- rounds and phases --------------------------------------------------------------------------------


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_rounds_add_up(mlx_rt, sampling):
    gen = settings(gamma=3, sampling=sampling)
    ids = mlx_rt.encode(PROMPTS[0])
    spec, base = mlx_rt.generate_speculative(ids, gen), mlx_rt.generate_baseline(ids, gen)
    for g in (spec, base):
        assert sum(r.emitted for r in g.rounds) == len(g.token_ids) == gen.max_new_tokens
    left = gen.max_new_tokens
    for r in spec.rounds:  # mlx-lm drafts min(gamma, tokens left); a round that drafted to the end has no bonus
        assert r.drafted == min(gen.gamma, left) and 0 <= r.accepted <= r.drafted
        assert r.emitted == r.accepted + 1 or r.emitted == r.accepted == left
        left -= r.emitted
    # one target pass per token, and the look-ahead pass after the last one (its token is never yielded)
    assert counts(base) == [(0, 0, 1)] * gen.max_new_tokens + [(0, 0, 0)]
    assert spec.extra["passes"] == {"target": len(spec.rounds) + 1, "draft": sum(r.drafted for r in spec.rounds) + 1}


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.parametrize("gamma", [2, 4])
def test_accepted_are_the_from_draft_flags_of_the_bare_library(mlx_lm, mlx_rt, sampling, gamma):
    """The same call without the harness's proxies and sampler wrapper yields the same tokens, and
    its per-token from_draft flags, cut at the rounds' emitted counts, are each round's accepted
    drafts followed by the target's own token."""
    import mlx.core as mx

    ids = mlx_rt.encode(PROMPTS[2])
    for seed in range(3):
        gen = settings(gamma, n=24, sampling=sampling, seed=seed)
        g = mlx_rt.generate_speculative(ids, gen)
        mlx_rt.wrapper.eos_token_ids = set()
        mx.random.seed(seed)
        bare = list(mlx_lm.stream_generate(mlx_rt.target, mlx_rt.wrapper, ids, max_tokens=24, sampler=mlx_rt.make_sampler(gen),
                                           draft_model=mlx_rt.draft, num_draft_tokens=gamma))
        assert [r.token for r in bare] == g.token_ids
        flags, at = [r.from_draft for r in bare], 0
        for r in g.rounds:
            assert flags[at: at + r.emitted] == [True] * r.accepted + [False] * (r.emitted - r.accepted)
            at += r.emitted
        assert 0 < sum(r.accepted for r in g.rounds) < sum(r.drafted for r in g.rounds)  # both outcomes occur


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_phase_identity(mlx_rt, sampling):
    ids = mlx_rt.encode(PROMPTS[1])
    gen = settings(gamma=4, sampling=sampling)
    spec = check_phases(lambda: mlx_rt.generate_speculative(ids, gen), speculative=True)
    base = check_phases(lambda: mlx_rt.generate_baseline(ids, gen), speculative=False)
    assert all(r.draft_s > 0 for r in spec.rounds) and all(r.draft_s == 0 for r in base.rounds)
    assert {"prefill_s", "draft_s", "verify_s", "sampling_s", "unaccounted_s"} <= set(spec.notes)


def test_sampling_is_seeded(mlx_rt):
    ids = mlx_rt.encode(PROMPTS[2])
    a, b, c = (mlx_rt.generate_speculative(ids, settings(sampling=SAMPLED, seed=s)) for s in (7, 7, 8))
    assert a.token_ids == b.token_ids != c.token_ids
    base = [mlx_rt.generate_baseline(ids, settings(sampling=SAMPLED, seed=s)).token_ids for s in (7, 7)]
    assert base[0] == base[1]


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_timing_off_changes_nothing(mlx_rt, monkeypatch, sampling):
    """With phase timing off (harness bench's overhead figure) no mx.eval of ours runs: mlx-lm's own
    asynchronous loop, with the same tokens and rounds."""
    from spec_harness.core import timing

    ids, gen = mlx_rt.encode(PROMPTS[0]), settings(gamma=3, n=16, sampling=sampling, seed=3)
    on = [mlx_rt.generate_speculative(ids, gen), mlx_rt.generate_baseline(ids, gen)]
    monkeypatch.setattr(timing, "ENABLED", False)
    off = [mlx_rt.generate_speculative(ids, gen), mlx_rt.generate_baseline(ids, gen)]
    for a, b in zip(on, off):
        assert a.token_ids == b.token_ids and counts(a) == counts(b)
        assert b.phases.wall_s > 0 and b.phases.verify_s == b.phases.sampling_s == 0


def test_devices_mlx_does_not_have_are_skipped(mlx_lm, tiny_pair):
    import mlx.core as mx

    from spec_harness.runtimes.mlx import MlxRuntime

    for device in ["cuda"] + ([] if mx.metal.is_available() else ["mps"]):
        with pytest.raises(RuntimeUnavailable, match=f"--device {device}: MLX runs on"):
            MlxRuntime(RuntimeSettings(device=device)).load(tiny_pair)


def test_mismatch_evidence_through_mlx(mlx_rt):
    """The reference model (mlx-lm's forward with a cache of its own) recomputes a greedy mismatch."""
    ids = mlx_rt.encode(PROMPTS[0])
    gen = settings(gamma=3, n=12)
    base, spec = mlx_rt.generate_baseline(ids, gen), mlx_rt.generate_speculative(ids, gen)
    spec.token_ids = spec.token_ids[:6] + [(spec.token_ids[6] + 1) % 256] + spec.token_ids[7:]  # as if token 6 had flipped
    ev = mlx_rt.mismatch_evidence(ids, base.token_ids, spec)
    assert ev["position"] == 6 and ev["choice_one_token"] == ev["choice_batched"] == base.token_ids[6]
    assert ev["max_abs_diff"] < 1e-3 < ev["margin_one_token"] and ev["verdict"] == "suspected bug"


# ---- sampling: the distribution and the rule -------------------------------------------------------


N = 3000


@pytest.fixture(scope="module")
def micro(mlx_lm):
    """The micro pair in mlx, N speculative generations of 3 tokens (gamma 2, T 1, one seed each),
    and transformers' target and draft for the exact distributions."""
    from transformers import AutoModelForCausalLM

    from spec_harness.models.tiny import ensure_pair
    from spec_harness.runtimes.mlx import MlxRuntime
    from tests.test_sampling_distribution import PROMPT

    t, d = ensure_pair("micro")
    rt = MlxRuntime(RuntimeSettings())
    rt.load(PairSpec("micro", str(t), str(d)))
    s = SamplingParams(temperature=1.0)
    gens = [rt.generate_speculative(PROMPT, GenerationSettings(s, 2, 3, seed, True)) for seed in range(N)]
    models = [AutoModelForCausalLM.from_pretrained(str(p)).eval() for p in (t, d)]
    return s, gens, models


@pytest.mark.slow
def test_speculative_sampling_keeps_the_target_distribution(micro):
    from tests.test_sampling_distribution import P_THRESHOLD, chi_square_p, exact_target_distribution

    s, gens, (target, _) = micro
    assert chi_square_p([tuple(g.token_ids) for g in gens], exact_target_distribution(target, s)) > P_THRESHOLD


@pytest.mark.slow
def test_the_rule_is_sample_match(micro):
    """The first draft is accepted with probability sum p q (the target's own sample equals the
    draft's), not Leviathan's sum min(p, q): 0.27 against 0.86 on the micro pair."""
    import torch

    from spec_harness.core import sampling
    from tests.test_sampling_distribution import PROMPT

    s, gens, models = micro
    with torch.inference_mode():
        p, q = (sampling.probs_from_logits(m(input_ids=torch.tensor([PROMPT])).logits[0, -1:, :8], s)[0] for m in models)
    match, ratio = float((p * q).sum()), float(torch.minimum(p, q).sum())
    seen = sum(g.rounds[0].accepted >= 1 for g in gens) / N
    sigma = (match * (1 - match) / N) ** 0.5
    assert abs(seen - match) < 4 * sigma and ratio - match > 20 * sigma
    assert {g.notes.get("accepted") for g in gens} == {"mlx-lm's from_draft per token: the target's own sample equals the draft (not the ratio test)"}


# ---- what it cannot do, and the whole harness on top -----------------------------------------------------


def test_supports(mlx_rt):
    for policy, drafter in (("fixed", "model"), ("library-default", "model")):
        assert mlx_rt.supports(settings(policy=policy, drafter=drafter)) is None
    for policy, drafter, why in (("confidence:0.4", "model", "no confidence stopping"), ("heuristic", "model", "no heuristic draft-length schedule"),
                                 ("fixed", "ngram", "no prompt lookup"), ("library-default", "ngram:2,3", "no prompt lookup")):
        assert why in mlx_rt.supports(settings(policy=policy, drafter=drafter))
    forced = GenerationSettings(GREEDY, 4, 8, forced=(0.5,))
    assert "cannot force acceptance" in mlx_rt.supports(forced)
    assert mlx_rt.verify_rule(settings()) == "greedy-match" and mlx_rt.verify_rule(settings(sampling=SAMPLED)) == "sample-match"


@pytest.mark.slow
def test_a_run_rows_report_and_explain(mlx_lm, tmp_path):
    """`harness run --runtime mlx` with the policies and drafters it cannot run beside those it can:
    one skipped row each, greedy rows that match, library-default at mlx-lm's own length, a report
    and `harness explain` on the folder."""
    from click.testing import CliRunner

    from spec_harness.harness.cli import main
    from spec_harness.runtimes.mlx import library_gamma

    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["run", "--runtime", "mlx", "--pair", "tiny", "--draft-policy", "fixed,heuristic,library-default",
                                    "--drafter", "model,ngram", "--max-new-tokens", "12", "--prompts", "code", "--warmup", "0",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    skipped = [r for r in rows if r["error"]]
    assert {(r["draft_policy"], r["drafter"]) for r in skipped} == {("heuristic", "model"), ("fixed", "ngram"),
                                                                    ("heuristic", "ngram"), ("library-default", "ngram")}
    assert all(r["error"].startswith("skipped: mlx has no ") for r in skipped)
    spec = [r for r in rows if r["mode"] == "speculative" and not r["error"]]
    assert {r["draft_policy"] for r in spec} == {"fixed", "library-default"} and all(r["greedy_match"] for r in spec)
    assert {r["gamma"] for r in spec if r["draft_policy"] == "library-default"} == {library_gamma()}
    assert all(r["verify_rule"] == "greedy-match" and r["device"] == "cpu" and r["dtype"] == "float32" for r in spec)
    base = [r for r in rows if r["mode"] == "baseline"]
    assert base and all(r["target_entropy"] > 0 and r["n_rounds"] == r["new_tokens"] + 1 for r in base)
    assert "mlx" in (out / "report" / "report.md").read_text()
    res = CliRunner().invoke(main, ["explain", str(out)])
    assert res.exit_code == 0 and "mlx" in res.output, res.output


# ---- folders written by transformers 5 --------------------------------------------------------------


def test_rope_base_of_a_transformers_5_config_is_read(mlx_lm, tiny_pair, tmp_path):
    """transformers 5 writes rope_theta inside rope_parameters, which mlx-lm 0.32's Llama does not
    read: without runtimes/mlx.py's rope_config it runs RoPE at base 10000 (another model)."""
    import torch
    from mlx_lm.generate import generation_stream
    from transformers import AutoModelForCausalLM

    from spec_harness.runtimes.mlx import MlxKV, rope_config

    folder = tmp_path / "target"
    shutil.copytree(tiny_pair.target, folder)
    cfg = json.loads((folder / "config.json").read_text())
    assert "rope_theta" not in cfg and cfg["rope_parameters"]["rope_theta"] == 10000.0  # as transformers 5 saves it
    cfg["rope_parameters"]["rope_theta"] = 50.0
    (folder / "config.json").write_text(json.dumps(cfg))
    ids = list(range(40, 120))
    with torch.inference_mode():
        want = AutoModelForCausalLM.from_pretrained(str(folder)).eval()(input_ids=torch.tensor([ids])).logits[0, :, :257]

    def logits(model_config):
        model = mlx_lm.load(str(folder), model_config=model_config)[0]
        return MlxKV(model, 257, generation_stream).forward(ids, len(ids))

    assert rope_config(str(folder)) == {"rope_theta": 50.0, "rope_scaling": None}
    assert (logits(rope_config(str(folder))) - want).abs().max() < 1e-3
    assert (logits({}) - want).abs().max() > 1e-1  # mlx-lm alone: base 10000
