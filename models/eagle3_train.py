"""`harness models eagle3`: train an EAGLE-3 head (models/eagle3.py) for a target on the CPU, from
the target's own answers (`harness models teacher-data`) and its hidden states.

1. Features: every training sequence goes through the target once (float32, transformers'
   forward): the residual stream entering its three `layer_ids` layers at every position
   [3 Ht] and its temperature-1 top-k log-probabilities there, kept in the working folder
   (`features/`, float16, one folder per data file) so epochs, resumed runs and data files added
   later pay no target compute again. The last 1 in 20 sequences of each file are held out.
2. Draft vocabulary: the `draft_vocab` target tokens the target predicts most often (its top-1)
   over the training sequences, end-of-text included; `d2t` maps them back.
3. Training with EAGLE-3's training-time test: at step 0 head position i takes (x_{i+1}, fc(f_i))
   and predicts the target's distribution at i+1; at step j it takes (x_{i+j+1}, h^{j-1}_i), its
   own output of the step before (no fc), at position i+j, attends to step 0's keys at positions
   0..i and to its own steps 1..j at index i (the keys drafting writes), and predicts the target's
   distribution at i+j+1. The loss is the cross-entropy from the target's top-k, renormalised
   over the draft vocabulary, to the head's softmax, at the positions that predict an answer's
   tokens (the prompt is context, never drafted), averaged over the steps. Gradients flow
   through the fed-back states. AdamW, warm-up then cosine, gradient clip 1; the products in
   float32, or in bfloat16 under torch.autocast (`precision`; the weights stay float32).
4. Initialisation: fc reads the last of the three layers as it is, the layer's output
   projections start at zero (so h = g), the final norm and the head's rows are the target's own
   (its norm and output matrix at the draft vocabulary). Or, with `init_from`, a trained head's
   weights, layers and draft vocabulary (further training on new answers, a fresh optimizer),
   the vocabulary grown to `draft_vocab` when that is larger (the new data's most frequent
   tokens it lacks, their rows the target's).
5. Checkpoints (model, optimizer, step, evaluations) every `ckpt_every` steps, `--resume`
   continues; at each the held-out sequences are scored
   teacher-forced per drafting position, over their answers: top-1 agreement (greedy acceptance) and
   alpha(T=1) >= sum over the target's top-k of min(p, q).

It writes the head folder (models/eagle3.py's save) and, through models/eagle3.py's gguf_of, its
GGUF. It does not read the data, extract the features or choose the draft vocabulary (items 1 and
2: models/eagle3_data.py), generate the answers (models/teacher_data.py) or parse flags
(harness/eagle3_cli.py).
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import torch

from spec_harness.core.errors import HarnessError
from spec_harness.models.eagle3 import Eagle3Head, HeadConfig, check_fits, default_layer_ids, load_head, read_config
from spec_harness.models.eagle3_config import Eagle3Config
from spec_harness.models.eagle3_data import choose_vocab, grow_vocab, training_features


# ---------------------------------------------------------------- the head


def build_head(target, cfg: HeadConfig, vocab_ids: torch.Tensor, seed: int) -> Eagle3Head:
    """A head initialised from the target (the module docstring, item 4)."""
    torch.manual_seed(seed)
    head = Eagle3Head(cfg, target.get_input_embeddings().weight.detach().float())
    Ht = cfg.target_hidden
    with torch.no_grad():
        for lin in (head.q_proj, head.k_proj, head.v_proj, head.gate_proj, head.up_proj):
            lin.weight.normal_(0, 0.02)
        head.fc.weight.zero_()
        head.fc.weight[:, 2 * Ht :] = torch.eye(cfg.hidden, Ht)  # the last layer's features as they are
        head.o_proj.weight.zero_()
        head.down_proj.weight.zero_()
        head.norm.copy_(target.model.norm.weight.float())
        head.lm_head.weight.copy_(target.get_output_embeddings().weight.float()[vocab_ids])
        head.d2t.copy_(vocab_ids - torch.arange(len(vocab_ids)))
    return head


def batch_of(items: list[dict], t2d: torch.Tensor) -> dict:
    """Sequences -> padded tensors: tok [B, L], feats [B, L, 3Ht] f32, p [B, L, k] teacher
    probabilities over draft ids renormalised, did [B, L, k] (draft ids, 0 where absent), n [B],
    start [B] (where each answer begins)."""
    L = max(len(s["ids"]) for s in items)
    B, k = len(items), items[0]["top_ids"].shape[1]
    Ht3 = items[0]["feats"].shape[1] * items[0]["feats"].shape[2]
    tok = torch.zeros(B, L, dtype=torch.long)
    feats = torch.zeros(B, L, Ht3)
    p = torch.zeros(B, L, k)
    did = torch.zeros(B, L, k, dtype=torch.long)
    n = torch.tensor([len(s["ids"]) for s in items])
    for i, s in enumerate(items):
        m = len(s["ids"])
        tok[i, :m] = s["ids"].long()
        feats[i, :m] = s["feats"].float().reshape(m, -1)
        d = t2d[s["top_ids"].long()]  # [m, k], -1 outside the draft vocabulary
        prob = s["top_lp"].float().exp() * (d >= 0)
        p[i, :m] = prob / prob.sum(-1, keepdim=True).clamp(min=1e-9)
        did[i, :m] = d.clamp(min=0)
    return {"tok": tok, "feats": feats, "p": p, "did": did, "n": n,
            "start": torch.tensor([int(s["start"]) for s in items])}


def ttt_forward(head: Eagle3Head, b: dict, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The training-time test over a batch -> per step j: (draft logits [B, T, Vd] at head index
    i, predicting position i+j+1's distribution; valid mask [B, T]), T = L - 1."""
    c = head.cfg
    tok, n = b["tok"], b["n"]
    B, L = tok.shape
    T = L - 1
    idx = torch.arange(T)
    scale = 1.0 / math.sqrt(c.head_dim)
    rep = c.heads // c.kv_heads
    g = head.combine(b["feats"][:, :T])  # [B, T, H]: f_0 .. f_{T-1}
    keys0 = vals0 = None
    own_k: list[torch.Tensor] = []
    own_v: list[torch.Tensor] = []
    out = []
    for j in range(steps):
        t_idx = (idx + j + 1).clamp(max=L - 1)  # the token at index i of step j: x_{i+j+1}
        q, k, v, residual = head.project(tok[:, t_idx], g, (idx + j)[None].expand(B, T))
        k = k.repeat_interleave(rep, 2)  # [B, T, nh, hd]
        v = v.repeat_interleave(rep, 2)
        qh = q.transpose(1, 2)  # [B, nh, T, hd]
        if j == 0:
            keys0, vals0 = k.transpose(1, 2), v.transpose(1, 2)  # [B, nh, T, hd]
        else:
            own_k.append(k)
            own_v.append(v)
        s0 = (qh @ keys0.transpose(-1, -2)) * scale  # [B, nh, T, T]: step 0's keys at positions 0..i
        s0 = s0.masked_fill(idx[None, :] > idx[:, None], float("-inf"))
        diag = [((q * kk).sum(-1) * scale).transpose(1, 2)[..., None] for kk in own_k]  # [B, nh, T, 1] each
        w = torch.softmax(torch.cat([s0, *diag], -1), -1)  # [B, nh, T, T + j]
        att = w[..., :T] @ vals0  # [B, nh, T, hd]
        for m, vv in enumerate(own_v):
            att = att + w[..., T + m : T + m + 1] * vv.transpose(1, 2)
        h = head.finish(att.transpose(1, 2).flatten(2), residual)  # [B, T, H]
        valid = (idx[None, :] + j + 1) < n[:, None]  # the token x_{i+j+1} exists
        out.append((head.logits(h), valid))
        g = h  # fed back, no fc
    return out


