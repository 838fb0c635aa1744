"""`harness bench`'s figures of whole runs: 6 (the default run's wall, first and cached), 11 and 15
(our closed- and open-loop load clients against vllm bench serve) and 13 (harness tune against a
plain sweep); harness/bench.py says what each measures."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from spec_harness.core.config import GenerationSettings, PairSpec
from spec_harness.core.results import read_run_json
from spec_harness.runtimes.process import group_processes
from spec_harness.runtimes.server import ServerSetting
from spec_harness.harness.bench_common import (
    DEFAULT_RUN_GOAL_S,
    LOAD_GOAL,
    LOAD_NS,
    OPEN_ALTERNATIONS,
    OPEN_RATES,
    OPEN_REQUESTS,
    OPEN_SLO_MS,
    Figure,
    alternate,
)

VLLM_BENCH_SERVE = Path(__file__).resolve().parents[1] / "runtimes" / "vllm_bench_serve.py"  # `vllm bench serve`, run directly


class RunFigures:
    """Figures that run the harness or a server as a user does (a mixin of harness/bench.py's Bench)."""

    def fig6_default_run(self) -> Figure:
        """The default `harness run --runtime all` twice, each in a process of its own: first with
        empty caches (a fresh machine: the GGUF conversions, the torch kernels' build, this
        machine's limits, vLLM's own cache), then again with the caches the first run filled."""
        import tempfile

        walls, notes, starts = {}, [], {}
        with tempfile.TemporaryDirectory(prefix="bench-default-") as tmp:
            env = {**os.environ, "HARNESS_CACHE": str(Path(tmp) / "cache"), "VLLM_CACHE_ROOT": str(Path(tmp) / "vllm")}
            for name in ("first", "cached"):
                out = Path(tmp) / name
                t = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", "run", "--runtime", "all", "--out", str(out)],
                                   capture_output=True, text=True, env=env)
                walls[name] = round(time.perf_counter() - t, 1)
                if r.returncode != 0:
                    notes.append(f"{name}: " + (r.stderr.strip().splitlines() or ["failed"])[-1])
                info = (read_run_json(out) or {}).get("runtimes", {})
                starts[name] = {k: v["server_starts"] for k, v in info.items() if isinstance(v, dict) and "server_starts" in v}
        return Figure(6, "wall of the default `harness run --runtime all` (s), caches filled", walls["cached"],
                      f"<= {DEFAULT_RUN_GOAL_S['cached']} s cached, <= {DEFAULT_RUN_GOAL_S['first']} s first, 2 cores",
                      {"wall_s": walls, "server_starts": starts}, note="; ".join(notes))

    def fig11_load_client(self, pair: PairSpec) -> Figure:
        """Our closed-loop client (runtimes/closed_loop.py) against vLLM's own benchmark client on the same
        baseline engine at each N, alternated (ours, theirs, ours, theirs)."""
        import tempfile

        from spec_harness.harness.prompts import DEFAULT_PROMPTS, load_prompts

        rt = self.runtime_for("vllm", pair)
        if rt is None:
            return Figure(11, "our load client / vllm bench serve", None, f"within {LOAD_GOAL:.0%}", note="vllm not available")
        prompts = load_prompts(DEFAULT_PROMPTS)
        detail, worst, failures = {}, 0.0, {}
        try:
            with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
                data = _prompt_file(_templated(rt, prompts), Path(tmp))
                for n in LOAD_NS:
                    gen = GenerationSettings(max_new_tokens=32, ignore_eos=True, concurrency=n)
                    requests = max(2 * n, len(prompts)) * 2
                    rt.start_setting(ServerSetting.baseline(n))
                    ids = [rt.encode(prompts[i % len(prompts)].text) for i in range(requests)]
                    srv = rt.servers[ServerSetting.baseline(n)]

                    def ours() -> float:
                        cell, gs = rt.generate_load(ids, [gen] * requests, False)
                        return sum(r.n_tokens for r in cell.requests) / cell.wall_s

                    def theirs() -> float:
                        got = _vllm_bench_serve(rt, srv.port, data, Path(tmp) / f"vllm-{n}.json", requests,
                                                ["--max-concurrency", str(n)])
                        if isinstance(got, str):  # said once per N, with the client's own last line
                            failures.setdefault(n, got)
                            return float("nan")
                        return got["output_throughput"]

                    got = alternate({"ours": ours, "vllm_bench_serve": theirs}, 2)
                    rel = got["ours"] / got["vllm_bench_serve"] - 1 if got["vllm_bench_serve"] == got["vllm_bench_serve"] else None
                    detail[f"N={n}"] = {**{k: round(v, 2) for k, v in got.items()}, "relative": rel,
                                        **({"error": failures[n]} if n in failures else {})}
                    if n in failures:
                        self.log(f"  N = {n}: {failures[n]}")
                    worst = max(worst, abs(rel)) if rel is not None else worst
        finally:
            rt.close()
        measured = any(d["relative"] is not None for d in detail.values())
        return Figure(11, "our load client's aggregate tok/s / vllm bench serve's, vLLM baseline (largest |difference|)",
                      worst if measured else None, f"<= {LOAD_GOAL:.0%} at N = {', '.join(map(str, LOAD_NS))}", detail)

    def fig15_open_loop_client(self, pair: PairSpec) -> Figure:
        """Our open-loop client (runtimes/open_loop.py) against `vllm bench serve --request-rate R`
        (Poisson arrivals, --goodput) and aiperf (where installed: _aiperf_command) on one vLLM baseline
        server of 4 slots, the default prompts, 32 tokens, EOS ignored, at each of OPEN_RATES,
        OPEN_ALTERNATIONS times in turn (ours, vllm bench serve, aiperf, ...). All three send one
        schedule: ours draws its gaps as vllm bench serve does (--seed 0), the same prompts in the same order
        (--disable-shuffle); aiperf replays that schedule (a mooncake trace of the prompts' texts
        and send times, --fixed-schedule). The server runs on all cores but the last (its threads
        one fewer than the cores), every client on the last: a client's own CPU then costs the
        client, not the server it measures. Per rate, metric and client the relative difference to
        ours (_compared), and our own runs' spread (max - min over the median: what the server and
        machine vary from run to run); the value: the largest difference over achieved req/s and
        tok/s, p50/p90 TTFT and TPOT and goodput."""
        import tempfile
        from dataclasses import replace

        from spec_harness.core.config import Arrivals
        from spec_harness.harness.open_load import DEFAULT_SLOTS
        from spec_harness.harness.prompts import DEFAULT_PROMPTS, load_prompts
        from spec_harness.runtimes import open_loop

        what = "our open-loop client / vllm bench serve and aiperf, vLLM baseline (largest |difference|)"
        goal = "<= 10 % per metric, rate and client"
        cores = sorted(os.sched_getaffinity(0))
        apart = len(cores) >= 2
        rt = self.runtime_for("vllm", pair, replace(self.settings, n_threads=len(cores) - 1) if apart else None)
        if rt is None:
            return Figure(15, what, None, goal, note="vllm not available")
        prompts = load_prompts(DEFAULT_PROMPTS)
        ids = [rt.encode(prompts[i % len(prompts)].text) for i in range(OPEN_REQUESTS)]
        slo = {k: v / 1000 for k, v in OPEN_SLO_MS.items()}
        aiperf = _aiperf_command()
        detail, worst, notes = {}, 0.0, [] if aiperf else [f"aiperf not measured: {AIPERF_INSTALL}"]
        if not apart:
            notes.append("one core: the clients share it with the server")
        try:
            with tempfile.TemporaryDirectory(prefix="bench-open-") as tmp:
                texts = _templated(rt, prompts, OPEN_REQUESTS)
                data = _prompt_file(texts, Path(tmp))
                rt.start_setting(ServerSetting.baseline(DEFAULT_SLOTS))
                srv = rt.servers[ServerSetting.baseline(DEFAULT_SLOTS)]
                if apart:
                    pin_threads(list(group_processes(srv.proc.pid)), cores[:-1])
                    pin_threads([os.getpid()], cores[-1:])  # the clients we start inherit it
                for rate in OPEN_RATES:
                    gen = GenerationSettings(max_new_tokens=32, ignore_eos=True, concurrency=DEFAULT_SLOTS,
                                             arrivals=Arrivals(rate), seed=0)
                    at = open_loop.arrival_times(OPEN_REQUESTS, rate, 1.0, gen.seed)

                    def vllm_bench() -> object:
                        return _open_of_vllm_bench(_vllm_bench_serve(
                            rt, srv.port, data, Path(tmp) / f"open-{rate:g}.json", OPEN_REQUESTS,
                            ["--request-rate", f"{rate:g}", "--burstiness", "1", "--seed", str(gen.seed), "--disable-shuffle",
                             "--goodput", *(f"{k}:{v:g}" for k, v in OPEN_SLO_MS.items()), "--save-detailed"]))

                    def ours() -> dict:
                        cell = rt.generate_load(ids, [gen] * OPEN_REQUESTS, False)[0]
                        ok = [r for r in cell.requests if not r.error]
                        return {**open_loop.summary(cell, slo),
                                "samples": {"ttft": [r.ttft_s for r in ok], "tpot": [open_loop.tpot_s(r) for r in ok]}}

                    clients = {"ours": ours, "vllm_bench_serve": vllm_bench}
                    if aiperf:
                        clients["aiperf"] = lambda: _aiperf(aiperf, rt.paths[0], srv.port, texts, at, Path(tmp) / f"aiperf-{rate:g}")
                    got: dict[str, list] = {name: [] for name in clients}
                    for _ in range(OPEN_ALTERNATIONS):
                        for name, client in clients.items():
                            got[name].append(client())
                    row, far = _compared(got, rate, notes)
                    worst = max(worst, far)
                    detail[f"{rate:g} req/s"] = row
                detail["cores"] = {"server": cpus_of(list(group_processes(srv.proc.pid))), "clients": cpus_of([os.getpid()])}
        finally:
            pin_threads([os.getpid()], cores)
            rt.close()
        measured = any("request_throughput" in r for r in detail.values())  # some other client compared
        return Figure(15, what, worst if measured else None, goal,
                      {**detail, "slo_ms": OPEN_SLO_MS, "requests": OPEN_REQUESTS}, note="; ".join(notes))

    def fig13_tune_vs_sweep(self) -> Figure:
        """`harness tune --runtime all` against a plain sweep of the grid it searches (gamma 1..its
        max, the draft model fixed and under each confidence threshold tune predicts, the head and
        prompt lookup fixed), on the default pair, each in a process of its own (both kept under
        runs/bench-13-TIME/): per runtime the sweep's tokens/s of tune's recommendation (the
        baseline for "do not speculate") over the sweep's best, both measured in the sweep; the wall
        times; tune's predicted against measured speedups, and whether each recommendation is at
        least as fast as its baseline; where the pick is not the sweep's best, the two measured
        again side by side (_side_by_side)."""
        import contextlib

        from spec_harness.harness import tune
        from spec_harness.core.results import read_results
        from spec_harness.reports.runs import results_files

        gammas = ",".join(str(g) for g in range(1, tune.DEFAULT_MAX_GAMMA + 1))
        confident = ",".join(f"confidence:{p:g}" for p in tune.CONFIDENCE_P)
        keep = Path("runs") / time.strftime("bench-13-%Y%m%d-%H%M%S")  # both runs kept: their reports say why
        keep.mkdir(parents=True, exist_ok=True)
        with contextlib.nullcontext(str(keep)) as tmp:
            walls, notes = {}, []
            steps = {"tune": [["tune", "--runtime", "all", "--out", f"{tmp}/tune"]],
                     "sweep": [["sweep", "--runtime", "all", "--gamma", gammas, "--drafter", "model",
                                "--draft-policy", f"fixed,{confident}", "--out", f"{tmp}/sweep"],
                               ["sweep", "--runtime", "all", "--gamma", gammas, "--drafter", "eagle3,ngram",
                                "--out", f"{tmp}/sweep", "--resume"]]}
            for name, commands in steps.items():
                t = time.perf_counter()
                for args in commands:
                    self.log(f"  harness {' '.join(args)}")
                    r = subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", *args], capture_output=True, text=True)
                    if r.returncode != 0:
                        notes.append(f"{name}: " + (r.stderr.strip().splitlines() or ["failed"])[-1])
                walls[name] = round(time.perf_counter() - t, 1)
            result = json.loads((Path(tmp) / "tune" / "tune.json").read_text()) if (Path(tmp) / "tune" / "tune.json").exists() else {}
            swept = tune.measured_cells([r for f in results_files(Path(tmp) / "sweep") for r in read_results(f)])
        detail, worst = {}, None
        for rec in result.get("recommendations", []):
            cells = [c for c in swept if c.runtime == rec["runtime"] and c.n == rec["n"] and c.tokens_per_s]
            if not cells or rec["speculate"] is None:
                continue
            best = max(cells, key=lambda c: c.tokens_per_s)
            pick = rec["best"] if rec["speculate"] else None
            mine = next((c for c in cells if (c.drafter and str(c.drafter), c.policy, c.gamma) ==
                         ((pick["drafter"], pick["policy"], pick["gamma"]) if pick else (None, "fixed", None))), None)
            ratio = mine.tokens_per_s / best.tokens_per_s if mine else None
            worst = ratio if worst is None or (ratio is not None and ratio < worst) else worst
            again = self._side_by_side(keep, rec, mine, best) if mine and mine is not best else None
            errors = [c["measured"] / c["predicted"] - 1 for c in result["confirmed"]
                      if c["runtime"] == rec["runtime"] and c["measured"] and c["predicted"]]
            detail[rec["runtime"]] = {
                "tune_pick": "baseline" if not pick else tune.Candidate(**pick).label(),
                "sweep_best": "baseline" if best.drafter is None else f"{best.drafter} g={best.gamma} {best.policy}",
                "pick_over_best_in_sweep": None if ratio is None else round(ratio, 3),
                "pick_over_best_side_by_side": again,
                "pick_at_least_baseline_in_tune": (not pick) or pick["tokens_per_s"] >= rec["base"]["tokens_per_s"],
                "predicted_vs_measured": [round(e, 3) for e in errors]}
        detail["runs"] = str(keep)
        detail["wall_s"] = {**walls, "tune_over_sweep": round(walls["tune"] / walls["sweep"], 3) if walls.get("sweep") else None}
        sides = [d["pick_over_best_side_by_side"] for d in detail.values() if isinstance(d, dict) and d.get("pick_over_best_side_by_side")]
        detail["worst_side_by_side"] = min(sides, default=1.0)
        return Figure(13, "harness tune's pick / a plain sweep's best, tokens/s in the sweep (worst runtime)", worst,
                      ">= 0.95 per runtime; tune <= 1/3 of the sweep's wall and <= 600 s; predicted within 10 %",
                      detail, note="; ".join(notes))

    def _side_by_side(self, keep: Path, rec: dict, mine, best) -> Optional[float]:
        """Tune's pick and the sweep's best measured again in one run, beside one baseline, every
        prompt twice, the settings in turn (harness run --repeats 2 --interleave over the smallest
        grid holding both): the pick's tokens/s over the best's. The sweep's best is the fastest of some 37 cells measured once
        each, so it reads high by selection; measured again beside the pick, it does not."""
        from spec_harness.harness import tune

        spec = [c for c in (mine, best) if c.drafter is not None]
        out = keep / "side-by-side" / tune._folder(rec["runtime"])
        args = ["run", "--runtime", rec["name"], "--repeats", "2", "--interleave", "--out", str(out),
                "--drafter", ",".join(sorted({str(c.drafter) for c in spec})), "--gamma", ",".join(sorted({str(c.gamma) for c in spec})),
                "--draft-policy", ",".join(sorted({c.policy for c in spec}))]
        if rec.get("forward"):
            args += ["--torch-forward", rec["forward"]]
        self.log(f"  harness {' '.join(args)}")
        subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", *args], capture_output=True, text=True)
        from spec_harness.core.results import read_results
        from spec_harness.reports.runs import results_files

        try:
            cells = tune.measured_cells([r for f in results_files(out) for r in read_results(f)])
        except Exception:  # noqa: BLE001 - no rows: the figure says so
            return None
        got = {(c.drafter, c.policy, c.gamma): c.tokens_per_s for c in cells if c.runtime == rec["runtime"] and c.n == rec["n"]}
        a, b = (got.get((c.drafter, c.policy, c.gamma)) for c in (mine, best))
        return round(a / b, 3) if a and b else None


