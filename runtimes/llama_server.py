"""The `llama-server` runtime: llama.cpp's own speculative loop (common/speculative.cpp as the
server runs it), in the real `llama-server` process the harness starts, owns and stops.

Servers (runtimes/process.py does the process, runtimes/server.py the pool): one per setting, since
this server takes its draft settings only on the command line (its per-request `speculative.*`
fields are compiled out):
- baseline: `llama-server -m TARGET` (no draft), the same binary and file;
- speculative, draft policy `fixed`: `-md DRAFT --spec-type draft-simple --spec-draft-n-max G
  --spec-draft-n-min 0 --spec-draft-p-min 0` (exactly G drafts per round while tokens remain);
- speculative, `confidence:P`: the same with `--spec-draft-p-min P` (the server stops drafting
  before the first position whose top-1 probability is under P, as the shared loop does, but its
  probability is renormalized over the draft sampler's top 10 candidates, so it stops less often);
- speculative, `library-default`: `-md DRAFT --spec-type draft-simple` and nothing else: what a
  user who sets nothing gets (this build: n-max 3, n-min 0, p-min 0);
- forced acceptance (GenerationSettings.forced, for calibration): `--spec-synth-rates` with one
  rate per position, unconditional (the product of our conditional rates up to it): the server
  accepts drafts at random whatever the tokens (never an end-of-generation draft) and samples
  the token after with the target's sampler;
- `--drafter ngram[:N,K]`: no draft model, `--spec-type ngram-simple --spec-ngram-simple-size-n N
  --spec-ngram-simple-size-m K` (K default gamma; under library-default only `--spec-type
  ngram-simple`: n 12, m 48 in this build). llama.cpp's lookup matches exactly the last N tokens
  (no shorter fallback), the latest earlier occurrence, and drafts nothing if fewer than N
  tokens follow it. The heuristic schedule has no server equivalent (skipped).
- `--drafter eagle3[:PATH]`: `-md HEAD.gguf --spec-type draft-eagle3` with the fixed or confidence
  settings above: the EAGLE-3 head (models/eagle3.py) converted by llama.cpp's own
  convert_hf_to_gguf.py once (cached; its tokenizer metadata the target GGUF's), the server
  extracting the target's layer inputs itself. A head the converter refuses is a skipped row with
  the converter's reason.
Each has the run's threads (-t/-tb, and -td/-tbd for the draft), context, batch size, flash
attention off and GPU layers, like the other llama.cpp runtimes; one slot, no prompt cache, and
`cache_prompt: false`, so every request prefills. The runner measures one setting at a time, so
each server starts once per run (runtimes/server.py's ServerRuntime), or, with RunConfig.interleave
where half the free memory holds every setting's server (_room_for), one setting after another
prompt by prompt, all kept live; used directly, at most MAX_LIVE servers are kept (the least
recently used stopped), every one but the one in use paused.
Each is warmed up by one short request before its first measured one.
A server that died is started again for the next generation (the failed one is an error row).

What is measured, from the server's own numbers (a completion's `timings`, its log, /metrics):
- wall_s: the HTTP request, timed by the harness; prefill_s: `prompt_ms` (the target's prompt;
  the draft processes the same batches inside the server, booked in the server's decode time);
- draft_s: the draft's drafting calls, llama.cpp's own counter (`dur(b,g,a)` of its speculative
  statistics, cumulative per server: the difference around the request);
- verify_s: `predicted_ms` minus draft_s: the target's verify passes, its sampling, the draft's
  re-evaluation of every verify batch (this build re-runs it: TAG_SPEC_AVOID_DRAFT_REEVAL) and the
  server's loop; sampling_s: None (inside the server's decode); unaccounted_s: the rest of the
  wall: HTTP, JSON and the server's queue. Baseline: verify_s = predicted_ms, draft_s = 0.
- rounds: drafted and accepted per round from the server's per-round log lines (LLAMA_TRACE=1),
  with the first token (sampled from the prompt) and rounds run without a draft (the last token)
  as rounds with drafted 0; no per-round times (None: the server reports none). The counts are
  checked against `draft_n`/`draft_n_accepted` and /metrics; per-position acceptance from the
  /metrics counters before and after each request is kept in extra.server_metrics.
- target_entropy and step margins of a baseline: recomputed after the request, outside its wall,
  one token per pass by the same llama.cpp build in-process (the server returns no logits).
- verify rule: the target samples each position with its own sampler and accepts while that
  sample equals the draft's token, the draft proposing its argmax (draft-simple, top-k 10, top 1):
  "greedy-match" at temperature 0, "sample-match" above it (not Leviathan's ratio test).
An EAGLE-3 head drafts with --no-spec-draft-backend-sampling (BACKEND_SAMPLING_OFF): llama.cpp's
default picks a batch's draft candidates wrongly for all but one sequence under load.
What it does not do: tokenization inside the server (prompts are sent as the ids every llama.cpp
runtime uses), or streaming.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Optional

from spec_harness.core.config import LIBRARY_DEFAULT, WARMUP_TOKENS, DrafterSpec, GenerationSettings, PairSpec
from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.core.drafters.ngram import NgramSpec
from spec_harness.core.machine import free_memory
from spec_harness.core.records import Generation, Phases
from spec_harness.models import llama_files
from spec_harness.runtimes import evidence
from spec_harness.runtimes import llama_common as lc
from spec_harness.runtimes.base import Runtime
from spec_harness.runtimes.process import ServerError, ServerProcess
from spec_harness.runtimes.server import ServerPool, ServerRuntime, ServerSetting, server_rounds
from spec_harness.runtimes.server_common import metrics_delta, spec_metrics, synthetic_rates, version_of

MAX_LIVE = 3  # servers running at once (baseline + two speculative settings)
SERVER_OVERHEAD = 512 << 20  # a server's memory beyond its model files: KV caches, compute buffers
# An EAGLE-3 head's top-10 draft candidates are chosen inside the draft graph by default, and with
# several sequences in one batch every sequence but the last gets the last one's candidate ids
# (llama.cpp as vendored by llama-cpp-python 0.3.36, common/speculative.cpp's draft-eagle3 with
# llama_set_sampler per sequence; docs/findings.md): drafting on the CPU side is the same at one
# request and right under load. HARNESS_LLAMA_SERVER_AS_SHIPPED=1 keeps llama.cpp's default.
BACKEND_SAMPLING_OFF = ["--no-spec-draft-backend-sampling"]
LOG_WAIT_S = 5.0  # the server logs a request's statistics just after answering it

ROUND_LINE = re.compile(r"accepted\s+(\d+)/\s*(\d+) draft tokens")
SLOT_ROUND_LINE = re.compile(r"id\s+(\d+) \| task (\d+) \| accepted\s+(\d+)/\s*(\d+) draft tokens")
DRAFT_STATS = re.compile(r"statistics\s+[\w-]+:.*dur\(b,g,a\) = ([\d.]+), ([\d.]+), ([\d.]+) ms")
REQUEST_DONE = re.compile(r"print_timing: .*total time")
DRAFT_SETTINGS = re.compile(r"- n_max=(\d+), n_min=(\d+), p_min=([\d.]+)")  # logged by draft-simple at start
NGRAM_SETTINGS = re.compile(r"- size_n=(\d+), size_m=(\d+), min_hits=(\d+)")  # logged by ngram-simple at start


class LlamaServerRuntime(lc.LlamaText, ServerRuntime, Runtime):
    name = "llama-server"
    reads_target_gguf = True  # --target-quant: one measurement per variant
    confidence_top_k = 10  # --spec-draft-p-min reads the draft sampler's top-1 among its top 10

    def load(self, pair: PairSpec) -> None:
        self.binary = lc.find_binary("llama-server")
        self.servers = ServerPool(MAX_LIVE)
        self.text_model = self._reference = None
        try:
            self._load(pair)
        except BaseException:
            self.close()  # a server already started goes with the failure
            raise

    def _load(self, pair: PairSpec) -> None:
        import llama_cpp

        self.pair = pair
        llama_files.quiet_logs()
        self.paths = (llama_files.check_gguf(pair.target_gguf, "target"), llama_files.check_gguf(pair.draft_gguf, "draft"))
        self.text_model = llama_files.load_model(self.paths[0], "target", vocab_only=True)
        d_model = llama_files.load_model(self.paths[1], "draft", vocab_only=True)
        try:
            self.vocab = llama_cpp.llama_model_get_vocab(self.text_model)
            self.n_vocab = llama_files.check_vocabularies(self.vocab, llama_cpp.llama_model_get_vocab(d_model))
        finally:
            llama_cpp.llama_model_free(d_model)
        self.n_ctx = self.settings.resolve_n_ctx(llama_files.n_ctx_train(self.paths[0], "target"))
        self.logs = Path(self.workdir) / "llama-server" if self.workdir else Path(tempfile.mkdtemp(prefix="llama-server-"))
        self.version = version_of([self.binary, "--version"], 30, lambda out, err: " ".join((out + err).split())[:200])
        # the baseline's server starts now, waited for at its first request (start_setting): a target
        # this server cannot load is then the runtime's skip, with the server's own reason
        self.servers.launch([ServerSetting.baseline()], self._launch)

    # -- servers -------------------------------------------------------------------------------

    def _room_for(self, n: int) -> bool:
        """n servers, each its model files and SERVER_OVERHEAD, in half the free memory."""
        each = sum(Path(p).stat().st_size for p in self.paths) + SERVER_OVERHEAD
        return n * each < free_memory() / 2

    def _argv(self, setting: ServerSetting) -> list[str]:
        s = self.settings
        t, tb = lc.n_threads(s)
        nb = str(min(lc.N_BATCH, self.n_ctx))
        ngl = "all" if lc.gpu_layers(s) < 0 else str(lc.gpu_layers(s))  # our -1 = every layer
        argv = [self.binary, "-m", self.paths[0], "-c", str(self.n_ctx), "-np", str(setting.concurrency), "-t", str(t),
                "-tb", str(tb), "-b", nb, "-ub", nb, "-fa", "off", "-ngl", ngl, "--metrics", "--no-webui",
                "--cache-ram", "0", "-lv", "4"]
        if setting.is_baseline:
            return argv
        policy, gamma, drafter = setting.policy, setting.gamma_max, setting.drafter
        if setting.forced:  # the server takes P(position i accepted), unconditional: the products of ours
            argv += ["--spec-synth-rates", ",".join(f"{r:.9g}" for r in synthetic_rates(setting.forced, gamma))]
        if isinstance(drafter, NgramSpec):
            argv += ["--spec-type", "ngram-simple"]
            if not policy.library_default:
                argv += ["--spec-ngram-simple-size-n", str(drafter.max_ngram), "--spec-ngram-simple-size-m",
                         str(drafter.k or gamma)]
            return argv
        if isinstance(drafter, Eagle3Spec):  # the head's GGUF (converted once) reads the target's layer inputs
            argv += ["-md", str(self._eagle3_gguf(drafter)), "--spec-type", "draft-eagle3"]
            if os.environ.get("HARNESS_LLAMA_SERVER_AS_SHIPPED") != "1":
                argv += BACKEND_SAMPLING_OFF
        else:
            argv += ["-md", self.paths[1], "--spec-type", "draft-simple"]
        argv += ["-td", str(t), "-tbd", str(tb), "-ngld", ngl]
        if not policy.library_default:
            p_min = policy.confidence or 0.0
            argv += ["--spec-draft-n-max", str(gamma), "--spec-draft-n-min", "0", "--spec-draft-p-min", f"{p_min:g}"]
        return argv

    @classmethod
    def library_command(cls, pair: PairSpec, drafter: Optional[DrafterSpec], gamma: Optional[int],
                        p_min: Optional[float] = None) -> Optional[str]:
        argv = ["llama-server", "-m", str(pair.target_gguf)]
        if drafter is None:
            return " ".join(argv)
        lookup = isinstance(drafter, NgramSpec)
        if lookup:
            argv += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(drafter.max_ngram),
                     "--spec-ngram-simple-size-m", str(gamma)]
        elif isinstance(drafter, Eagle3Spec):
            argv += ["-md", "HEAD.gguf", "--spec-type", "draft-eagle3", *BACKEND_SAMPLING_OFF]
        else:
            argv += ["-md", str(pair.draft_gguf), "--spec-type", "draft-simple"]
        if not lookup:
            argv += ["--spec-draft-n-max", str(gamma), "--spec-draft-n-min", "0", "--spec-draft-p-min", f"{p_min or 0:g}"]
        return " ".join(argv)

    def _launch(self, setting: ServerSetting) -> ServerProcess:
        srv = ServerProcess(self._argv(setting), self.logs / f"{self.servers.started:02d}-{setting.name}.log",
                            "llama-server", env={"LLAMA_TRACE": "1"})
        srv.info["setting"] = setting
        return srv.launch()

    def _ready(self, srv: ServerProcess) -> None:
        """Healthy, the draft settings the server logged at start, and its warm-up request."""
        try:
            srv.wait()
        except ServerError as e:
            raise ServerError(f"llama-server could not start with {Path(self.paths[0]).name}"
                              f"{'' if srv.info['setting'].is_baseline else ' + ' + Path(self.paths[1]).name}: {e}") from None
        log = srv.log_text()
        found, ngram = DRAFT_SETTINGS.search(log), NGRAM_SETTINGS.search(log)
        srv.info["draft"] = {"n_max": int(found[1]), "n_min": int(found[2]), "p_min": float(found[3])} if found else \
            {"size_n": int(ngram[1]), "n_max": int(ngram[2]), "min_hits": int(ngram[3])} if ngram else None
        self._complete(srv, self._warmup_ids(), GenerationSettings(max_new_tokens=WARMUP_TOKENS, ignore_eos=True))

    def _warmup_ids(self) -> list[int]:
        return self.encode("Hello")

    # -- requests ------------------------------------------------------------------------------

    def _body(self, ids: list[int], gen: GenerationSettings) -> dict:
        s = gen.sampling
        return {"prompt": ids, "n_predict": gen.max_new_tokens, "temperature": s.temperature, "top_k": s.top_k,
                "top_p": s.top_p, "min_p": 0.0, "typical_p": 1.0, "repeat_penalty": 1.0, "presence_penalty": 0.0,
                "frequency_penalty": 0.0, "dry_multiplier": 0.0, "xtc_probability": 0.0, "top_n_sigma": -1.0,
                "samplers": ["top_k", "top_p", "temperature"], "seed": gen.seed, "ignore_eos": gen.ignore_eos,
                "cache_prompt": False, "return_tokens": True, "stream": False, "n_probs": 0}

    def _complete(self, srv: ServerProcess, ids: list[int], gen: GenerationSettings) -> tuple[dict, float, str]:
        """One /completion -> (response, wall seconds, what the server logged for it)."""
        mark = srv.log_mark()
        t = time.perf_counter()
        resp = srv.request("/completion", self._body(ids, gen))
        wall = time.perf_counter() - t
        if not isinstance(resp, dict) or "timings" not in resp:
            raise ServerError(f"llama-server answered /completion without timings: {str(resp)[:200]}")
        done = DRAFT_STATS if "--spec-type" in srv.argv else REQUEST_DONE  # the last line it logs for a request
        deadline = time.monotonic() + LOG_WAIT_S
        log = srv.log_text(since=mark)
        while not done.search(log) and time.monotonic() < deadline:
            time.sleep(0.005)
            log = srv.log_text(since=mark)
        stats = DRAFT_STATS.findall(log)
        if stats:  # llama.cpp's drafting time, cumulative per server -> this request's share
            total = sum(float(x) for x in stats[-1])
            resp["draft_ms"], srv.info["draft_ms"] = total - srv.info.get("draft_ms", 0.0), total
        return resp, wall, log

    def generate_baseline(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        srv = self._server(ServerSetting.baseline())
        resp, wall, _ = self._complete(srv, prompt_ids, gen)
        tm = resp["timings"]
        out = [int(t) for t in resp["tokens"]]
        decode = tm["predicted_ms"] * 1e-3
        phases = Phases(wall_s=wall, prefill_s=tm["prompt_ms"] * 1e-3, draft_s=0.0, verify_s=decode, sampling_s=None,
                        unaccounted_s=wall - tm["prompt_ms"] * 1e-3 - decode)
        g = Generation(out, phases, server_rounds([], len(out)), notes=self._notes(False), extra={"timings": tm, "stop_type": resp.get("stop_type")})
        with self.generating():  # after the request, outside its wall: the server returns no logits
            g.keep_steps(evidence.step_logits(self.reference(), prompt_ids, out))
        g.notes["target_entropy"] = "recomputed one token per pass in-process by the same llama.cpp build (the server returns no logits)"
        return g

    def generate_speculative(self, prompt_ids: list[int], gen: GenerationSettings) -> Generation:
        srv = self._server(ServerSetting.of(gen))
        before = spec_metrics(srv.request("/metrics"), "llamacpp")
        resp, wall, log = self._complete(srv, prompt_ids, gen)
        after = spec_metrics(srv.request("/metrics"), "llamacpp")
        tm = resp["timings"]
        out = [int(t) for t in resp["tokens"]]
        if "draft_ms" not in resp:
            raise ServerError("llama-server logged no speculative statistics for the request (run with -lv 4?)")
        draft = resp["draft_ms"] * 1e-3
        decode, prefill = tm["predicted_ms"] * 1e-3, tm["prompt_ms"] * 1e-3
        phases = Phases(wall_s=wall, prefill_s=prefill, draft_s=draft, verify_s=decode - draft, sampling_s=None,
                        unaccounted_s=wall - prefill - decode)
        logged = [(int(a), int(n)) for a, n in ROUND_LINE.findall(log)]
        delta = metrics_delta(before, after)
        self._check_counts(logged, tm, delta)
        return Generation(out, phases, server_rounds([(n, a) for a, n in logged], len(out)), notes=self._notes(True),
                          draft_max=(srv.info["draft"] or {}).get("n_max"),
                          extra={"timings": tm, "server_metrics": delta, "stop_type": resp.get("stop_type"),
                                 "server_draft": srv.info["draft"]})

    # -- under load (--concurrency N: -np N slots, closed-loop cells; runtimes/closed_loop.py) ------------

    def load_body(self, ids: list[int], gen: GenerationSettings) -> dict:
        return {**self._body(ids, gen), "stream": True}

    @staticmethod
    def load_chunk(event: dict) -> tuple[list[int], Optional[int], Optional[dict]]:
        """A chunk's ids and tokens_predicted: a token that ends in an incomplete UTF-8 character is
        held back and its id never streamed (the next chunk's content carries its text), so counts
        come from tokens_predicted, not from the ids."""
        ids = [int(t) for t in event.get("tokens") or []]
        return ids, event.get("tokens_predicted"), event if event.get("stop") else None

    def load_counters(self, srv: ServerProcess) -> dict:
        return spec_metrics(srv.request("/metrics"), "llamacpp")

    def load_generations(self, srv, cell, gens, speculative: bool, log: str, before: dict, after: dict) -> list:
        """Each request's Generation from its final chunk (the server's timings and counts) and its
        rounds from the per-slot log lines: a slot serves one request at a time, so its tasks in
        log order are its requests in the order they started. drafted/accepted summed over the
        requests must be the /metrics counters' difference around the cell."""
        by_slot: dict[int, dict[int, list]] = {}
        for slot, task, a, n in SLOT_ROUND_LINE.findall(log):
            by_slot.setdefault(int(slot), {}).setdefault(int(task), []).append((int(n), int(a)))
        queues = {slot: list(tasks.values()) for slot, tasks in by_slot.items()}
        out = []
        ok = sorted((r for r in cell.requests if r.error is None and r.final), key=lambda r: r.start_s)
        rounds_of = {}
        for r in ok:
            q = queues.get(int(r.final.get("id_slot", -1)), [])
            rounds_of[r.index] = q.pop(0) if q and speculative else []
        delta = metrics_delta(before, after)
        if speculative and len(ok) == len(cell.requests):  # a failed request's counts are unknown
            drafted = sum(r.final["timings"].get("draft_n", 0) for r in ok)
            accepted = sum(r.final["timings"].get("draft_n_accepted", 0) for r in ok)
            if (drafted, accepted) != (delta["draft_tokens"], delta["accepted"]):
                raise ServerError(f"llama-server's per-request counts ({drafted} drafted, {accepted} accepted) disagree "
                                  f"with its /metrics counters around the cell ({delta})")
        for r, gen in zip(cell.requests, gens):
            if r.error is not None or not r.final:
                out.append(r.error or "the stream ended without a final chunk")
                continue
            tm, wall = r.final["timings"], r.end_s - r.start_s
            prefill, decode = tm["prompt_ms"] * 1e-3, tm["predicted_ms"] * 1e-3
            steps = rounds_of.get(r.index) or []
            if speculative and sum(n for n, _ in steps) != tm.get("draft_n", 0):
                steps = None  # the log and the request disagree: no rounds rather than wrong ones
            phases = Phases(wall_s=wall, prefill_s=prefill, draft_s=None if speculative else 0.0, verify_s=decode,
                            sampling_s=None, unaccounted_s=wall - prefill - decode)
            notes = self._notes(speculative) | {"target_entropy": "not recomputed under load",
                                                "unaccounted_s": "the client's wall minus the server's prompt and decode time"}
            if speculative:
                notes["draft_s"] = "under load llama.cpp's drafting counter is the server's, not one request's"
                notes["verify_s"] = "predicted_ms: the whole decode (drafting, verify passes, sampling, the server loop)"
            rounds = server_rounds(steps, r.n_tokens) if steps is not None else []
            if len(r.tokens) != r.n_tokens:
                notes["token_ids"] = (f"{r.n_tokens - len(r.tokens)} of {r.n_tokens} ids held back by the server's stream "
                                      "(incomplete UTF-8): token_ids is what it streamed")
            out.append(Generation(r.tokens, phases, rounds, notes=notes, n_tokens=r.n_tokens,
                                  draft_max=(srv.info.get("draft") or {}).get("n_max") if speculative else None,
                                  extra={"timings": tm, "id_slot": r.final.get("id_slot"), "server_metrics_cell": delta}))
        return out

    @staticmethod
    def _check_counts(logged: list[tuple[int, int]], tm: dict, delta: dict) -> None:
        """The per-round log lines must add up to the server's own totals (else this build logs differently)."""
        drafted, accepted = sum(n for _, n in logged), sum(a for a, _ in logged)
        if (drafted, accepted) != (tm.get("draft_n", 0), tm.get("draft_n_accepted", 0)) or len(logged) != delta["drafts"]:
            raise ServerError(f"llama-server's per-round log ({len(logged)} rounds, {drafted} drafted, {accepted} accepted) "
                              f"disagrees with its totals (draft_n {tm.get('draft_n')}, accepted {tm.get('draft_n_accepted')}, "
                              f"{delta['drafts']} drafts in /metrics)")

    def _notes(self, speculative: bool) -> dict:
        notes = {"sampling_s": "inside llama-server's decode time (verify_s)",
                 "rounds": "counts from the server's per-round log; it reports no per-round times",
                 "unaccounted_s": "wall minus the server's prompt_ms and predicted_ms: HTTP, JSON, its queue"}
        if speculative:
            notes["draft_s"] = "llama.cpp's drafting counter (speculative statistics dur(b,g,a))"
            notes["verify_s"] = ("predicted_ms minus draft_s: target verify passes, sampling, the draft's re-evaluation "
                                 "of each verify batch, the server loop")
        else:
            notes["verify_s"] = "predicted_ms: the target's decode steps, sampling and the server loop"
        return notes

    def verify_rule(self, gen) -> Optional[str]:
        return "greedy-match" if gen.sampling.greedy else "sample-match"

    def _eagle3_gguf(self, drafter: DrafterSpec) -> Path:
        """The EAGLE-3 head's GGUF through llama.cpp's own converter (models/eagle3.py's gguf_of,
        cached), checked against the target first; ValueError with the converter's reason."""
        from spec_harness.models.eagle3 import gguf_of
        from spec_harness.models.loading import model_folder
        from spec_harness.runtimes.eagle3 import checked_folder, head_folder

        folder = head_folder(drafter, self.pair)
        made = self.__dict__.setdefault("_eagle3", {})
        if folder not in made:
            target_folder = model_folder(self.pair.target, "target")
            made[folder] = gguf_of(checked_folder(drafter, self.pair, target_folder), target_folder, target_gguf=self.paths[0])
        return made[folder]

    drafters = (DraftModelSpec, NgramSpec, Eagle3Spec)  # draft-simple, ngram-simple, draft-eagle3
    policies = ("fixed", "confidence", LIBRARY_DEFAULT)  # n-max, p-min, nothing set; no schedule
    forces = True  # --spec-synth-rates

    def supports(self, gen: GenerationSettings) -> Optional[str]:
        why = super().supports(gen)
        if why:
            return why
        if isinstance(gen.drafter, Eagle3Spec):
            if gen.draft_policy.library_default:
                return f"--draft-policy {gen.draft_policy} with an EAGLE-3 head: llama-server takes n-max and p-min (fixed, confidence:P)"
            try:
                self._eagle3_gguf(gen.drafter)
            except ValueError as e:
                return str(e)
        if gen.forced and gen.draft_policy.library_default:
            return "forced acceptance needs the server's number of draft positions: use a fixed gamma"
        return None  # fixed, confidence:P and library-default; the draft model or ngram-simple

    # -- the rest of the interface -------------------------------------------------------------

    def describe(self) -> dict:
        fixes = [] if os.environ.get("HARNESS_LLAMA_SERVER_AS_SHIPPED") == "1" else \
            ["EAGLE-3 drafts choose their candidates on the CPU (--no-spec-draft-backend-sampling, docs/findings.md)"]
        return {**lc.describe(self.settings, self.paths, self.n_ctx), "binary": self.binary, "library_fixes": fixes,
                "server_version": self.version, "logs": str(self.logs), "server_starts": dict(self.servers.starts)}

    def reference(self):
        """A context of our own (runtimes/llamacpp.py's LlamaKV) on the same target file, loaded by the
        same libraries the server runs (scripts/setup.sh builds them once), for the mismatch evidence."""
        from spec_harness.runtimes.llamacpp import LlamaKV

        if self._reference is None:
            self._ref_model = llama_files.load_model(self.paths[0], "target", lc.gpu_layers(self.settings))
            self._reference = LlamaKV(self._ref_model, lc.context_params(self.settings, self.n_ctx), self.n_vocab)
        return self._reference

    def generating(self):
        return lc.single_threaded_torch()

    def close(self) -> None:
        if getattr(self, "servers", None) is not None:
            self.servers.close()
        import llama_cpp

        if getattr(self, "_reference", None) is not None:
            self._reference.close()
            llama_cpp.llama_model_free(self._ref_model)
            self._reference = None
        if getattr(self, "text_model", None) is not None:
            llama_cpp.llama_model_free(self.text_model)
            self.text_model = None
