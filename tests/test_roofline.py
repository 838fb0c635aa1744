"""reports/roofline.py: each runtime's steps against this machine's limits. By hand on synthetic rows
(which limit binds, the fraction, the sentence), and on a real tiny run of torch and llamacpp: its
run.json holds machine_limits and the models' sizes, the fractions are recomputed here from the
rows, the models' own weights and the limits, and the report and `harness explain` show them; an old
run folder without limits gets one note and nothing else changes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from spec_harness.harness.cli import main
from spec_harness.reports import write_report
from spec_harness.reports.runs import load
from spec_harness.reports.roofline import NEAR_LIMIT, NO_LIMITS, roofline
from tests import synthetic

# synthetic rows (tests/synthetic.py): a baseline step is 10 ms of verify, a gamma-4 round drafts 4
# tokens at 2 ms each and verifies 5 tokens in 15 ms
LIMITS = {"read_gb_s": 20.0, "matmul_f32_gflops": 100.0, "matmul_int8_gops": None, "threads": 2, "cpu": "test CPU"}
TARGET = {"weight_bytes": 100_000_000, "flops_per_token": 270_000_000, "kv_bytes_per_position": 0, "layers": 0,
          "attn_width": 0, "weights": "f32", "compute": "f32"}  # memory 5 ms; compute 2.7 ms per token
DRAFT = {**TARGET, "weight_bytes": 20_000_000, "flops_per_token": 1_000_000}  # memory 1 ms


def _info(sizes: dict) -> dict:
    entries = {rt: {"model_sizes": s, "prompt_tokens": {"f1": 7, "o1": 9}} for rt, s in sizes.items()}
    return {"machine_limits": LIMITS, "roofline": {"qwen-like": entries}}


def _step(records, runtime, step):
    return next(r for r in records if r["runtime"] == runtime and r["step"] == step)


def test_which_limit_binds_and_the_fraction_by_hand(tmp_path):
    rows = synthetic.rows_for("fast", (4,)) + synthetic.rows_for("slow", (4,), scale=2.0)
    d = synthetic.write_run(tmp_path / "run", rows, info=_info({"fast": {"target": TARGET, "draft": DRAFT}}))
    got = roofline(load([d]).rows)
    base = _step(got.records, "fast", "target step")
    assert base["measured_ms"] == pytest.approx(10.0) and base["memory_bound_ms"] == pytest.approx(5.0)
    assert base["compute_bound_ms"] == pytest.approx(2.7) and base["binds"] == "memory"
    assert base["fraction"] == pytest.approx(0.5) and "the runtime, not the hardware, is slow" in base["sentence"]
    assert "target step 10 ms at 0.50 of this machine's memory bound (5 ms to read 95 MiB at 20 GB/s)" in base["sentence"]
    verify = _step(got.records, "fast", "verify")
    assert verify["tokens"] == 5 and verify["compute_bound_ms"] == pytest.approx(5 * 2.7)  # memory is still 5 ms
    assert verify["binds"] == "compute" and verify["fraction"] == pytest.approx(13.5 / 15) and 13.5 / 15 >= NEAR_LIMIT
    assert "verify (5 tokens) 15 ms at 0.90 of this machine's compute bound" in verify["sentence"]
    assert verify["sentence"].endswith("the CPU cannot batch for free.")
    draft = _step(got.records, "fast", "draft step")
    assert draft["measured_ms"] == pytest.approx(2.0) and draft["fraction"] == pytest.approx(1.0 / 2.0)
    assert not [r for r in got.records if r["runtime"] == "slow"]  # no sizes: a note, no rows
    assert got.notes == ["slow: no model sizes recorded in run.json, so no roofline rows"]


def test_a_compute_kind_without_a_measured_throughput_has_only_the_memory_bound(tmp_path):
    rows = synthetic.rows_for("fast", (4,))
    q = {**TARGET, "weights": "q4_1", "compute": "int8"}  # LIMITS has no int8 throughput
    d = synthetic.write_run(tmp_path / "run", rows, info=_info({"fast": {"target": q, "draft": DRAFT}}))
    verify = _step(roofline(load([d]).rows).records, "fast", "verify")
    assert verify["compute_bound_ms"] is None and verify["binds"] == "memory" and verify["fraction"] == pytest.approx(5 / 15)
    assert "(no compute bound: int8 throughput is not measured)" in verify["sentence"]


def test_an_old_run_folder_without_limits_gets_one_note_and_the_report_still_builds(tmp_path):
    d = synthetic.write_run(tmp_path / "old", synthetic.rows_for("fast", (4,)))
    got = roofline(load([d]).rows)
    assert got.records == [] and got.notes == [f"{d}: {NO_LIMITS}"]
    md = write_report([d]).read_text()
    assert "## Against this machine's limits" in md and NO_LIMITS in md and "## Why this speedup" in md
    assert (d / "report" / "roofline.csv").is_file()
    assert json.loads((d / "report" / "report.json").read_text())["roofline_notes"] == got.notes
    res = CliRunner().invoke(main, ["explain", str(d)])
    assert res.exit_code == 0 and NO_LIMITS in " ".join(res.output.split())  # its lines wrapped at 100 columns


# ---------------------------------------------------------------- a real tiny run


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_gguf):
    out = tmp_path_factory.mktemp("roofline") / "run"
    res = CliRunner().invoke(main, ["run", "--runtime", "torch,llamacpp", "--pair", "tiny", "--max-new-tokens", "12",
                                    "--prompts", "code", "--warmup", "0", "--threads", "1", "--device", "cpu",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _linear_bytes(folder: str) -> int:
    """float32 bytes of every nn.Linear weight of the model (the tied head once): counted from
    the loaded modules, not from the shape."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    seen = {id(m.weight): m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)}
    return sum(w.numel() * 4 for w in seen.values())


