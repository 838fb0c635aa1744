"""Reports from synthetic results (tests/synthetic.py): every table number checked against
hand arithmetic on the known round records, every plot a readable PNG, c_flops present or
omitted with a note, c_measured from round records."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from spec_harness.core import metrics
from spec_harness.reports import tables, write_report
from spec_harness.reports.ceiling import CFlops
from tests import synthetic

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def qwen_dirs(tmp_path_factory):
    return synthetic.qwen_configs(tmp_path_factory.mktemp("configs"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, qwen_dirs):
    rows = synthetic.rows_for("fast", (4, 2)) + synthetic.rows_for("slow", (4, 2), scale=2.0)
    return synthetic.write_run(tmp_path_factory.mktemp("run"), rows, *qwen_dirs)


@pytest.fixture(scope="module")
def report(run_dir):
    return write_report([run_dir])


def _cell(cells, runtime, mode, gamma=None):
    return next(c for c in cells if c["runtime"] == runtime and c["mode"] == mode and c["gamma"] == gamma)


def leviathan(a, g, c):  # written out here on purpose: the test must not reuse the code it checks
    return (1 - a ** (g + 1)) / ((1 - a) * (g * c + 1))


def test_c_measured_from_round_records():
    spec = [{"drafted": 4, "draft_s": 0.008}, {"drafted": 2, "draft_s": 0.006}, {"drafted": 4, "draft_s": 0.012}]
    base = [{"drafted": 0, "verify_s": v} for v in (0.010, 0.020, 0.012)]
    # draft per-token times 0.002, 0.003, 0.003 -> median 0.003; target steps median 0.012
    assert metrics.c_measured(spec, base) == pytest.approx(0.25)
    assert metrics.c_measured([{"drafted": 4, "draft_s": None}], base) is None
    assert metrics.c_measured(spec, []) is None


def test_cell_numbers_match_hand_arithmetic(run_dir):
    rows = synthetic.rows_for("fast", (4,))
    cells = tables.cells(rows)
    tables.add_theory(cells, lambda refs, drafter: 0.1601)
    b, s = _cell(cells, "fast", "baseline"), _cell(cells, "fast", "speculative", 4)
    # baseline: 2 prompts x (20 ms prefill + 10 x 12 ms) = 0.28 s for 20 tokens
    assert b["wall_s"] == pytest.approx(0.28) and b["new_tokens"] == 20
    assert b["tokens_per_s"] == pytest.approx(20 / (0.28 - 0.04))
    # speculative: f1 = 25 ms + 3 rounds x 30 ms; o1 = 25 ms + 10 rounds x 30 ms
    assert s["wall_s"] == pytest.approx(0.115 + 0.325)
    assert s["speedup"] == pytest.approx((0.28 / 20) / (0.44 / 20))
    assert s["acceptance_rate"] == pytest.approx(7 / 52)  # 4+1+2 accepted of 13 x 4 drafted
    assert s["alpha_hat"] == pytest.approx(7 / (7 + 2 + 10))  # f1: 2 rejections; o1: 10
    assert s["mean_accepted_len"] == pytest.approx(20 / 13)
    assert s["c_measured"] == pytest.approx(0.002 / 0.010)
    assert s["verify_cost_ratio"] == pytest.approx(0.015 / 0.010)
    assert s["draft_s"] == pytest.approx(13 * 0.008) and s["draft_pct"] == pytest.approx(100 * 0.104 / 0.44)
    assert s["verify_pct"] == pytest.approx(100 * 0.195 / 0.44)
    assert sum(s[f"{p[:-2]}_pct"] for p in tables.PHASES) == pytest.approx(100)
    a = 7 / 19
    assert s["theory_speedup_measured"] == pytest.approx(leviathan(a, 4, 0.2))
    assert s["theory_speedup_flops"] == pytest.approx(leviathan(a, 4, 0.1601))
    assert s["ceiling_gap"] == pytest.approx(leviathan(a, 4, 0.2) - 0.28 / 0.44)
    assert s["greedy_match"] is True
    assert b["speedup"] is None and b["theory_speedup_flops"] is None


def test_categories_positions_histogram():
    rows = synthetic.rows_for("fast", (4,))
    cats = {c["category"]: c for c in tables.categories(rows)}
    assert cats["factual"]["alpha_hat"] == pytest.approx(7 / 9)
    assert cats["factual"]["speedup"] == pytest.approx(0.140 / 0.115)
    assert cats["open-ended"]["alpha_hat"] == 0 and cats["open-ended"]["mean_accepted_len"] == 1
    pos = [p["acceptance"] for p in tables.positions(rows)]
    assert pos == pytest.approx([3 / 13, 2 / 3, 1 / 2, 1.0])
    hist = [h["rounds"] for h in tables.histogram(rows)]
    assert hist == [10, 1, 1, 0, 1]


def test_error_rows_are_left_out_and_listed():
    rows = synthetic.rows_for("fast", (4,))
    bad = dict(rows[0], runtime="broken", error="skipped: runtime 'broken' needs foo")
    assert {c["runtime"] for c in tables.cells(rows + [bad])} == {"fast"}
    assert tables.errors(rows + [bad]) == ["broken (baseline): skipped: runtime 'broken' needs foo"]


def test_report_files_and_pngs(report):
    from matplotlib.image import imread
    from PIL import Image

    out = report.parent
    expected = ["report.md", "summary.csv", "categories.csv", "positions.csv", "histogram.csv", "drafted.csv", "report.json",
                "phases.png", "speedup_vs_gamma.png", "acceptance_vs_gamma.png", "per_position.png"]
    for name in expected:
        assert (out / name).stat().st_size > 0, name
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        with Image.open(png) as im:
            im.verify()
            assert im.format == "PNG" and im.size[0] > 300 and im.size[1] > 200
        assert imread(png).ndim == 3


def test_report_markdown_headline_and_tables(report):
    md = report.read_text()
    lines = md.splitlines()
    assert lines[0] == "# Speculative decoding report" and lines[2] == "**Pair:** qwen-like"
    sections = [line for line in lines if line.startswith("## ")]
    assert sections[:5] == ["## Verdict", "## Speed", "## Acceptance", "## Ceiling", "## Where the time goes"]
    # the verdict first: each runtime at its fastest gamma (2), its figure, the fastest setting named
    verdict = md[md.index("## Verdict"):md.index("## Speed")]
    # the decode speedup (54.9 / 83.3) beside the end-to-end one, which prefill moves
    assert "| fast | cpu | 2 | 83.3 | 54.9 | 0.68x | 0.66x | 0.33 | 1.44 | draft = 0.20 steps/tok x0.71 |" in verdict
    assert "| base decode tok/s | spec decode tok/s | speedup end to end | decode speedup |" in verdict
    assert "- Fastest here: fast without speculation, 83.3 tok/s decoding." in verdict and "![" in verdict and "(verdict.png)" in verdict
    speed = md[md.index("## Speed"):]
    head = speed.splitlines()[2]
    assert head.startswith("- **Fastest: fast**") and "2.00x the next runtime, slow" in head
    assert "no speculative setting beats it" in md and "**Ceiling:**" in md and "**Time (fast · spec γ=2):**" in md
    for png in ("phases.png", "speedup_vs_gamma.png", "acceptance_vs_gamma.png", "per_position.png", "verdict.png"):
        assert f"]({png})" in md
    # per-generation speedups 1.217 (f1) and 0.431 (o1): median 0.82, IQR 0.75*0.786 - 0.25*0.786 = 0.39
    assert "| fast · spec γ=4 | cpu | fast | 2 | 20 | 51.3 | 0.64x | 0.82x | 0.39 |" in md
    # acceptance length per step 20/13 = 1 + the marginals' sum (3 + 2 + 1 + 1) / 13; per request (10/3 + 1) / 2
    assert "| fast · spec γ=4 | 0.135 | 0.368 | 1.54 | 1.54 | 2.17 | 4.00 | 4:13 |" in md
    assert "| fast · spec γ=4 | 2 | 0.667 | 0.154 |" in md  # position 2: 2 of the 3 rounds reaching it, 2 of all 13
    assert "| fast · spec γ=4 | 0.200 | 0.1601 | 1.50 |" in md
    assert "c_flops for pair qwen-like: 0.1601" in md
    widths = [line.count("|") - 1 for line in lines if line.startswith("|")]
    assert widths and max(widths) <= 10  # no table wider than ten columns (the CSVs keep every column)


def test_report_csv_and_json_carry_the_numbers(report):
    out = report.parent
    df = pd.read_csv(out / "summary.csv")
    row = df[(df.runtime == "slow") & (df["mode"] == "speculative") & (df.gamma == 4)].iloc[0]
    assert row.speedup == pytest.approx(0.28 / 0.44)
    assert row.c_measured == pytest.approx(0.2) and row.c_flops == pytest.approx(0.16008, abs=1e-5)
    doc = json.loads((out / "report.json").read_text())
    assert set(doc) >= {"headline", "notes", "cells", "categories", "positions", "histogram", "plots"}
    assert len(doc["cells"]) == 6 and doc["headline"][0].startswith("**Fastest: fast**")


def test_c_flops_omitted_with_a_note_when_configs_are_missing(tmp_path):
    d = synthetic.write_run(tmp_path / "run", synthetic.rows_for("fast", (4,)), "no-such-org/no-such-model", "x/y")
    md = write_report([d]).read_text()
    assert "c_flops omitted for pair qwen-like" in md
    summary = pd.read_csv(d / "report" / "summary.csv")
    assert summary.theory_speedup_flops.isna().all() and summary.theory_speedup_measured.notna().any()


def test_several_folders_and_a_sweep_folder(tmp_path, qwen_dirs):
    a = synthetic.write_run(tmp_path / "sweep" / "g4", synthetic.rows_for("fast", (4,)), *qwen_dirs)
    synthetic.write_run(tmp_path / "sweep" / "g2", synthetic.rows_for("fast", (2,)), *qwen_dirs)
    md = write_report([tmp_path / "sweep"]).read_text()
    assert "fast · spec γ=2" in md and "fast · spec γ=4" in md
    out = write_report([a, tmp_path / "sweep" / "g2"], tmp_path / "both")
    assert out == tmp_path / "both" / "report.md" and (tmp_path / "both" / "phases.png").exists()


def test_c_flops_lookup_is_cached_per_pair(qwen_dirs):
    c = CFlops()
    refs = {"name": "p", "target": str(qwen_dirs[0]), "draft": str(qwen_dirs[1])}
    assert c(refs) == pytest.approx(0.16008, abs=1e-5) and c(dict(refs)) == c(refs)
    assert c(None) is None and c.notes == []


def test_headline_when_speculation_wins_and_when_it_cannot():
    from spec_harness.reports.markdown import headline

    rows = [r for r in synthetic.rows_for("fast", (4,)) if r["prompt_id"] == "f1"]
    cells = tables.cells(rows)
    tables.add_theory(cells, lambda refs, drafter: None)
    lines = headline(cells)
    assert lines[0] == "**Fastest: fast** (fast · spec γ=4), 111.1 tok/s; 1.22x over its own baseline."
    assert "measured 1.22x" in lines[2] and "FLOPs-only" not in lines[2]
    dear = tables.cells(synthetic.rows_for("fast", (4,), draft_ms=15.0))  # c measured 1.5
    tables.add_theory(dear, lambda refs, drafter: None)
    assert "(c measured 1.50), so no acceptance rate can pay off" in headline(dear)[-1]


def test_runtimes_that_hide_phases_or_rounds_and_failed_runs(tmp_path):
    rows = synthetic.rows_for("fast", (4,))
    hidden = []
    for r in rows:  # a library runtime: no draft/sampling/unaccounted split, no per-round records
        h = dict(r, runtime="lib", draft_s=None, sampling_s=None, unaccounted_s=None, rounds=[])
        hidden.append(h)
    d = synthetic.write_run(tmp_path / "lib", hidden)
    md = write_report([d]).read_text()
    assert "draft, sampling, unaccounted not visible to this runtime" in md
    assert "lib · spec γ=4: c measured unavailable" in md and "**Ceiling:** unknown for lib" in md
    drawn = {p.name for p in (d / "report").glob("*.png")}
    assert drawn == {"phases.png", "speedup_vs_gamma.png", "verdict.png"}  # no rounds: no acceptance to draw

    # a server: its phases show draft and verify, its rounds are counts without times -> c and v from
    # the pooled phases
    untimed = [dict(r, runtime="srv", rounds=[{**rd, **dict.fromkeys(("draft_s", "verify_s", "sampling_s", "unaccounted_s",
                                                                        "wall_s"))} for rd in r["rounds"] or []])
               for r in rows]
    timed = synthetic.write_run(tmp_path / "server", untimed)
    cell = next(c for c in tables.cells(untimed) if c["mode"] == "speculative")
    assert cell["costs_from"] == "pooled phases" and cell["c_measured"] is not None
    medians = next(c for c in tables.cells(rows) if c["mode"] == "speculative")
    assert medians["costs_from"] == "round medians"
    assert cell["c_measured"] == pytest.approx(medians["c_measured"], rel=0.1)  # uniform rounds: the same cost
    md = write_report([timed]).read_text()
    assert "(from pooled phases: this runtime times no round)" in md and "c and verify cost from pooled phases" in md

    failed = [dict(r, error="skipped: runtime 'x' needs y") for r in rows[:2]]
    d = synthetic.write_run(tmp_path / "failed", failed)
    md = write_report([d]).read_text()
    assert "No successful generations to report." in md and "error rows: fast (baseline): skipped" in md


def test_same_pair_name_for_different_models_stays_apart(tmp_path, qwen_dirs):
    t, d = qwen_dirs
    a = synthetic.write_run(tmp_path / "a", synthetic.rows_for("fast", (4,), pair="custom"), t, d)
    b = synthetic.write_run(tmp_path / "b", synthetic.rows_for("fast", (4,), pair="custom"), t, t, name="custom")
    md = write_report([a, b], tmp_path / "out").read_text()
    assert "fast · spec γ=4 · custom@a" in md and "fast · spec γ=4 · custom@b" in md


def test_greedy_mismatch_is_flagged_with_its_possible_causes(tmp_path, qwen_dirs):
    from spec_harness.harness.summary import summary_lines

    rows = synthetic.rows_for("fast", (4,))
    assert "greedy speculative output differs" not in "\n".join(summary_lines(rows))
    spec = next(r for r in rows if r["mode"] == "speculative")
    spec["token_ids"] = spec["token_ids"][:-1] + [999]
    spec["greedy_match"] = False
    text = " ".join("\n".join(summary_lines(rows)).split())  # its lines wrapped at 100 columns
    assert f"!! fast: {metrics.GREEDY_MISMATCH}" in text and "quantized GGUF" in text
    md = write_report([synthetic.write_run(tmp_path, rows, *qwen_dirs)])
    doc = json.loads((md.parent / "report.json").read_text())
    assert any(metrics.GREEDY_MISMATCH in n for n in doc["notes"])


def test_each_run_folder_keeps_its_own_figures(tmp_path, qwen_dirs):
    """What benchmarks/pair_figures.py printed: per folder and speculative setting, in figures.csv,
    report.json and (with several folders) report.md."""
    a = synthetic.write_run(tmp_path / "a", synthetic.rows_for("fast", (2, 4)), *qwen_dirs)
    b = synthetic.write_run(tmp_path / "b", synthetic.rows_for("fast", (4,), scale=2.0), *qwen_dirs)
    md = write_report([a, b], tmp_path / "both").read_text()
    fig = pd.read_csv(tmp_path / "both" / "figures.csv")
    assert list(zip(fig.run, fig.gamma)) == [("a", 2), ("a", 4), ("b", 4)]
    rows = synthetic.rows_for("fast", (4,))
    want = metrics.alpha_hat([rd for r in rows if r["mode"] == "speculative" for rd in r["rounds"]])
    assert fig.alpha_hat.iloc[1] == pytest.approx(want) and fig.alpha_hat.iloc[2] == pytest.approx(want)
    assert fig.base_tok_s.iloc[2] == pytest.approx(fig.base_tok_s.iloc[1] / 2)  # the run twice as slow
    assert fig.c_measured.iloc[1] == pytest.approx(0.2)  # 2 ms draft token / 10 ms target step
    assert "## Each run folder" in md and "| a | fast | qwen-like |" in md
    assert "## Each run folder" not in write_report([a]).read_text()
    doc = json.loads((tmp_path / "both" / "report.json").read_text())
    assert [f["run"] for f in doc["figures"]] == ["a", "a", "b"]


def test_mismatch_evidence_and_cross_runtime_agreement_are_said_with_numbers(tmp_path, qwen_dirs):
    from spec_harness.harness.summary import summary_lines
    from spec_harness.reports import mismatch

    rows = synthetic.rows_for("fast", (4,)) + synthetic.rows_for("slow", (4,), scale=2.0)
    for r in rows:
        if r["mode"] == "baseline":
            r["step_margins"] = [1.0] * r["new_tokens"]
    slow_f1 = next(r for r in rows if r["runtime"] == "slow" and r["mode"] == "baseline" and r["prompt_id"] == "f1")
    slow_f1["token_ids"] = slow_f1["token_ids"][:3] + [99] + slow_f1["token_ids"][4:]
    slow_f1["step_margins"][3] = 0.02
    flip, bug = (next(r for r in rows if r["runtime"] == rt and r["mode"] == "speculative" and r["prompt_id"] == "f1")
                 for rt in ("fast", "slow"))
    for r, verdict, margin, diff in ((flip, "near-tie flip", 0.01, 0.3), (bug, "suspected bug", 2.5, 0.0001)):
        r["greedy_match"] = False
        r["mismatch"] = {"position": 7, "baseline_token": 1, "speculative_token": 2, "baseline_text": "a",
                         "speculative_text": "b", "margin_one_token": margin, "margin_batched": margin,
                         "choice_one_token": 1, "choice_batched": 1, "max_abs_diff": diff, "verdict": verdict}
    lines = summary_lines(rows)
    assert all(len(line) <= 100 for line in lines)
    text = " ".join("\n".join(lines).split())  # its lines wrapped at 100 columns
    assert "!! fast: 1 greedy mismatch(es), each a near-tie flip: at the first differing token the target's top-2 margin (0.010)" in text
    assert "!! SUSPECTED BUG in slow: 1 greedy output(s) left the baseline where numerics cannot explain it (f1 token 7: margin 2.500" in text
    assert "fast (float32) and slow (float32): the same greedy ids on 1 of 2 prompts; they part at f1 token 3; top-2 margins there 0.020-1.000" in text
    rec = next(a for a in mismatch.agreement(rows) if not a["agree"])
    assert (rec["position"], rec["token_b"], rec["margin_b"], rec["margin_a"]) == (3, 99, 0.02, 1.0)
    md = write_report([synthetic.write_run(tmp_path, rows, *qwen_dirs)]).read_text()
    assert "## Greedy mismatches" in md and "| slow | f1 | 4 | 7 | 'a' (1) | 'b' (2) | 2.500 |" in md
    assert "## Greedy baselines across runtimes" in md and "SUSPECTED BUG in slow" in md


def test_under_load_prices_a_cell_by_its_own_engine_where_it_measured_them():
    """The batched cost model takes a runtime's own batch prices (run.json batched_costs
    [pair]["by_runtime"], what vLLM measures on its servers) before llama.cpp's, per role
    (the draft model's, a head's), and says whose; prompt lookup is priced with no draft pass."""
    from spec_harness.core.theory import RoundCosts, costed_speedup
    from spec_harness.reports import concurrency

    costs = {"target": {"2": {"1": 1.0, "5": 4.0}}, "draft": {"2": {"1": 0.5}},
             "by_runtime": {"vllm": {"target": {"2": {"1": 0.040, "5": 0.050}}, "draft": {"2": {"1": 0.004}}}}}
    cell = {"alpha_hat": 0.5, "gamma": 4, "concurrency": 2, "drafter": "model"}
    own = concurrency._predicted({**cell, "runtime": "vllm"}, costs)
    assert own["priced_by"] == "vllm" and own["v_batched"] == pytest.approx(1.25) and own["c_batched"] == pytest.approx(0.1)
    assert own["predicted_speedup"] == pytest.approx(costed_speedup(0.5, 4, RoundCosts(0.1, 1.25, 0.0, 0.0)))
    lookup = concurrency._predicted({**cell, "runtime": "vllm [ngram]", "runtime_name": "vllm", "drafter": "ngram"}, costs)
    assert (lookup["priced_by"], lookup["c_batched"], lookup["v_batched"]) == ("vllm", 0.0, pytest.approx(1.25))
    other = concurrency._predicted({**cell, "runtime": "llama-server"}, costs)
    assert (other["priced_by"], other["v_batched"], other["c_batched"]) == ("llama.cpp", 4.0, 0.5)
    # an EAGLE-3 head: its round measured at N = 1, grown as the target's verify batch grows to N
    costs["target"]["1"] = {"1": 1.0, "5": 2.0}  # llama.cpp's v 2.0 at N = 1, 4.0 at N = 2
    head = {**cell, "runtime": "llama-server [eagle3]", "runtime_name": "llama-server", "drafter": "eagle3"}
    assert concurrency._predicted(head, costs)["predicted_speedup"] is None  # no round at N = 1: not priced
    priced = concurrency._predicted(head, costs, head_round=3.0)
    assert priced["predicted_speedup"] == pytest.approx(costed_speedup(0.5, 4, RoundCosts(0.0, 3.0 * 4.0 / 2.0, 0.0, 0.0)))
    assert priced["priced_by"].startswith("its round at N = 1 (3.00 steps)") and priced["c_batched"] is None
    assert concurrency._predicted({**cell, "runtime": "vllm", "concurrency": 8}, costs)["predicted_speedup"] is None


def test_under_load_a_drafter_that_drafts_in_some_rounds_is_predicted_with_plain_steps_in_the_others():
    """Prompt lookup drafts only where the context repeats: a cell whose decode rounds drafted in
    one of four (the first round of each request, its prompt's token, not counted) is predicted
    as share x speculative rounds + the rest plain steps, which lies between 1 and Leviathan's
    every-round formula; explain says the share."""
    from spec_harness.core import theory
    from spec_harness.reports import concurrency

    def row(mode: str, n: int, rounds: list[dict]) -> dict:
        return {"pair": "p", "runtime": "vllm", "runtime_name": "vllm", "mode": mode, "gamma": 4 if mode == "speculative" else None,
                "concurrency": n, "temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 8, "new_tokens": 8,
                "wall_s": 1.0, "prefill_s": 0.1, "drafter": "ngram" if mode == "speculative" else None, "dtype": "float32",
                "rounds": rounds, "error": None, "request_start_s": 0.0, "request_end_s": 1.0, "ttft_s": 0.1,
                "cell": f"{mode}{n}", "extra": {"cell": {"wall_s": 1.0}}}

    plain = {"drafted": 0, "accepted": 0, "emitted": 1}
    spec = [plain, {"drafted": 4, "accepted": 1, "emitted": 2}, plain, plain, plain]  # 1 of 4 decode rounds drafts
    rows = [row(m, n, spec if m == "speculative" else [plain] * 8) for n in (1, 2) for m in ("baseline", "speculative")]
    costs = {"p": {"target": {"1": {"1": 1.0, "5": 1.2}, "2": {"1": 1.0, "5": 1.6}}}}  # the pair's llama.cpp prices
    recs = [c for c in concurrency.cells(rows, costs) if c["mode"] == "speculative"]
    assert [c["drafting_share"] for c in recs] == [0.25, 0.25]
    alpha = recs[0]["alpha_hat"]
    assert alpha == pytest.approx(0.5)  # one accepted, one rejection
    for c, v in zip(recs, (1.2, 1.6)):
        every = theory.costed_speedup(alpha, 4, theory.RoundCosts(0.0, v, 0.0, 0.0))
        want = (0.25 * theory.expected_tokens(alpha, 4) + 0.75) / (0.25 * v + 0.75)
        assert c["predicted_speedup"] == pytest.approx(want)
        assert min(1.0, every) < c["predicted_speedup"] < max(1.0, every)
    assert theory.costed_speedup(0.7, 4, theory.RoundCosts(0.1, 1.3), share=1.0) == pytest.approx(
        theory.expected_tokens(0.7, 4) / (4 * 0.1 + 1.3))
    assert theory.costed_speedup(0.7, 4, theory.RoundCosts(0.1, 1.3, 0.0, 0.2), share=0.0) == pytest.approx(1.0)
    assert "drafts in 25% of rounds" in "\n".join(concurrency.regime_lines(recs))
    assert "| 25% |" in "\n".join(concurrency.markdown(concurrency.cells(rows, costs), None))


def test_a_section_is_laid_out_in_order_and_keeps_its_records_where_report_md_hides_it():
    from spec_harness.reports.sections import Section, csv_tables, render

    listed = [Section(text=["# Title"]),
              Section("Speed", text=["- fast"], rows=[{"x": 1.234, "y": "a", "hidden": 9}], columns=[("x", "x", ".1f")],
                      after=["Why."], records=[{"x": 1.234}], csv="summary.csv", key="cells"),
              Section("Gone", rows=[{"x": 2}], columns=[("x", "x", "")], csv="gone.csv", when=False),
              Section(lines=["## Laid out elsewhere", "", "", "text"], records=[{"z": 3}], csv="else.csv"),
              Section(text=["Sources: `a`"])]
    assert render(listed) == ("# Title\n\n## Speed\n\n- fast\n\n| x |\n|---|\n| 1.2 |\n\nWhy.\n\n"
                              "## Laid out elsewhere\n\n\ntext\nSources: `a`\n")
    assert csv_tables(listed) == {"cells": ("summary.csv", [{"x": 1.234}]), "gone": ("gone.csv", [{"x": 2}]),
                                  "else": ("else.csv", [{"z": 3}])}


def test_a_section_added_to_the_list_reaches_report_md_its_csv_and_report_json(run_dir, tmp_path, monkeypatch):
    """A new table is one Section in build's list: no other edit writes it into report.md (before
    the plots, where it is listed), report.html, its CSV and report.json."""
    from spec_harness.reports import build
    from spec_harness.reports.sections import Section

    extra = Section("Extra table", text=["What it shows."], rows=[{"a": 1, "b": 2.5, "note": "x"}],
                    columns=[("a", "A", ""), ("b", "B", ".2fx")], csv="extra.csv")
    listed = build._other_sections
    monkeypatch.setattr(build, "_other_sections", lambda p: listed(p) + [extra])
    md = write_report([run_dir], tmp_path / "out").read_text()
    assert "\n## Extra table\n\nWhat it shows.\n\n| A | B |\n|---|---|\n| 1 | 2.50x |\n\n## Plots\n" in md
    assert pd.read_csv(tmp_path / "out" / "extra.csv").to_dict("records") == [{"a": 1, "b": 2.5, "note": "x"}]
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["extra"] == [{"a": 1, "b": 2.5, "note": "x"}] and len(doc["cells"]) == 6
    assert 'href="#extra-table">Extra table<' in (tmp_path / "out" / "report.html").read_text()
