"""How often a draft agrees with its target, teacher-forced, without timing anything
(`harness models agreement`).

The target samples N continuations of each prompt (transformers, float32, the chat template as
`harness run` applies it), and both models score them teacher-forced. Per prompt and per
position: alpha at temperature T (sum over the vocabulary of min(p, q): Leviathan's alpha, the
value alpha_hat estimates from accepted and rejected drafts) and greedy top-1 agreement. With 16 x
32 tokens per prompt it is a far tighter estimate than one `harness run` (160 drafted positions,
alpha_hat +-0.04), so it tells a weak draft from an unlucky run. Stored answers (models/
teacher_data.py output: the distillation prompts, never the measurement ones) can be scored
instead of sampling. An EAGLE-3 head is scored on the same continuations per drafting position
(`head_on_prompts`): it reads the target's hidden states, so it has no teacher-forced score of its own.
Top-1 is also split at the positions where the target's next token repeats a bigram already in the
context (`repeats`): there a model that reads its context can copy, and one that has memorised its
training text cannot; the split tells the two apart.

It measures the models only: no runtime, no quantized kernels (llama.cpp's alpha can differ by a
few hundredths). What it does not do: choose prompts (harness/prompts.py) or print (harness/).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from spec_harness.core.errors import HarnessError


def position_alpha(target_logits: torch.Tensor, draft_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Logits [B, L, V] of both models on the same ids -> sum_x min(p(x), q(x)) at each position [B, L]."""
    t = max(temperature, 1e-4)
    p = torch.softmax(target_logits.float() / t, -1)  # [B, L, V]
    q = torch.softmax(draft_logits.float() / t, -1)
    return torch.minimum(p, q).sum(-1)  # [B, L]


def repeats(ids: torch.Tensor, nxt: torch.Tensor) -> torch.Tensor:
    """ids [S] and the target's next token after each position nxt [S] -> [S] bool: whether the
    bigram (ids[a], nxt[a]) already occurs in ids[:a + 1], so that copying from the context gets it."""
    S = ids.shape[0]
    same_prev = ids[None, :-1] == ids[:, None]  # [S, S-1]: ids[s] == ids[a]
    same_next = ids[None, 1:] == nxt[:, None]  # [S, S-1]: ids[s+1] == nxt[a]
    before = torch.arange(S - 1)[None, :] < torch.arange(S)[:, None]  # s + 1 <= a: in the context
    return (same_prev & same_next & before).any(-1)


def repeats_rows(seq: torch.Tensor, target_logits: torch.Tensor) -> torch.Tensor:
    """seq [N, S], the target's logits on it [N, S, V] -> `repeats` per row [N, S]."""
    nxt = target_logits.argmax(-1)
    return torch.stack([repeats(seq[i], nxt[i]) for i in range(seq.shape[0])])


def score(target, draft, seq: torch.Tensor, start: int, temperature: float) -> tuple[torch.Tensor, ...]:
    """seq [N, S] whose tokens from `start` on are the target's -> (alpha(T), top-1 agreement,
    `repeats`), each [N, S - start], at the positions that predict those tokens."""
    pl, ql = target(input_ids=seq).logits, draft(input_ids=seq).logits  # [N, S, V]
    gen = slice(start - 1, -1)
    return (position_alpha(pl, ql, temperature)[:, gen], (pl.argmax(-1) == ql.argmax(-1))[:, gen].float(),
            repeats_rows(seq, pl)[:, gen])


@dataclass
class Agreement:
    """Sums over scored positions; per prompt and per position means."""

    positions: int = 0
    alpha_sum: float = 0.0
    top1_sum: float = 0.0
    per_prompt: dict = field(default_factory=dict)  # prompt id -> (alpha, top-1)
    by_position: list = field(default_factory=list)  # mean alpha at generated position i, over prompts
    copy_positions: int = 0  # positions whose target token repeats a bigram of the context
    copy_top1_sum: float = 0.0

    @property
    def alpha(self) -> float:
        return self.alpha_sum / max(self.positions, 1)

    @property
    def top1(self) -> float:
        return self.top1_sum / max(self.positions, 1)

    @property
    def copy_share(self) -> float:
        return self.copy_positions / max(self.positions, 1)

    @property
    def copy_top1(self) -> float:
        """Top-1 where the context holds the answer's bigram (`repeats`)."""
        return self.copy_top1_sum / max(self.copy_positions, 1)

    @property
    def other_top1(self) -> float:
        """Top-1 everywhere else."""
        return (self.top1_sum - self.copy_top1_sum) / max(self.positions - self.copy_positions, 1)

    def add(self, alpha: torch.Tensor, top1: torch.Tensor, copy: torch.Tensor) -> None:
        """Same-shaped tensors over scored positions; copy: bool, `repeats` there."""
        self.positions += alpha.numel()
        self.alpha_sum += float(alpha.sum())
        self.top1_sum += float(top1.sum())
        self.copy_positions += int(copy.sum())
        self.copy_top1_sum += float(top1[copy].sum())