OPEN_MEDIANS = ("request_throughput", "output_throughput", "goodput")  # figure 15: per run, the runs' median
OPEN_POOLED = {"ttft_p50_s": ("ttft", 0.5), "ttft_p90_s": ("ttft", 0.9), "tpot_p50_s": ("tpot", 0.5),
               "tpot_p90_s": ("tpot", 0.9)}  # figure 15: over every request of the runs together


def _compared(got: dict[str, list], rate: float, notes: list[str]) -> tuple[dict, float]:
    """Figure 15's row of one rate from each client's runs (`got`, ours first; a client's failed run
    is its line, added to `notes`): per metric ours, each other client's and its relative
    difference: throughputs and goodput the runs' median, the percentiles over every request of the
    runs pooled (as aiperf's own planners pool repeated runs: a p90 of 3 x 40 requests, not the
    median of three p90s of 40); our lag p99, the clients' CPU and our own runs' spread."""
    import statistics

    from spec_harness.core.metrics import quantile

    def value(name: str, k: str) -> float:
        if k in OPEN_MEDIANS:
            return statistics.median(s[k] for s in got[name])
        what, q = OPEN_POOLED[k]
        return quantile([x for s in got[name] for x in s["samples"][what]], q)

    keys = [*OPEN_MEDIANS, *OPEN_POOLED]
    row = {"lag_p99_s": max(s["lag_p99_s"] for s in got["ours"]),  # the clients' CPU, of one core:
           "client_cpu_share": {name: round(statistics.median(s["client_cpu_share"] for s in got[name]), 3)
                                for name in got if all(isinstance(s, dict) and "client_cpu_share" in s for s in got[name])},
           # what the server and machine vary from run to run: our own runs' max - min over their median
           "ours_spread": {k: round((max(s[k] for s in got["ours"]) - min(s[k] for s in got["ours"]))
                                    / (statistics.median(s[k] for s in got["ours"]) or 1), 3) for k in keys}}
    worst = 0.0
    for name in list(got)[1:]:
        failed = next((s for s in got[name] if isinstance(s, str)), None)
        if failed:
            notes.append(f"{name} at {rate:g} req/s: {failed}")
            continue
        for k in keys:
            a, b = value("ours", k), value(name, k)  # None: no request of the runs had it
            rel = round(a / b - 1, 3) if a is not None and b else None
            row.setdefault(k, {"ours": a if a is None else round(a, 4)})[name] = b if b is None else round(b, 4)
            row[k][f"relative_{name}"] = rel
            worst = max(worst, abs(rel or 0.0))
    return row, worst