def drafted(valid: torch.Tensor, b: dict, j: int) -> torch.Tensor:
    """valid [B, T] of step j, narrowed to the positions drafting meets: those whose predicted token
    x_{i+j+1} is one of the answer's, never the prompt's (the head drafts answers; the prompt's
    positions are context it attends to, not text it proposes)."""
    T = valid.shape[1]
    return valid & ((torch.arange(T) + j + 1)[None, :] >= b["start"][:, None])


def ttt_loss(head: Eagle3Head, b: dict, steps: int) -> tuple[torch.Tensor, list[float]]:
    """Mean over steps of the cross-entropy from the target's renormalised top-k to the head, over
    the answers' positions."""
    losses = []
    for j, (logits, valid) in enumerate(ttt_forward(head, b, steps)):
        T = logits.shape[1]
        pos = (torch.arange(T) + j + 1).clamp(max=b["p"].shape[1] - 1)  # the distribution predicted
        p, did = b["p"][:, pos], b["did"][:, pos]  # [B, T, k]
        logq = torch.log_softmax(logits.float(), -1).gather(-1, did)
        ce = -(p * logq).sum(-1)  # [B, T]
        m = drafted(valid, b, j) & (p.sum(-1) > 0)
        losses.append((ce * m).sum() / m.sum().clamp(min=1))
    return torch.stack(losses).mean(), [float(x.detach()) for x in losses]