@torch.inference_mode()
def on_prompts(target, draft, tokenizer, prompts: list[tuple[str, str]], temperature: float, samples: int,
               tokens: int, seed: int = 0) -> Agreement:
    """prompts: (id, text). The target samples `samples` continuations of `tokens` tokens per prompt."""
    from spec_harness.models.loading import encode_prompt

    check_temperature(temperature)
    torch.manual_seed(seed)
    out, by_pos = Agreement(), torch.zeros(tokens)
    for pid, text in prompts:
        ids = encode_prompt(tokenizer, text)
        x = torch.tensor([ids] * samples)  # [N, P]
        seq = target.generate(x, attention_mask=torch.ones_like(x), do_sample=True, temperature=temperature,
                              top_k=0, top_p=1.0, max_new_tokens=tokens, min_new_tokens=tokens,
                              pad_token_id=tokenizer.eos_token_id)  # [N, P + L]
        alpha, top1, copy = score(target, draft, seq, len(ids), temperature)  # [N, L] each
        out.per_prompt[pid] = (float(alpha.mean()), float(top1.mean()))
        out.add(alpha, top1, copy)
        by_pos += alpha.mean(0)
    out.by_position = (by_pos / max(len(prompts), 1)).tolist()
    return out


@torch.inference_mode()
def head_on_prompts(target, head, tokenizer, prompts: list[tuple[str, str]], *, temperature: float, samples: int,
                    tokens: int, steps: int = 4, seed: int = 0) -> list[Agreement]:
    """An EAGLE-3 head (models/eagle3.py) on the same continuations: per drafting position 1..steps,
    alpha(T) and top-1 against the target, the head reading the target's hidden states for
    position 1 and its own fed-back states after (the training-time test's forward,
    models/eagle3_train.py), so position j is scored as drafting runs it. -> one Agreement per position."""
    from spec_harness.models.eagle3_data import target_features
    from spec_harness.models.eagle3_train import ttt_forward
    from spec_harness.models.loading import encode_prompt

    check_temperature(temperature)
    torch.manual_seed(seed)
    out = [Agreement() for _ in range(steps)]
    t = max(temperature, 1e-4)
    for pid, text in prompts:
        ids = encode_prompt(tokenizer, text)
        x = torch.tensor([ids] * samples)
        seq = target.generate(x, attention_mask=torch.ones_like(x), do_sample=True, temperature=temperature, top_k=0,
                              top_p=1.0, max_new_tokens=tokens, min_new_tokens=tokens, pad_token_id=tokenizer.eos_token_id)
        items = target_features(target, [{"ids": row.tolist(), "start": len(ids)} for row in seq], head.cfg.layer_ids, 1)
        logits = target(input_ids=seq).logits.float()  # [N, S, V]: p at every position
        rep = repeats_rows(seq, logits)  # [N, S]
        b = {"tok": seq, "feats": torch.stack([i["feats"].float().flatten(1) for i in items]),
             "n": torch.full((len(seq),), seq.shape[1])}
        for j, (dl, valid) in enumerate(ttt_forward(head, b, steps)):
            T = dl.shape[1]
            at = torch.arange(T) + j + 1  # head index i at step j predicts the target's distribution at i+j+1
            keep = valid & (at >= len(ids) - 1)[None]  # positions that predict generated tokens
            src = at.clamp(max=seq.shape[1] - 1)
            p = torch.softmax(logits[:, src] / t, -1)
            q = torch.softmax(head.target_logits(dl.float()) / t, -1)
            alpha = torch.minimum(p, q).sum(-1)[keep]
            top1 = (p.argmax(-1) == q.argmax(-1))[keep].float()
            out[j].add(alpha, top1, rep[:, src][keep])
            out[j].per_prompt[pid] = (float(alpha.mean()), float(top1.mean()))
    return out


def check_temperature(temperature: float) -> None:
    if not temperature > 0:
        raise HarnessError("--temperature must be > 0 (greedy agreement is reported as top-1 anyway)")


def check_answers(path: str) -> Path:
    """The answers file, checked before any model loads."""
    if not Path(path).is_file():
        raise HarnessError(f"answers file not found: {path} (make one with `harness models teacher-data --out {path}`)")
    return Path(path)


@torch.inference_mode()
def on_answers(target, draft, path: str, temperature: float) -> Agreement:
    """alpha(T) and top-1 over the answer positions of stored sequences {ids, start}, one at a time."""
    check_answers(path)
    out = Agreement()
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        try:
            r = json.loads(line)
            ids, start = r["ids"], r["start"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise HarnessError(f"{path}:{n}: expected a JSON object with \"ids\" and \"start\" (teacher-data output)") from None
        out.add(*score(target, draft, torch.tensor([ids]), start, temperature))
    return out
