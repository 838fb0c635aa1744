"""`harness bench`'s sampling figure: 12 (our sampler's share of a sampled speculative run, and the
sampled speedup beside the greedy one); harness/bench.py says what it measures. Also the sampler's
micro-benchmark (`micro_ms`; `python -m harness.bench_sampling` prints it): the sampler as it was
(a full sort of each row, torch.multinomial over the vocabulary) against core/sampling.py's."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from spec_harness.core import metrics, sampling
from spec_harness.core.config import GenerationSettings, PairSpec, SamplingParams
from spec_harness.harness.bench_common import Figure

SAMPLED = SamplingParams(temperature=0.7, top_p=0.9)  # figure 12's sampled setting (the issue's)
SAMPLING_GOAL = 0.10  # figure 12: the sampler's share of the speculative wall at SAMPLED, at most
SPEEDUP_GOAL = 0.10  # figure 12: the sampled speedup within this of the greedy one (per tau)
MICRO_VOCAB = 49152  # SmolLM2's vocabulary
MICRO_SHAPES = (1.0, 2.0)  # Zipf exponents of the micro-benchmark's rows (before temperature)


def probs_before(logits: torch.Tensor, s: SamplingParams) -> torch.Tensor:
    """core.sampling.probs_from_logits as it was before its fast path (not greedy; its top-k step is
    core.sampling's, unchanged since): the micro-benchmark times it, tests/test_sampling_fast.py
    checks the reference against it."""
    logits = sampling.top_k_masked(logits.float() / s.temperature, s.top_k)
    if s.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # [N, V]
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = (cum - sorted_logits.softmax(-1)) >= s.top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits.softmax(-1)


def zipf_logits(n: int, vocab: int, exponent: float, seed: int = 0) -> torch.Tensor:
    """[n, vocab] logits shaped like an LM's: -exponent * log(rank) plus N(0, 0.5) noise, in a
    random order of ids (at temperature 0.7 and top-p 0.9, exponent 2 keeps a few tokens, 1 about
    a hundred: past the first 64 candidates, so the fast path widens)."""
    g = torch.Generator().manual_seed(seed)
    ranks = torch.arange(1, vocab + 1, dtype=torch.float32)
    rows = [(-exponent * ranks.log() + torch.randn(vocab, generator=g) * 0.5)[torch.randperm(vocab, generator=g)]
            for _ in range(n)]
    return torch.stack(rows)


def _per_call_ms(fns: dict[str, Callable[[], object]], calls: int) -> dict[str, float]:
    """Each fn once (warm-up), then A B A B .. `calls` times -> median ms per call."""
    for f in fns.values():
        f()
    got: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(calls):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            got[k].append(time.perf_counter() - t)
    return {k: round(statistics.median(v) * 1e3, 4) for k, v in got.items()}


def micro_ms(vocab: int = MICRO_VOCAB, calls: int = 20, s: SamplingParams = SAMPLED, threads: int = 1) -> dict:
    """Per-call milliseconds of the sampler as it was and as it is, on one torch thread (the
    llamacpp runtime's; the torch runtime samples on its own threads), alternated: the
    distribution of [1, V] rows of each Zipf shape and of a verify pass's [5, V] (both shapes),
    and one draft position (distribution and token)."""
    from spec_harness.core.limits import torch_threads

    out: dict = {"vocab": vocab, "threads": threads, "setting": f"temperature {s.temperature}, top-p {s.top_p}"}
    g = torch.Generator().manual_seed(0)
    with torch_threads(threads), torch.inference_mode():
        batch = torch.cat([zipf_logits(3, vocab, MICRO_SHAPES[0], 1), zipf_logits(2, vocab, MICRO_SHAPES[1], 2)])
        cases = {f"probs [1, V] zipf {e}": zipf_logits(1, vocab, e, 3) for e in MICRO_SHAPES}
        cases["probs [5, V] mixed"] = batch
        for name, x in cases.items():
            out[name] = _per_call_ms({"before": lambda: probs_before(x, s), "now": lambda: sampling.probs_from_logits(x, s)},
                                     calls)
            out[name]["nucleus"] = (sampling.probs_from_logits(x, s) > 0).sum(-1).tolist()
        row = cases[f"probs [1, V] zipf {MICRO_SHAPES[-1]}"]
        out["draft token [1, V]"] = _per_call_ms({
            "before": lambda: int(torch.multinomial(probs_before(row, s), 1, generator=g)[0]),
            "now": lambda: sampling.draft_token(row, s, g)}, calls)
    for v in out.values():
        if isinstance(v, dict) and v.get("now"):
            v["x"] = round(v["before"] / v["now"], 1)
    return out


class SamplingFigures:
    """The sampler's figure (a mixin of harness/bench.py's Bench)."""

    def fig12_sampling_share(self, pair: PairSpec, names=("torch", "llamacpp")) -> Figure:
        """Per runtime, the default prompts greedy and at SAMPLED alternated (greedy, sampled,
        greedy, ..., each setting's repeat every prompt's baseline and speculative run, seed = the
        repeat): the speculative run's sampling share of wall at SAMPLED, each setting's speedup
        (pooled over the prompts, the median over repeats), alpha_hat and tau, and sampled / greedy
        speedup, raw and per tau (tau = tokens per round: the speedup is tau x a baseline step over
        a round, so per tau compares what a round costs, whatever the acceptance)."""
        from spec_harness.harness.bench_common import alternate_samples
        from spec_harness.harness.prompts import DEFAULT_PROMPTS, load_prompts

        prompts = load_prompts(DEFAULT_PROMPTS)
        settings = {"greedy": SamplingParams(), "sampled": SAMPLED}
        detail: dict = {"pair": pair.name, "gamma": self.gamma, "tokens": self.tokens, "prompts": len(prompts),
                        "sampled": f"temperature {SAMPLED.temperature}, top-p {SAMPLED.top_p}"}
        for name in names:
            rt = self.runtime_for(name, pair)
            if rt is None:
                continue
            try:
                ids = [rt.encode(p.text) for p in prompts]
                runs: dict[str, list] = {k: [] for k in settings}
                reps = {k: 0 for k in settings}

                def one(key: str) -> float:
                    gen = GenerationSettings(settings[key], gamma=self.gamma, max_new_tokens=self.tokens, seed=reps[key],
                                             ignore_eos=True)
                    reps[key] += 1
                    runs[key].append([(rt.generate_baseline(x, gen), rt.generate_speculative(x, gen)) for x in ids])
                    return 0.0

                alternate_samples({k: (lambda k=k: one(k)) for k in settings}, self.repeats)
                detail[name] = d = {k: setting_summary(v[1:]) for k, v in runs.items()}  # v[0]: the warm-up
            finally:
                rt.close()
            g, s = d["greedy"], d["sampled"]
            d["sampled_over_greedy"] = s["speedup"] / g["speedup"] if g["speedup"] and s["speedup"] else None
            d["sampled_over_greedy_per_tau"] = (s["speedup"] / s["tau"]) / (g["speedup"] / g["tau"]) \
                if d["sampled_over_greedy"] and s["tau"] and g["tau"] else None
        detail["sampler_ms"] = micro_ms(calls=max(5, 4 * self.repeats))
        shares = [detail[n]["sampled"]["sampling_share"] for n in names if n in detail
                  and detail[n]["sampled"]["sampling_share"] is not None]
        return Figure(12, f"sampling share of the speculative wall at temperature {SAMPLED.temperature}, top-p "
                          f"{SAMPLED.top_p} (largest of {', '.join(names)}), pair {pair.name}", max(shares, default=None),
                      f"<= {SAMPLING_GOAL:.2f}; sampled speedup within {SPEEDUP_GOAL:.0%} of greedy's at the same "
                      "alpha_hat (sampled_over_greedy_per_tau)", detail)


def setting_summary(reps: list[list]) -> dict:
    """One setting's repeats, each [(baseline, speculative) Generation per prompt] -> the medians
    over repeats of the pooled speedup and of the sampling shares of wall; alpha_hat and tau over
    every speculative round."""
    med = statistics.median

    def share(gs) -> float | None:
        if any(g.phases.sampling_s is None for g in gs):
            return None
        return sum(g.phases.sampling_s for g in gs) / sum(g.phases.wall_s for g in gs)

    def speedup(pairs) -> float | None:
        return metrics.speedup(sum(b.phases.wall_s for b, _ in pairs), sum(len(b.token_ids) for b, _ in pairs),
                               sum(s.phases.wall_s for _, s in pairs), sum(len(s.token_ids) for _, s in pairs))

    spec_shares = [share([s for _, s in pairs]) for pairs in reps]
    base_shares = [share([b for b, _ in pairs]) for pairs in reps]
    speedups = [speedup(pairs) for pairs in reps]
    rounds = [r.to_dict() for pairs in reps for _, s in pairs for r in s.rounds]
    return {"speedup": med(speedups) if speedups and None not in speedups else None,
            "sampling_share": med(spec_shares) if spec_shares and None not in spec_shares else None,
            "baseline_sampling_share": med(base_shares) if base_shares and None not in base_shares else None,
            "alpha_hat": metrics.alpha_hat(rounds), "tau": metrics.mean_accepted_len(rounds)}


if __name__ == "__main__":
    import json
    import platform

    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
               platform.processor()) if platform.system() == "Linux" else platform.processor()
    print(f"CPU: {cpu}; torch {torch.__version__}")
    print(json.dumps(micro_ms(), indent=1))
