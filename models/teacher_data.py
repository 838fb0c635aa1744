"""Teacher data for distillation: the target generates answers to chat prompts, and we keep its
top-k log-probabilities at every generated position (JSONL, one sequence a line).

Uses transformers (the GGUF dequantized to float32) with batched sampling. (llama-cpp-python would be
faster, but when this was written the shared wheel was an AVX-512 build that died with SIGILL on
this AVX2 CPU.) It does not train anything (models/distill.py does) and does not call the network. The prompts are
built from templates and topic lists written for this project; they resemble the harness's
built-in categories but are not the same prompts (the measurement prompts are never trained on).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Iterator

import numpy as np

TOPICS = [
    "the water cycle", "volcanoes", "the immune system", "black holes", "the printing press",
    "plate tectonics", "the French Revolution", "electric motors", "the human brain", "coral reefs",
    "the Roman Empire", "solar panels", "DNA replication", "earthquakes", "the stock market",
    "bees and pollination", "the internet", "antibiotics", "glaciers", "the moon landing",
    "nuclear fission", "rainforests", "the digestive system", "jet engines", "inflation",
    "the Renaissance", "batteries", "climate change", "the periodic table", "bridges",
    "the telephone", "tides", "the Great Wall of China", "vitamins", "wind turbines",
    "the nervous system", "democracy", "compilers", "bread baking", "the Silk Road",
    "hurricanes", "the heart", "recycling", "GPS satellites", "the cold war", "deserts",
    "lightning", "the ancient Egyptians", "microscopes", "the Olympic games", "sleep",
    "composting", "the speed of light", "cells and mitosis", "the Amazon river", "vaccines",
]
FACTUAL = [
    "Summarize the key facts about {t} in a short list.",
    "Explain how {t} works, step by step.",
    "Give a structured overview of {t}, with its main parts and what each does.",
    "Describe the causes and effects of {t} in a few key points.",
    "Write a short encyclopedia-style paragraph about {t}.",
    "What are the most important things a student should know about {t}?",
]
OPEN = [
    "What do you think is the most interesting thing about {t}? Explain your view.",
    "Write a short story that involves {t}.",
    "Write a short blog post about why {t} matters.",
]
CODE = [
    "Write a Python function that {c}. Include a docstring.",
    "Write a Python function that {c}, and explain how it works.",
    "Show a short Python example that {c}.",
]
CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "counts the words in a text",
    "merges two sorted lists", "computes the factorial of n", "removes duplicates from a list",
    "finds the largest element in a list", "reads a CSV file and prints each row",
    "returns the n-th Fibonacci number", "checks whether a string is a palindrome",
    "sorts a list of dictionaries by a key", "converts Celsius to Fahrenheit",
    "computes the average of a list of numbers", "flattens a nested list", "counts vowels in a string",
]
REWRITE = [
    "Rewrite this sentence in a formal tone: {s}",
    "Translate this sentence into French: {s}",
    "Paraphrase the following sentence: {s}",
    "Make this sentence shorter and clearer: {s}",
]
SENTENCES = [
    "hey, the meeting got moved to friday cause the boss is away.",
    "The cat sat on the warm windowsill and watched the birds all afternoon.",
    "We need to buy more milk, eggs and bread before the weekend.",
    "Our team finished the project two days early and under budget.",
    "the train was late again so i missed the start of the movie",
    "Please remember to turn off the lights when you leave the office.",
]
MATH = [
    "What is {a} times {b}? Show your work.",
    "A shop sells pencils at {a} cents each. How much do {b} pencils cost? Explain step by step.",
    "If a train travels {a} km in {b} hours, what is its average speed?",
    "Solve for x: {a}x + {b} = {c}. Show each step.",
    "What is {a} plus {b}, and is the result even or odd?",
]


def make_prompts(n: int, seed: int = 0) -> list[str]:
    """n chat prompts mixed over categories (about half factual, like the default measurement)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.5:
            out.append(rng.choice(FACTUAL).format(t=rng.choice(TOPICS)))
        elif r < 0.65:
            out.append(rng.choice(CODE).format(c=rng.choice(CODE_TASKS)))
        elif r < 0.75:
            out.append(rng.choice(REWRITE).format(s=rng.choice(SENTENCES)))
        elif r < 0.85:
            a, b = rng.randint(2, 99), rng.randint(2, 40)
            out.append(rng.choice(MATH).format(a=a, b=b, c=a * rng.randint(1, 9) + b))
        else:
            out.append(rng.choice(OPEN).format(t=rng.choice(TOPICS)))
    return out


def generate_sequences(gguf: str, prompts: list[list[int]], max_new: int, k: int, temperature: float,
                       seed: int, batch: int = 8, threads: int = 1) -> Iterator[dict]:
    """Yields {ids, start, top_ids, top_lp}: ids = prompt + generated; top_*[j] is the teacher's
    temperature-1 top-k for predicting ids[start + j]. Batched transformers generate (left padding)."""
    import torch

    from models.loading import load_hf_model, load_hf_tokenizer

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    model = load_hf_model(gguf, "target", torch.float32, "cpu")
    tok = load_hf_tokenizer(gguf, "target")
    pad = tok.pad_token_id if tok.pad_token_id is not None else 2
    stops = {tok.eos_token_id, 1, 2}  # <|im_start|>, <|im_end|> in SmolLM2's vocabulary
    for i in range(0, len(prompts), batch):
        group = prompts[i : i + batch]
        width = max(len(p) for p in group)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in group])  # [B, width]
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in group])
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=temperature > 0,
                                 temperature=temperature or None, top_k=0, top_p=1.0, max_new_tokens=max_new,
                                 return_dict_in_generate=True, output_logits=True, pad_token_id=pad)
        logits = torch.stack(out.logits, 1).float()  # [B, new, V]
        lp = torch.log_softmax(logits, -1)
        top_lp, top_ids = lp.topk(k, -1)  # [B, new, k]
        gen = out.sequences[:, width:]  # [B, new]
        for b, p in enumerate(group):
            n = 0
            for t in gen[b].tolist():
                n += 1
                if t in stops:
                    break
            yield {"ids": p + gen[b, :n].tolist(), "start": len(p),
                   "top_ids": top_ids[b, :n].tolist(),
                   "top_lp": [[round(x, 4) for x in row] for row in top_lp[b, :n].tolist()]}


def main() -> None:
    import argparse

    from models.loading import encode_prompt, load_hf_tokenizer
    from tqdm import tqdm

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--max-new", type=int, default=192)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    if a.gguf is None:
        from models.smollm2 import smollm2_gguf

        a.gguf = str(smollm2_gguf())
    tok = load_hf_tokenizer(a.gguf, "target")
    prompts = [encode_prompt(tok, p) for p in make_prompts(a.n, a.seed)]
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        for rec in tqdm(generate_sequences(a.gguf, prompts, a.max_new, a.k, a.temperature, a.seed, a.batch, a.threads),
                        total=len(prompts), desc="teacher"):
            f.write(json.dumps(rec) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
