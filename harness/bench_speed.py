"""`harness bench`'s speed figures: 1 (torch against Hugging Face generate), 3 (our llamacpp loop
against llama-bench and llama-cpp-python's own paths), 5 (the instrumentation's overhead), 9 (each
runtime's step against the memory bound); harness/bench.py says what each measures."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from typing import Callable

from spec_harness import runtimes
from spec_harness.core import timing
from spec_harness.core.config import RuntimeSettings
from spec_harness.core.errors import HarnessError, RuntimeUnavailable
from spec_harness.harness.bench_common import (
    CONTEXT_GOAL,
    CONTEXTS,
    ROOFLINE_GOAL,
    ROOFLINE_LEAVES_OUT,
    Figure,
    alternate,
    alternate_samples,
)


class SpeedFigures:
    """Figures of one model's decoding speed (a mixin of harness/bench.py's Bench)."""

    def fig1_torch_vs_hf(self) -> Figure:
        import torch

        from spec_harness.runtimes.loop import Loop
        from spec_harness.runtimes.pytorch import TorchKV

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
        eager = Loop(TorchKV(model, rt.target.vocab, sync=rt.target.sync, kernels=False), None, rt.is_eos)
        med = alternate({"torch": e2e(Loop(rt.target, None, rt.is_eos)), "torch_eager_step": e2e(eager),
                         "torch_transformers_forward": e2e(hf_fwd), "hf_generate": hf_generate}, self.repeats)
        med.update(lean_path=rt.target.lean is not None, forward=rt.target.describe(), threads=torch.get_num_threads(),
                   tokens=n, eager_step_over_hf=med["torch_eager_step"] / med["hf_generate"])
        return Figure(1, "torch baseline / HF generate (tokens/s, end to end)", med["torch"] / med["hf_generate"],
                      ">= 1.2", med)

    def fig14_context_growth(self) -> Figure:
        """torch's one-token step and its verify pass (gamma + 1 tokens) at each cache length of
        CONTEXTS against the shortest, over what they read (the weights and the KV cache up to
        there): measured growth / the bytes' growth, the largest over lengths and both passes. One
        prefill of the longest; each length is that cache's length set to it, taken in turn (A B C
        ...): the rows beyond stay as the prefill wrote them, and each timed pass rewrites its own
        rows with the same tokens, so the cache always holds the prefill's text up to the longest."""
        import torch

        from spec_harness.runtimes.loop import feed_prompt

        rt = self.runtime("torch")
        if rt is None or rt.target.lean is None:
            return Figure(14, "torch step growth with context / bytes read", None, f"<= {CONTEXT_GOAL}",
                          note="torch unavailable" if rt is None else f"no lean forward: {rt.target.describe()}")
        kv, sizes, top = rt.target, rt.describe()["model_sizes"]["target"], max(CONTEXTS)
        prompt = self._ids(rt)
        ids = (prompt * (top // len(prompt) + 2))[: top + self.gamma + 1]  # real tokens, repeated
        with torch.inference_mode():
            feed_prompt(kv, ids[: top + 1])  # the cache holds ids[:top]

        def timed(length: int, n: int) -> Callable[[], float]:
            def f() -> float:  # the median of five calls after the cache cropped to `length`
                times = []
                with torch.inference_mode():
                    for _ in range(5):
                        kv.lean.length = length  # not crop(): a longer length than the last must be reached too
                        t = time.perf_counter()
                        kv.forward(ids[length:length + n], n)
                        times.append(time.perf_counter() - t)
                return statistics.median(times)
            return f

        passes = {"step": 1, "verify": self.gamma + 1}
        got = alternate({f"{p} {n}": timed(n, k) for n in CONTEXTS for p, k in passes.items()}, self.repeats)
        detail, worst = {}, 0.0
        for p, k in passes.items():
            nbytes = {n: sizes["weight_bytes"] + sizes["kv_bytes_per_position"] * (n + k) for n in CONTEXTS}
            first = CONTEXTS[0]
            for n in CONTEXTS[1:]:
                growth, predicted = got[f"{p} {n}"] / got[f"{p} {first}"], nbytes[n] / nbytes[first]
                detail[f"{p} {n}"] = {"ms": 1000 * got[f"{p} {n}"], "growth": growth, "bytes_growth": predicted,
                                      "over_bytes": growth / predicted}
                worst = max(worst, growth / predicted)
            detail[f"{p} {first}"] = {"ms": 1000 * got[f"{p} {first}"]}
        detail.update(forward=rt.target.describe(), threads=torch.get_num_threads())
        return Figure(14, "torch step growth with context / bytes read (worst of step and verify)", worst,
                      f"<= {CONTEXT_GOAL}", detail)

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

    def fig9_memory_bound(self, names=None) -> Figure:
        """Each runtime's baseline one-token step as a fraction of this machine's memory bound, the
        read bandwidth measured between the steps (A B C read A B C read ...): each repeat's
        fraction is its step against the bandwidth of the same repeat, the figure their median.
        `torch (eager step)` is the same weights with the one-token step eager, not the step kernel."""
        from spec_harness.core.limits import read_gb_s, threads_of, torch_threads
        from spec_harness.reports.roofline import step_bound
        from spec_harness.runtimes.loop import Loop
        from spec_harness.runtimes.pytorch import TorchKV

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
                eager = Loop(TorchKV(rt.target.model, rt.target.vocab, sync=rt.target.sync, kernels=False), None, rt.is_eos)
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


def matrices_ms(weights, tokens: list[int], repeats: int) -> dict:
    """Every matrix of a torch lean forward (runtimes/torch_llama.Weights) times an [S, in] input,
    for each S in `tokens`: through the packed kernel the runtime uses, oneDNN's prepacked matmul
    (what it used before) and F.linear (MKL), alternated; ms per pass over all matrices, medians,
    and the largest difference between their products."""
    import torch

    from spec_harness.runtimes.torch_llama import Linear

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


def baseline_step_s(g) -> float:
    """A baseline Generation's one-token step: the median of its rounds' verify_s where its rounds
    are timed, else its decode seconds per token."""
    times = [r.verify_s for r in g.rounds if r.drafted == 0 and r.verify_s is not None]
    if times:
        return statistics.median(times)
    return (g.phases.wall_s - (g.phases.prefill_s or 0.0)) / len(g.token_ids)


def llama_bench_tg(model: str, depth: int, n: int, settings: RuntimeSettings) -> Callable[[], float]:
    """`llama-bench` text generation of n tokens at depth `depth` (the prompt's length), one
    repetition per call, with our llamacpp runtime's threads, batch size and attention: tokens/s."""
    from spec_harness.runtimes import llama_common as lc

    binary = lc.find_binary("llama-bench")
    t, _ = lc.n_threads(settings)
    argv = [binary, "-m", model, "-p", "0", "-n", str(n), "-d", str(depth), "-t", str(t), "-r", "1", "-fa", "0",
            "-ngl", str(lc.gpu_layers(settings)), "-b", str(lc.N_BATCH), "-ub", str(lc.N_BATCH), "-o", "json"]

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

    from spec_harness.models import llama_files
    from spec_harness.runtimes import llama_common as lc

    t, tb = lc.n_threads(settings)  # the threads our llamacpp runtime uses, so only the loop differs
    llm = llama_cpp.Llama(model_path=model, n_ctx=max(512, len(ids) + n + 8), n_threads=t, n_threads_batch=tb,
                          n_gpu_layers=lc.gpu_layers(settings), verbose=llama_files.verbose())
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
