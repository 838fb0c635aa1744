"""`harness calibrate` on the tiny pair through the real runtimes: forced acceptance at every
(gamma, alpha), rows marked synthetic, a runtime that cannot force acceptance skipped with its
reason, the table, plots and verdicts, the pair's alpha_hat from a run folder, resume; and the
calibration's arithmetic (crossing, overlap ceiling, verdicts) on known numbers."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from spec_harness.core import theory
from spec_harness.harness.cli import main
from spec_harness.reports import calibration

ARGS = ["--pair", "tiny", "--gamma", "1,3", "--alpha", "0,0.5,1", "--prompts", "math", "--max-new-tokens", "16",
        "--threads", "1", "--n-ctx", "512", "--warmup", "0"]


def rows_of(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_calibrate_runs_every_cell_and_writes_the_curves(tmp_path):
    pair_run = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--runtime", "torch", "--pair", "tiny", "--gamma", "3", "--prompts", "math",
                                    "--max-new-tokens", "16", "--warmup", "0", "--out", str(pair_run)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "cal"
    res = CliRunner().invoke(main, ["calibrate", "--runtime", "torch,llamacpp,hf", *ARGS, "--run", str(pair_run),
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    said = [line for line in res.output.splitlines() if not line.startswith(("results: ", "calibration: "))]
    assert all(len(line) <= 100 for line in said), [line for line in said if len(line) > 100]
    rows = rows_of(out)
    spec = [r for r in rows if r["mode"] == "speculative" and not r["error"]]
    assert {(r["runtime"], r["gamma"], r["forced_rates"][0]) for r in spec} == {
        (rt, g, a) for rt in ("torch", "llamacpp") for g in (1, 3) for a in (0.0, 0.5, 1.0)} and len(spec) == 5 * 12
    assert all(r["synthetic"] and r["verify_rule"] == "forced" and r["greedy_match"] is None for r in spec)
    for r in spec:
        drafted = [rd for rd in r["rounds"] if rd["drafted"]]
        if r["forced_rates"] == [0.0]:
            assert all(rd["accepted"] == 0 for rd in drafted)
        if r["forced_rates"] == [1.0]:
            assert all(rd["accepted"] == rd["drafted"] for rd in drafted)
    skipped = [r for r in rows if r["error"]]
    assert len(skipped) == 1 and skipped[0]["runtime"] == "hf" and "cannot force acceptance" in skipped[0]["error"]
    report = out / "report"
    md = (report / "calibration.md").read_text()
    assert "| torch [kernels] | 3 |" in md and "| llamacpp | 1 |" in md and "perfect overlap" in md
    for rt in ("torch_kernels", "llamacpp"):
        assert (report / f"calibration-{rt}.png").read_bytes()[:4] == b"\x89PNG"
    csv = (report / "calibration.csv").read_text().splitlines()
    assert len(csv) == 1 + 4  # runtime x gamma
    assert "torch [kernels] at gamma 3 on this machine" in res.output and "your pair reaches" in res.output
    # a curve per runtime and gamma with a measured point at each forced rate, the draws realizing
    # exactly 0 and 1 at the ends (how fast each point is, is the machine's: no timing asserted here)
    from spec_harness.reports.build import load
    from spec_harness.reports.ceiling import CFlops

    es = calibration.entries(load([out], forced=True).rows, CFlops())
    assert sorted((e["runtime"], e["gamma"]) for e in es) == [("llamacpp", 1), ("llamacpp", 3), ("torch [kernels]", 1), ("torch [kernels]", 3)]
    for e in es:
        assert [a for a, _ in e["points"]] == [0.0, 0.5, 1.0] and all(s > 0 for _, s in e["points"])
        assert e["realized_alpha"][0] == 0.0 and e["realized_alpha"][-1] == 1.0
    again = CliRunner().invoke(main, ["calibrate", "--runtime", "torch,llamacpp,hf", *ARGS, "--out", str(out), "--resume"])
    assert again.exit_code == 0, again.output
    assert len(rows_of(out)) == len(rows) + 1  # only hf's skipped row is tried again


def test_crossing_overlap_and_verdicts_on_known_numbers():
    assert calibration._crossing([(0.0, 0.5), (0.5, 0.9), (1.0, 1.3)]) == pytest.approx(0.625)
    assert calibration._crossing([(0.0, 1.2), (1.0, 2.0)]) == 0.0 and calibration._crossing([(0.0, 0.2), (1.0, 0.9)]) is None
    k = theory.RoundCosts(0.1, 3.0, 0.2, 0.0)  # verification dominates: overlap hides all drafting
    assert calibration._overlap(0.5, 4, k) == pytest.approx(theory.expected_tokens(0.5, 4) / 3.2)
    e = {"runtime": "llamacpp", "gamma": 4, "breakeven_measured": 0.83, "breakeven_flops": 0.30,
         "breakeven_c_measured": 0.35, "c": 0.1, "v": 3.2, "o": 0.2, "pair_alpha": 0.46}
    v = calibration.verdict(e)
    assert v.startswith("llamacpp at gamma 4 on this machine needs alpha >= 0.83 to break even (theory with c from "
                        "FLOPs only: 0.30)") and "your pair reaches 0.46" in v and "hardware-and-runtime problem first" in v
    assert "a model problem first" in calibration.verdict({**e, "pair_alpha": 0.2})
    assert "it pays here" in calibration.verdict({**e, "pair_alpha": 0.9})
    assert "does not break even" in calibration.verdict({**e, "breakeven_measured": None, "pair_alpha": None})
