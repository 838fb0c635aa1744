"""harness tune --request-rate: the confirmed settings under an open-loop load, the setting to run
at each offered rate, where speculation is turned off, and the switch in the server's own terms."""

from __future__ import annotations

import json

import pytest

from spec_harness.core.config import PairSpec
from spec_harness.harness import tune_lines, tune_load
from tests.test_cli import harness, invoke


def _rows(rate: float, e2e: dict, met: dict, lag: float = 0.0) -> list[dict]:
    """One request row per setting at `rate` ("base", "model" at gamma 4, "ngram" at gamma 3), each
    carrying its cell's summary: median E2E e2e[setting], requests per second rate, of which the
    share met[setting] meets every target."""
    out = []
    for setting, seconds in e2e.items():
        spec = setting != "base"
        summary = {"requests": 8, "errors": 0, "request_throughput": rate, "output_throughput": 30 * rate,
                   "e2el_p50_s": seconds, "goodput": rate * met[setting], "lag_p99_s": lag}
        out.append({"runtime": "vllm", "pair": "p", "mode": "speculative" if spec else "baseline",
                    "drafter": setting if spec else None, "gamma": {"model": 4, "ngram": 3}.get(setting),
                    "draft_policy": "fixed" if spec else None, "request_rate": rate, "burstiness": 1.0,
                    "concurrency": 4, "extra": {"cell": {"open_loop": summary}}})
    return out


def test_each_rate_takes_the_fastest_setting_that_meets_the_targets_and_speculation_stops_where_none_does():
    rows = (_rows(0.5, {"base": 2.0, "model": 1.5, "ngram": 1.8}, {"base": 1, "model": 1, "ngram": 1})
            # prompt lookup is the fastest at 1 req/s but misses the targets: the draft model meets them
            + _rows(1.0, {"base": 2.2, "model": 1.9, "ngram": 1.7}, {"base": 1, "model": 1, "ngram": 0.5})
            + _rows(2.0, {"base": 3.0, "model": 2.8, "ngram": 3.5}, {"base": 1, "model": 0.5, "ngram": 1})
            # the client lagged at 4 req/s: its choice is listed, not counted
            + _rows(4.0, {"base": 9.0, "model": 5.0, "ngram": 6.0}, {"base": 0, "model": 0, "ngram": 0}, lag=0.05))
    got = tune_load.choose(rows, None, "vllm")
    chosen = [(p["rate"], p["choice"]["setting"], p["kept"]) for p in got["rates"]]
    assert chosen == [("0.5", "vllm", True), ("1", "vllm", True), ("2", tune_load.BASELINE, True), ("4", "vllm", False)]
    assert [len(p["options"]) for p in got["rates"]] == [3, 3, 3, 3]  # the baseline once, each drafter once
    assert got["off_above"] == "1"
    assert got["batch_at_switch"] == 2  # Little's law at 1 req/s: 1 req/s x 1.9 s
    assert got["predicted_off_above"] is None  # no batched prices, no N = 1 rows: nothing predicted
    # where no setting meets the targets, the most goodput: at 4 req/s the draft model's
    assert tune_load._best([o for o in got["rates"][3]["options"]], slo=True)["drafter"] == "model"


@pytest.mark.parametrize("flags, said", [
    ([True, True], "always"), ([False, False], "never"), ([True, False, False], "0"), ([True, False, True], None),
    ([False, True], None)])
def test_speculation_is_turned_off_above_one_rate_only_where_one_switch_says_every_choice(flags, said):
    per_rate = [{"rate": str(k), "on": on} for k, on in enumerate(flags)]
    assert tune_load._off_above(per_rate, lambda p: p["on"]) == said


def _entry(name: str, off: str) -> dict:
    choice = {"setting": name, "drafter": "model", "gamma": 4, "e2el_p50_s": 1.5, "request_throughput": 1.0,
              "goodput": 1.0, "meets": True}
    return {"runtime": name, "name": name, "pair": "p", "slots": 4, "slo": True, "off_above": off,
            "predicted_off_above": "2", "batch_at_switch": 3,
            "settings": [{"drafter": "model", "gamma": 4, "policy": "fixed"}],
            "rates": [{"rate": "1", "kept": True, "choice": choice, "predicted_speculate": True},
                      {"rate": "2", "kept": True, "predicted_speculate": False,
                       "choice": {**choice, "setting": tune_load.BASELINE, "drafter": None, "gamma": None}}]}