@torch.no_grad()
def heldout_agreement(head: Eagle3Head, held: list[dict], t2d: torch.Tensor, steps: int, batch: int = 8) -> dict:
    """Per drafting position j+1: top1 (the head's argmax is the target's, greedy acceptance) and
    alpha_t1 >= sum over the target's top-k of min(p, q), teacher-forced on held-out sequences'
    answers (positions predicting an answer's tokens)."""
    top1 = [0.0] * steps
    alpha = [0.0] * steps
    count = [0] * steps
    for lo in range(0, len(held), batch):
        items = held[lo : lo + batch]
        b = batch_of(items, t2d)
        L = b["tok"].shape[1]
        ti = torch.zeros(len(items), L, items[0]["top_ids"].shape[1], dtype=torch.long)
        tp = torch.zeros(len(items), L, items[0]["top_ids"].shape[1])
        for i, s in enumerate(items):
            ti[i, : len(s["ids"])] = s["top_ids"].long()
            tp[i, : len(s["ids"])] = s["top_lp"].float().exp()
        for j, (logits, valid) in enumerate(ttt_forward(head, b, steps)):
            T = logits.shape[1]
            valid = drafted(valid, b, j)
            pos = (torch.arange(T) + j + 1).clamp(max=L - 1)
            q = head.target_logits(logits.float()).softmax(-1)  # [B, T, V]
            t_ids, t_p = ti[:, pos], tp[:, pos]
            guess = head.to_target(logits.argmax(-1))
            top1[j] += float((guess == t_ids[..., 0])[valid].sum())
            alpha[j] += float(torch.minimum(t_p, q.gather(-1, t_ids)).sum(-1)[valid].sum())
            count[j] += int(valid.sum())
    return {"top1": [t / max(c, 1) for t, c in zip(top1, count)], "alpha_t1": [a / max(c, 1) for a, c in zip(alpha, count)],
            "positions": count}


# ---------------------------------------------------------------- training