def threads_of_pids(pids: list[int]) -> list[int]:
    """The threads of the processes `pids` (those still there)."""
    got = []
    for pid in pids:
        try:
            got += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except FileNotFoundError:
            continue
    return got


def pin_threads(pids: list[int], cpus: list[int]) -> None:
    """Every thread of the processes `pids` onto `cpus`; threads and processes they start later inherit it."""
    for task in threads_of_pids(pids):
        try:
            os.sched_setaffinity(task, cpus)
        except ProcessLookupError:
            continue  # ended meanwhile


def cpus_of(pids: list[int]) -> list[int]:
    """The cores the threads of `pids` may run on (figure 15 checks its pinning held: a server may bind its own)."""
    got: set[int] = set()
    for task in threads_of_pids(pids):
        try:
            got |= os.sched_getaffinity(task)
        except ProcessLookupError:
            continue
    return sorted(got)


def _templated(rt, prompts, n: Optional[int] = None) -> list[str]:
    """The prompts' texts under the target's chat template, as the server's clients send them: each
    once, or `n` cycling through them in order (the order our client sends them)."""
    texts = [rt.tokenizer.apply_chat_template([{"role": "user", "content": p.text}], tokenize=False,
                                              add_generation_prompt=True) for p in prompts]
    return texts if n is None else [texts[i % len(texts)] for i in range(n)]