@pytest.mark.slow
def test_a_real_runs_run_json_has_the_limits_and_the_models_sizes(tiny_run, tiny_gguf):
    info = json.loads((tiny_run / "run.json").read_text())
    limits = info["machine_limits"]
    assert limits["threads"] == 1 and limits["read_gb_s"] > 0 and limits["matmul_f32_gflops"] > 0
    for rt in ("torch [kernels]", "llamacpp"):
        entry = info["roofline"]["tiny"][rt]
        assert entry["model_sizes"] == info["runtimes"][rt]["model_sizes"]
        assert set(entry["prompt_tokens"]) == {f"code-{i}" for i in range(1, 6)} and min(entry["prompt_tokens"].values()) > 0
    torch_sizes, llama_sizes = (info["roofline"]["tiny"][rt]["model_sizes"] for rt in ("torch [kernels]", "llamacpp"))
    for role, folder in (("target", tiny_gguf.target), ("draft", tiny_gguf.draft)):
        assert torch_sizes[role]["weight_bytes"] == _linear_bytes(folder)  # float32 in torch
        assert llama_sizes[role]["weight_bytes"] == torch_sizes[role]["weight_bytes"]  # the f32 GGUF: the same matrices
        assert llama_sizes[role]["kv_bytes_per_position"] * 2 == torch_sizes[role]["kv_bytes_per_position"]  # f16 cache
        assert torch_sizes[role]["compute"] == llama_sizes[role]["compute"] == "f32"


@pytest.mark.slow
def test_a_real_runs_fractions_recomputed_from_its_rows(tiny_run):
    info = json.loads((tiny_run / "run.json").read_text())
    limits = info["machine_limits"]
    rows = [json.loads(line) for line in (tiny_run / "results.jsonl").read_text().splitlines()]
    got = roofline(load([tiny_run]).rows).records
    assert {(r["runtime"], r["step"]) for r in got} == {(rt, s) for rt in ("torch [kernels]", "llamacpp")
                                                        for s in ("target step", "draft step", "verify")}
    for rec in got:
        entry = info["roofline"]["tiny"][rec["runtime"]]
        sizes = entry["model_sizes"][rec["model"]]
        mode = "baseline" if rec["step"] == "target step" else "speculative"
        label = lambda r: r["runtime"] + (f" [{r['torch_forward']}]" if r.get("torch_forward") else "")  # noqa: E731
        mine = [r for r in rows if label(r) == rec["runtime"] and r["mode"] == mode]
        if rec["step"] == "draft step":
            seconds = sum(r["draft_s"] for r in mine) / sum(r["n_drafted"] for r in mine)
        else:  # the baseline's one-token steps, or the verify passes: verify time per round
            seconds = sum(r["verify_s"] for r in mine) / sum(r["n_rounds"] for r in mine)
        tokens = 1 + sum(r["n_drafted"] for r in mine) / sum(r["n_rounds"] for r in mine) if rec["step"] == "verify" else 1
        context = sum(entry["prompt_tokens"][r["prompt_id"]] + r["new_tokens"] / 2 for r in mine) / len(mine)
        memory = (sizes["weight_bytes"] + sizes["kv_bytes_per_position"] * context) / (limits["read_gb_s"] * 1e9)
        flops = tokens * (sizes["flops_per_token"] + 4 * sizes["layers"] * sizes["attn_width"] * round(context))
        compute = flops / (limits["matmul_f32_gflops"] * 1e9)
        assert rec["measured_ms"] == pytest.approx(1000 * seconds) and rec["tokens"] == pytest.approx(tokens)
        assert rec["fraction"] == pytest.approx(max(memory, compute) / seconds)
        assert rec["binds"] == ("compute" if compute > memory else "memory")


@pytest.mark.slow
def test_a_real_runs_report_and_explain_show_the_roofline(tiny_run):
    md = write_report([tiny_run]).read_text()
    section = md.split("## Against this machine's limits", 1)[1].split("## Plots", 1)[0]
    assert "| torch [kernels] · baseline" in section and "| llamacpp · spec γ=4" in section and "of this machine's memory bound" in section
    csv = (tiny_run / "report" / "roofline.csv").read_text().splitlines()
    assert len(csv) == 1 + 6 and csv[0].startswith("source,runtime,pair")
    doc = json.loads((tiny_run / "report" / "report.json").read_text())
    assert len(doc["roofline"]) == 6 and str(tiny_run) in doc["machine_limits"]
    res = CliRunner().invoke(main, ["explain", str(tiny_run)])
    assert res.exit_code == 0, res.output
    assert "## Against this machine's limits" in res.output
    said = " ".join(res.output.split())  # its lines wrapped at 100 columns
    assert all(" ".join(r["sentence"].split()) in said for r in doc["roofline"])