def lr_at(step: int, cfg: Eagle3Config) -> float:
    warm = max(1, min(50, cfg.steps // 10))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, cfg.steps - warm))))


def train(cfg: Eagle3Config, resume: bool = False, progress: bool = True, log=print) -> dict:
    """-> {step, losses, evals, head_dir}: the head (float16) written to WORK/head."""
    from spec_harness.core.limits import threads_of
    from spec_harness.models.loading import load_hf_model

    torch.set_num_threads(threads_of(cfg.threads or None))
    Path(cfg.work).mkdir(parents=True, exist_ok=True)
    target = load_hf_model(cfg.target, "target", torch.float32, "cpu")
    init = read_config(cfg.init_from) if cfg.init_from else None  # a trained head to start from
    layer_ids = head_layers(cfg, target.config, init)
    train_set, held = training_features(cfg, target, layer_ids, progress, log)
    head, t2d = starting_head(cfg, target, init, layer_ids, train_set, resume)
    del target
    run = Training(cfg, head, held, t2d, log)
    if resume:
        run.resume()
    (run.work / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
    run.run(train_set, progress)
    return {"step": run.step, "losses": run.losses, "evals": run.evals, "head_dir": str(run.work / "head")}


def head_layers(cfg: Eagle3Config, tcfg, init: Optional[HeadConfig]) -> tuple:
    """The target layers the head reads: the `init_from` head's, else --layers, else the default;
    HarnessError where they do not fit the target or the head."""
    if init is not None:
        check_fits(init, tcfg, cfg.init_from)
        if cfg.layer_ids and tuple(sorted(cfg.layer_ids)) != init.layer_ids:
            raise HarnessError(f"--layers {list(cfg.layer_ids)}: the --init-from head reads layers {list(init.layer_ids)}")
    layer_ids = init.layer_ids if init else \
        tuple(sorted(cfg.layer_ids)) if cfg.layer_ids else default_layer_ids(tcfg.num_hidden_layers)
    if max(layer_ids) >= tcfg.num_hidden_layers or min(layer_ids) < 0:
        raise HarnessError(f"--layers {list(layer_ids)}: the target has layers 0..{tcfg.num_hidden_layers - 1}")
    return layer_ids


def starting_head(cfg: Eagle3Config, target, init: Optional[HeadConfig], layer_ids: tuple, train_set: list,
                  resume: bool) -> tuple[Eagle3Head, torch.Tensor]:
    """The head training starts from (the `init_from` head, its vocabulary grown to --draft-vocab
    where that is larger, or a new one from the target) and its draft vocabulary, kept in
    WORK/vocab.pt (a resumed run reads it back) -> (head, t2d: target id -> draft id, -1 outside)."""
    tcfg = target.config
    vocab_file = Path(cfg.work) / "vocab.pt"
    if init is not None:  # its weights, draft vocabulary and shape; a fresh optimizer and schedule
        head = load_head(cfg.init_from, target.get_input_embeddings().weight.detach().float(), tcfg).float()
        vocab_ids = torch.arange(init.draft_vocab) + head.d2t.long()
        if cfg.draft_vocab > len(vocab_ids):
            ranked = choose_vocab(train_set, tcfg.vocab_size, tcfg.vocab_size, _ends(tcfg), ranked=True)
            head, vocab_ids = grow_vocab(head, target, ranked, cfg.draft_vocab)
    elif resume and vocab_file.exists():
        vocab_ids = torch.load(vocab_file)
    else:
        vocab_ids = choose_vocab(train_set, cfg.draft_vocab, tcfg.vocab_size, _ends(tcfg))
    torch.save(vocab_ids, vocab_file)
    t2d = torch.full((tcfg.vocab_size,), -1, dtype=torch.long)
    t2d[vocab_ids] = torch.arange(len(vocab_ids))
    if init is None:
        hcfg = HeadConfig.for_target(tcfg, len(vocab_ids), layer_ids, verifier=Path(str(cfg.target)).name)
        head = build_head(target, hcfg, vocab_ids, cfg.seed)
    return head, t2d


class Training:
    """One training run of a head: its optimizer, step, losses and held-out evaluations, the
    checkpoint in WORK/ckpt.pt and the head in WORK/head."""

    def __init__(self, cfg: Eagle3Config, head: Eagle3Head, held: list, t2d: torch.Tensor, log):
        self.cfg, self.head, self.held, self.t2d, self.log = cfg, head, held, t2d, log
        self.work = Path(cfg.work)
        self.opt = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=0.0,
                                     betas=(0.9, 0.98))
        self.step, self.losses, self.evals = 0, [], []

    def resume(self) -> None:
        """Continue from WORK/ckpt.pt where there is one."""
        ckpt = self.work / "ckpt.pt"
        if not ckpt.exists():
            return
        state = torch.load(ckpt, weights_only=False)
        self.head.load_state_dict(state["model"], strict=False)
        self.opt.load_state_dict(state["opt"])
        self.step, self.losses, self.evals = state["step"], state["losses"], state["evals"]
        self.log(f"resumed from step {self.step}")

    def run(self, train_set: list, progress: bool) -> None:
        """Train to cfg.steps: random batches of `train_set`, evaluated every eval_every steps (and
        before the first), checkpointed every ckpt_every and at the end."""
        from tqdm import tqdm

        cfg = self.cfg
        rng = random.Random(cfg.seed * 1_000_003 + self.step)
        if self.held and self.step == 0:
            self.evaluate()
        self.head.train()
        bar = tqdm(total=cfg.steps, initial=self.step, desc="EAGLE-3 head", disable=not progress)
        t0, step0 = time.time(), self.step
        while self.step < cfg.steps:
            self.train_step([train_set[rng.randrange(len(train_set))] for _ in range(cfg.batch)])
            bar.update(1)
            bar.set_postfix(loss=f"{self.losses[-1]:.3f}", s_per_step=f"{(time.time() - t0) / max(1, self.step - step0):.1f}")
            last = self.step == cfg.steps
            if self.held and (self.step % (cfg.eval_every or cfg.ckpt_every) == 0 or last):
                self.evaluate()
            if self.step % cfg.ckpt_every == 0 or last:
                self.checkpoint()
        bar.close()
        if not (self.work / "head" / "config.json").exists():
            self.checkpoint()

    def train_step(self, items: list[dict]) -> None:
        """One optimizer step on a batch of sequences."""
        for g in self.opt.param_groups:
            g["lr"] = lr_at(self.step, self.cfg)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cfg.precision == "bfloat16"):
            loss, _ = ttt_loss(self.head, batch_of(items, self.t2d), self.cfg.ttt_steps)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.head.parameters(), 1.0)
        self.opt.step()
        self.step += 1
        self.losses.append(float(loss.detach()))

    def evaluate(self) -> None:
        """Score the held-out sequences (heldout_agreement) and log the result."""
        self.head.eval()
        e = {"step": self.step, **heldout_agreement(self.head, self.held, self.t2d, self.cfg.ttt_steps)}
        self.head.train()
        self.evals.append(e)
        self.log(f"step {self.step}: " + (f"loss {self.losses[-1]:.3f}; " if self.losses else "")
                 + "held-out top-1 agreement by position " + " ".join(f"{x:.3f}" for x in e["top1"])
                 + "; alpha(T=1) >= " + " ".join(f"{x:.3f}" for x in e["alpha_t1"]) + f" ({e['positions'][0]} positions)")

    def checkpoint(self) -> None:
        """Model, optimizer, step and evaluations to WORK/ckpt.pt (whole or not at all), the head to WORK/head."""
        state = {"model": self.head.state_dict(), "opt": self.opt.state_dict(), "step": self.step, "losses": self.losses,
                 "evals": self.evals}
        torch.save(state, self.work / "ckpt.tmp")
        (self.work / "ckpt.tmp").replace(self.work / "ckpt.pt")
        self.head.save(self.work / "head")