def _prompt_file(texts: list[str], folder: Path) -> Path:
    """`texts` as vllm bench serve's custom dataset reads them, a line each in this order."""
    data = folder / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": t, "output_tokens": 32}) + "\n" for t in texts))
    return data


def _vllm_bench_serve(rt, port: int, data: Path, out: Path, requests: int, load: list[str]):
    """`vllm bench serve` (runtimes/vllm_bench_serve.py, vLLM's Python) against the server on `port`:
    `requests` of the custom prompt file, 32 tokens, EOS ignored, greedy, with the load's own flags
    -> its result JSON, or one line saying why there is none."""
    out.unlink(missing_ok=True)
    done = subprocess.run([rt.python, str(VLLM_BENCH_SERVE), "--backend", "vllm", "--host", "127.0.0.1", "--port", str(port),
                           "--model", "target", "--tokenizer", rt.paths[0], "--dataset-name", "custom", "--dataset-path",
                           str(data), "--skip-chat-template", "--custom-output-len", "32", "--ignore-eos",
                           "--num-prompts", str(requests), *load, "--temperature", "0", "--save-result",
                           "--result-dir", str(out.parent), "--result-filename", out.name],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if not out.exists():
        return f"vllm bench serve exited {done.returncode}: " + (done.stderr.strip().splitlines() or ["no output"])[-1]
    return json.loads(out.read_text())


def _open_of_vllm_bench(got):
    """vllm bench serve's result JSON (--save-detailed) -> figure 15's run: its throughputs and goodput,
    and per request TTFT and TPOT in seconds, TPOT as vLLM computes it; or its line saying why none."""
    if isinstance(got, str):
        return got
    done = [(t, e2e, n) for t, e2e, n, err in zip(got["ttfts"], got["latencies"], got["output_lens"], got["errors"]) if not err]
    return {"request_throughput": got["request_throughput"], "output_throughput": got["output_throughput"],
            "goodput": got["request_goodput"],
            "samples": {"ttft": [t for t, _, _ in done], "tpot": [(e2e - t) / (n - 1) for t, e2e, n in done if n > 1]}}


AIPERF_INSTALL = ("set HARNESS_AIPERF to an aiperf command, or install it beside the checkout: "
                  "python3 -m venv .venv-aiperf && .venv-aiperf/bin/pip install aiperf")

AIPERF_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}  # its records' units -> seconds