def test_the_switch_is_said_in_the_servers_own_terms():
    pairs = {"p": PairSpec("p", "org/target", "org/draft", "/m/t.gguf", "/m/d.gguf")}
    lines = tune_lines.load_lines(_entry("vllm", "1"), pairs)
    text = " ".join(" ".join(lines).split())  # wrapped lines read as one
    assert "1 req/s: model g=4, E2E p50 1.50 s, meets the targets" in text
    assert "speculate up to 1 req/s, turn it off above (predicted from the batched step costs: speculate up to 2" in text
    commands = [line.strip() for line in lines if line.startswith("    ")]
    assert len(commands) == 1 and commands[0].startswith("vllm serve org/target --speculative-config ")
    cfg = json.loads(commands[0].split("--speculative-config ")[1].strip("'"))
    assert cfg["num_speculative_tokens_per_batch_size"] == [[1, 3, 4], [4, 4, 0]]  # off above 3 running requests
    assert all(len(line) <= 100 for line in lines if not line.startswith("    "))
    # llama-server has no switch by load: the command with speculation and the one without
    lines = tune_lines.load_lines(_entry("llama-server", "1"), pairs)
    assert "llama-server has no switch by load" in " ".join(lines)
    commands = [line.strip() for line in lines if line.startswith("    ")]
    assert len(commands) == 2 and "-md /m/d.gguf" in commands[0] and "-md" not in commands[1]
    alternate = " ".join(" ".join(tune_lines.load_lines(_entry("vllm", None), pairs)).split())
    assert "vllm: speculate at 1 req/s only: no one switch says it" in alternate
    assert "(predicted from the batched step costs: speculate up to 2 req/s" in alternate
    never = tune_lines.load_lines(_entry("vllm", "never"), pairs)
    assert "do not speculate at any rate measured" in " ".join(never)
    assert [line.strip() for line in never if line.startswith("    ")] == ["vllm serve org/target"]


def test_a_load_no_runtime_can_take_is_one_line(tmp_path):
    r = invoke("tune", "--runtime", "torch", "--pair", "tiny", "--request-rate", "1", "--out", tmp_path / "t")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "--request-rate" in r.stderr and "llama-server" in r.stderr


@pytest.mark.slow
def test_tune_under_an_open_load_chooses_per_rate_from_cells_measured_there(tmp_path):
    out = tmp_path / "tune"
    args = ["tune", "--runtime", "llama-server,torch", "--pair", "tiny", "--max-gamma", "2", "--drafter", "model",
            "--prompts", "factual", "--max-new-tokens", "12", "--confirm", "1", "--rule-out", "0",
            "--request-rate", "2,inf", "--num-requests", "4", "--slo", "ttft=5000,tpot=500", "--out", str(out)]
    r = harness(*args)
    assert r.returncode == 0, r.stderr
    result = json.loads((out / "tune.json").read_text())
    load = {e["runtime"]: e for e in result["load"]}
    assert load["torch [kernels]"]["skipped"].startswith("in-process")
    server = load["llama-server"]
    assert [p["rate"] for p in server["rates"]] == ["2", "inf"]
    for p in server["rates"]:  # the baseline and the confirmed setting, each measured at every rate
        assert [o["setting"] == tune_load.BASELINE for o in p["options"]] == [True, False]
        assert p["choice"] == min((o for o in p["options"] if o["meets"]), key=lambda o: o["e2el_p50_s"])
    rows = [json.loads(line) for line in (out / "load" / "llama-server" / "results.jsonl").read_text().splitlines()]
    assert sum(r.get("request_rate") is not None for r in rows) == 2 * 2 * 4  # 2 settings x 2 rates x 4 requests
    assert "llama-server under load, the setting of the lowest median latency" in r.stdout
    assert "torch [kernels] under load: not measured: in-process" in r.stdout
    assert "## Open-loop load" in (out / "report" / "report.md").read_text()
    assert not any((out / d).exists() for d in ("probe/open", "confirm/open"))
    probe = [json.loads(line) for line in (out / "probe" / "results.jsonl").read_text().splitlines()]
    assert all(r.get("request_rate") is None for r in probe)  # the probe is closed-loop
    again = harness(*args, "--resume")  # nothing measured again
    assert again.returncode == 0, again.stderr
    assert len((out / "load" / "llama-server" / "results.jsonl").read_text().splitlines()) == len(rows)