def _ends(tcfg) -> tuple:
    eos = tcfg.eos_token_id
    return tuple(eos if isinstance(eos, list) else [eos]) if eos is not None else ()


# ---------------------------------------------------------------- the tiny test pairs' heads


def ensure_tiny_head(name: str = "tiny", steps: int = 80) -> Path:
    """An EAGLE-3 head for a tiny test pair (models/tiny.py), trained in seconds on 96 sequences the
    tiny target samples itself, kept beside the pair and reused -> its folder."""
    import json as _json

    from spec_harness.models.tiny import ensure_pair

    t, _ = ensure_pair(name)
    folder = Path(t).parent / f"eagle3-v2-{steps}"  # v2: trained on the answers' positions only
    if (folder / "head" / "config.json").is_file():
        return folder / "head"
    from spec_harness.models.loading import load_hf_model

    target = load_hf_model(str(t), "target", torch.float32, "cpu")
    g = torch.Generator().manual_seed(0)
    vocab = target.config.vocab_size - 1  # the byte tokens; the last id is the end of text
    prompts = torch.randint(32, 127, (96, 8), generator=g)
    torch.manual_seed(0)
    with torch.no_grad():
        out = target.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=True, temperature=1.0,
                              top_k=0, max_new_tokens=56, min_new_tokens=56, pad_token_id=vocab)
    work = folder.with_name(folder.name + f".tmp{__import__('os').getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    data = work / "sequences.jsonl"
    data.write_text("".join(_json.dumps({"ids": row.tolist(), "start": 8}) + "\n" for row in out))
    cfg = Eagle3Config(target=str(t), work=str(work), steps=steps, batch=8, lr=3e-3, draft_vocab=vocab + 1, ttt_steps=3,
                       ckpt_every=steps, threads=1, teacher_jsonl=(str(data),))
    train(cfg, progress=False, log=lambda *_: None)
    try:
        work.replace(folder)
    except OSError:  # another process made it meanwhile
        pass
    return folder / "head"
