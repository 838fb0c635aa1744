"""Teacher data for distillation: the target generates answers to chat prompts, and we keep its
top-k log-probabilities at every generated position (JSONL, one sequence a line).

Generation runs in llama.cpp on the target's GGUF, several sequences per decode call (one KV cache,
one sequence id per answer), so the target's own text costs little more than one answer at a time.
It does not train anything (models/distill.py does) and does not call the network. The prompts are
the template sets of models/teacher_prompts.py, or requests the target writes itself (`self`, here).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Iterator

import numpy as np

from spec_harness.models.teacher_prompts import TEMPLATE_SETS, make_prompts

MAX_NEW = 96  # tokens per answer at most
TOP_K = 32  # teacher log-probs kept per generated position
TEMPERATURE = 0.8  # the target's sampling temperature while it answers
BATCH = 16  # answers generated together (one sequence id each in one llama.cpp context)
ANSWERS = 400  # answers `harness models teacher-data` writes unless told
SEED = 0  # the seed of the prompts and of the answers' sampling
THREADS = 0  # llama.cpp threads; 0: one per physical core

# `--prompts self`: requests the target writes itself (Magpie, Xu et al. 2024): the chat template
# up to the user's turn, sampled at SELF_TEMPERATURE until the turn ends, kept when the turn ended
# within SELF_MAX_TOKENS tokens, is mostly plain text, and names none of the factual measurement
# prompts' subjects (MEASURED_SUBJECTS); then the target answers each as it answers any request.
# The requests follow the chat data the target was tuned on, so they span far more subjects and
# kinds of request than the template sets, none of them written by us. Most begin with one of
# SELF_OPENERS (the target writes the rest: the subject is its own choice), the others freely.
SELF_OPENERS = ("", "", "Explain how", "Summarize", "Describe", "Give a structured overview of",
                "What are the main", "How does", "Explain the", "List the key")
SELF_TEMPERATURE = 1.0
SELF_MAX_TOKENS = 64
MEASURED_SUBJECTS = ("photosynth", "refrigerat", "circulatory", "industrial revolution", "vaccin")

PROMPT_SETS = (*TEMPLATE_SETS, "self")  # every --prompts


def usable_request(text: str) -> bool:
    """A request the target wrote that `--prompts self` keeps: some words, mostly plain text, and
    none of the measurement prompts' subjects."""
    words = text.split()
    plain = sum(c.isascii() and (c.isprintable() or c.isspace()) for c in text) / max(len(text), 1)
    return len(words) >= 3 and plain >= 0.95 and not any(s in text.lower() for s in MEASURED_SUBJECTS)