# aiperf at its leanest: one worker, one record processor, the server's token counts (no
# tokenizing of answers): its processes share the clients' core with ours (figure 15)
AIPERF_LEAN = ["--workers-max", "1", "--record-processors", "1", "--use-server-token-count"]


def _aiperf_command() -> Optional[str]:
    """aiperf's command: HARNESS_AIPERF, else the checkout's .venv-aiperf (a venv of its own: it
    pins packages of its own); None where neither is there."""
    given = os.environ.get("HARNESS_AIPERF")
    found = Path(__file__).resolve().parents[1] / ".venv-aiperf" / "bin" / "aiperf"
    return given or (str(found) if found.is_file() else None)


def _aiperf(command: str, tokenizer: str, port: int, texts: list[str], arrivals: list[float], out: Path):
    """aiperf on the server on `port`, replaying `texts[k]` at `arrivals[k]` seconds (a mooncake
    trace, --fixed-schedule), 32 tokens each, EOS ignored, streamed, with figure 15's goodput
    targets (its inter_token_latency is vLLM's TPOT) -> figure 15's run: its throughputs, goodput,
    per request TTFT and TPOT in seconds (its records, profile_export.jsonl) and its processes' CPU
    over its wall (of one core, its start included), or one line saying why there are none."""
    out.mkdir(parents=True, exist_ok=True)
    trace = out / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": round(1000 * t, 3), "text_input": x, "output_length": 32}) + "\n"
                             for t, x in zip(arrivals, texts)))
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([command, "profile", "--model", "target", "--tokenizer", tokenizer, "--url", f"http://127.0.0.1:{port}",
                           "--endpoint-type", "completions", "--streaming", "--input-file", str(trace),
                           "--custom-dataset-type", "mooncake_trace", "--fixed-schedule", "--extra-inputs", "ignore_eos:true",
                           "--goodput", f"time_to_first_token:{OPEN_SLO_MS['ttft']:g} inter_token_latency:{OPEN_SLO_MS['tpot']:g}",
                           "--artifact-dir", str(out / "artifacts"), "--ui-type", "none", *AIPERF_LEAN],
                          capture_output=True, text=True, timeout=900,
                          # not HF_HUB_OFFLINE: under it aiperf 0.13 refuses a local tokenizer folder
                          env={k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"})
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - t
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    result = out / "artifacts" / "profile_export_aiperf.json"
    if done.returncode != 0 or not result.exists():  # its reason, where its summary of errors gives one
        said = [x.strip(" │") for x in (done.stdout + done.stderr).splitlines() if "Reason:" in x or " ERROR " in x]
        return f"aiperf exited {done.returncode}: " + " ".join((said or ["no reason given"])[0].split())[:300]
    got = json.loads(result.read_text())
    samples: dict[str, list[float]] = {"ttft": [], "tpot": []}
    for line in (out / "artifacts" / "profile_export.jsonl").read_text().splitlines():  # a line per request
        record = json.loads(line)
        for name, tag in (("ttft", "time_to_first_token"), ("tpot", "inter_token_latency")):
            m = (record.get("metrics") or {}).get(tag)
            if not record.get("error") and m:
                samples[name].append(m["value"] * AIPERF_UNITS[m["unit"]])
    return {"request_throughput": got["request_throughput"]["avg"], "output_throughput": got["output_token_throughput"]["avg"],
            "goodput": got.get("goodput", {}).get("avg", 0.0), "client_cpu_share": cpu / wall, "samples": samples}