def self_requests(gguf: str, n: int, seed: int, batch: int = BATCH, threads: int = 0, progress: bool = False) -> list[str]:
    """n requests the target writes itself (`--prompts self`, above), the same for the same seed:
    rounds of samples from the chat template's user turn, each round seeded from `seed` and its index."""
    import llama_cpp
    from tqdm import tqdm

    from spec_harness.models import llama_files

    model = llama_files.load_model(llama_files.check_gguf(gguf, "target"), "target", vocab_only=True)
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        ends = {i for i in range(llama_cpp.llama_vocab_n_tokens(vocab)) if llama_cpp.llama_vocab_is_eog(vocab, i)}
        turn = user_turn(model, vocab)
        out: list[str] = []
        bar = tqdm(total=n, desc="requests the target writes", disable=not progress)
        for r in range(1000):
            if len(out) >= n:
                break
            rng = random.Random(seed * 1000 + r)
            openers = [rng.choice(SELF_OPENERS) for _ in range(max(batch, (n - len(out)) * 3 // 2))]  # ~2 in 3 kept
            asks = [turn + (llama_files.tokenize(vocab, o, False, False) if o else []) for o in openers]
            for rec in generate_sequences(gguf, asks, SELF_MAX_TOKENS, 1, SELF_TEMPERATURE, seed * 1000 + r, batch, threads):
                said = rec["ids"][len(turn):]
                if said and said[-1] in ends:
                    text = llama_files.detokenize(vocab, said[:-1]).strip()
                    if usable_request(text):
                        out.append(text)
                        bar.update(1)
        bar.close()
        if len(out) < n:
            from spec_harness.core.errors import HarnessError

            raise HarnessError(f"--prompts self: the target wrote {len(out)} usable requests, not {n}")
        return out[:n]
    finally:
        llama_cpp.llama_model_free(model)


def user_turn(model, vocab) -> list[int]:
    """The chat template's ids up to where the user's words begin (system prompt and all): the
    common beginning of two one-letter requests."""
    from spec_harness.models import llama_files

    a, b = llama_files.encode_prompt(model, vocab, "A"), llama_files.encode_prompt(model, vocab, "B")
    n = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    return a[:n]


def _kept_self_requests(gguf: str, out: Path, n: int, seed: int, batch: int, threads: int, progress: bool) -> list[str]:
    """self_requests, kept beside the answers (OUT.requests.json) so that a resumed run does not
    have the target write them again (about a fifth of the set's time)."""
    kept = out.with_name(out.name + ".requests.json")
    key = {"gguf": str(gguf), "n": n, "seed": seed, "batch": batch, "threads": threads}
    if kept.exists():
        got = json.loads(kept.read_text())
        if got.get("key") == key:
            return got["requests"]
    requests = self_requests(gguf, n, seed, batch, threads, progress)
    kept.write_text(json.dumps({"key": key, "requests": requests}))
    return requests


def top_logprobs(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """logits [N, V] -> (ids [N, k], temperature-1 log-probs [N, k]), best first."""
    z = logits - logits.max(-1, keepdims=True)
    lse = np.log(np.exp(z).sum(-1, keepdims=True))  # [N, 1]
    top = np.argpartition(-z, k, -1)[:, :k]  # [N, k] unordered
    order = np.argsort(-np.take_along_axis(z, top, -1), -1)
    top = np.take_along_axis(top, order, -1)
    return top, np.take_along_axis(z, top, -1) - lse


def generate_sequences(gguf: str, prompts: list, max_new: int, k: int, temperature: float,
                       seed: int, batch: int = BATCH, threads: int = 0) -> Iterator[dict]:
    """Yields {ids, start, top_ids, top_lp} per prompt, in order: ids = prompt + generated; top_*[j] is
    the teacher's temperature-1 top-k for predicting ids[start + j]. A prompt is token ids, or text
    that goes through the GGUF's chat template. `batch` answers share each llama_decode call
    (sequence ids 0..batch-1 of one context)."""
    import llama_cpp

    from spec_harness.models import llama_files

    model = llama_files.load_model(llama_files.check_gguf(gguf, "target"), "target")
    dec = None
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        prompts = [llama_files.encode_prompt(model, vocab, p) if isinstance(p, str) else list(p) for p in prompts]
        stops = {i for i in range(llama_cpp.llama_vocab_n_tokens(vocab)) if llama_cpp.llama_vocab_is_eog(vocab, i)}
        dec = BatchDecoder(model, batch, max(len(p) for p in prompts) + max_new + 1, max(batch, max(len(p) for p in prompts)),
                           threads)
        rng = np.random.default_rng(seed)
        for g in range(0, len(prompts), batch):
            yield from answer_group(dec, prompts[g : g + batch], max_new, k, temperature, stops, rng)
    finally:
        if dec is not None:
            dec.close()
        llama_cpp.llama_model_free(model)


class BatchDecoder:
    """A llama.cpp context of `seqs` sequences of up to `longest` tokens each (one KV cache) and one
    batch of `n_batch` tokens: decode tokens into sequences, read the logits rows they asked for."""

    def __init__(self, model, seqs: int, longest: int, n_batch: int, threads: int):
        import llama_cpp

        from spec_harness.core.errors import HarnessError
        from spec_harness.core.limits import threads_of

        cp = llama_cpp.llama_context_default_params()
        cp.n_seq_max = seqs
        cp.n_ctx = seqs * longest
        cp.kv_unified = True
        cp.n_batch = cp.n_ubatch = n_batch
        cp.n_threads = cp.n_threads_batch = threads_of(threads or None)
        self.ctx = llama_cpp.llama_init_from_model(model, cp)
        if not self.ctx:
            raise HarnessError(f"llama.cpp could not create a context of {cp.n_ctx} tokens: lower the batch or --max-new-tokens")
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
        self.batch = llama_cpp.llama_batch_init(cp.n_batch, 0, 1)

    def clear(self) -> None:
        """Empty every sequence of the KV cache."""
        import llama_cpp

        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)

    def decode(self, toks: list[int], pos: list[int], seqs: list[int], want: list[bool]) -> None:
        """Token i at position pos[i] of sequence seqs[i]; its logits kept where want[i]."""
        import llama_cpp

        lb = self.batch
        for i, (t, p_, s_, w) in enumerate(zip(toks, pos, seqs, want)):
            lb.token[i], lb.pos[i], lb.n_seq_id[i], lb.logits[i] = t, p_, 1, w
            lb.seq_id[i][0] = s_
        lb.n_tokens = len(toks)
        if llama_cpp.llama_decode(self.ctx, lb) != 0:
            raise RuntimeError("llama_decode failed while generating teacher data")

    def rows(self, n: int) -> np.ndarray:
        """The logits of the last decode's n output rows [n, V]."""
        import llama_cpp

        return np.ctypeslib.as_array(llama_cpp.llama_get_logits(self.ctx), shape=(n, self.n_vocab)).copy()

    def close(self) -> None:
        import llama_cpp

        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)


def answer_group(dec: BatchDecoder, group: list[list[int]], max_new: int, k: int, temperature: float, stops: set,
                 rng: np.random.Generator) -> list[dict]:
    """The answers to up to dec's sequences of prompts at once (generate_sequences' records)."""
    dec.clear()
    last = []
    for b, p in enumerate(group):  # prefill one prompt per decode: [len(p)] tokens, 1 output
        dec.decode(p, list(range(len(p))), [b] * len(p), [False] * (len(p) - 1) + [True])
        last.append(dec.rows(1)[0])
    logits = np.stack(last)  # [B, V]
    gen = [[] for _ in group]
    tops: list[list] = [[] for _ in group]
    active = list(range(len(group)))
    while active:
        ti, tl = top_logprobs(logits, k)  # [A, k]
        nxt = next_tokens(logits, temperature, rng)
        still = []
        for a, b in enumerate(active):
            t = int(nxt[a])
            gen[b].append(t)
            tops[b].append((ti[a].tolist(), [round(float(x), 4) for x in tl[a]]))
            if t not in stops and len(gen[b]) < max_new:
                still.append(b)
        active = still
        if active:
            dec.decode([gen[b][-1] for b in active], [len(group[b]) + len(gen[b]) - 1 for b in active],
                       active, [True] * len(active))
            logits = dec.rows(len(active))  # [A, V]
    return [{"ids": p + gen[b], "start": len(p), "top_ids": [a for a, _ in tops[b]], "top_lp": [lp for _, lp in tops[b]]}
            for b, p in enumerate(group)]


def next_tokens(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """One token per row of logits [A, V]: sampled at `temperature` (one uniform a row, by inversion
    of the CDF), or the argmax at 0."""
    if temperature <= 0:
        return np.argmax(logits, -1)
    w = np.exp((logits - logits.max(-1, keepdims=True)) / temperature).cumsum(-1)  # [A, V]
    u = rng.random(len(logits)) * w[:, -1]
    return np.array([np.searchsorted(w[a], u[a], side="right") for a in range(len(logits))])


def ensure_generated(gguf: str, out: Path, n: int, *, max_new: int = MAX_NEW, k: int = TOP_K,
                     temperature: float = TEMPERATURE, seed: int = SEED, batch: int = BATCH, threads: int = THREADS,
                     progress: bool = True, prompt_set: str = PROMPT_SETS[0]) -> Path:
    """Make `out` hold n generated answers: the ones already there are kept (a stopped run resumes),
    the rest are generated and appended a line at a time."""
    from tqdm import tqdm

    out.parent.mkdir(parents=True, exist_ok=True)
    have = 0
    if out.exists():
        lines = out.read_text().splitlines()
        good = []
        for line in lines:
            try:
                json.loads(line)
            except json.JSONDecodeError:
                break  # a half-written last line: cut it and generate that answer again
            good.append(line)
        if len(good) < len(lines):
            out.write_text("".join(g + "\n" for g in good))
        have = len(good)
    if have >= n:
        return out
    prompts = (_kept_self_requests(gguf, out, n, seed, batch, threads, progress) if prompt_set == "self"
               else make_prompts(n, seed, prompt_set))[have:]
    with out.open("a") as f:
        for rec in tqdm(generate_sequences(gguf, prompts, max_new, k, temperature, seed + have, batch, threads),
                        total=len(prompts), desc="target answers", disable=not progress):
            f.write(json.dumps(rec) + "\n")
            f.flush()
    return out
