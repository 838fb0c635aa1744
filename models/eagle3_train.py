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
GGUF. It does not generate the answers (models/teacher_data.py) or parse flags (harness/eagle3_cli.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from core.errors import HarnessError
from models.eagle3 import Eagle3Head, HeadConfig, check_fits, default_layer_ids, load_head, read_config
from models.eagle3_config import Eagle3Config

PART = 64  # sequences per file of features


# ---------------------------------------------------------------- data


def read_sequences(paths: tuple, max_len: int) -> list[dict]:
    """teacher_data.py JSONL -> [{ids [L], start}] (the last max_len tokens of each)."""
    out = []
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise HarnessError(f"--teacher-jsonl {p}: no such file (write one with `harness models teacher-data`)")
        for n, line in enumerate(p.read_text().splitlines(), 1):
            try:
                r = json.loads(line)
                ids, start = [int(t) for t in r["ids"]], int(r["start"])
            except (ValueError, KeyError, TypeError):
                raise HarnessError(f"{p} line {n} is not a teacher-data record (ids, start)") from None
            lo = max(0, len(ids) - max_len)
            if len(ids) - lo >= 4:
                out.append({"ids": ids[lo:], "start": max(0, start - lo)})
    return out


def heldout_split(seqs: list) -> int:
    """How many sequences at the end are kept out of training: 1 in 20, at most 48 (none under 40)."""
    return min(48, len(seqs) // 20) if len(seqs) >= 40 else 0


class Features:
    """The target's features and top-k per training sequence, in `folder` (part files of PART
    sequences; a part is written whole, so an interrupted extraction resumes at its last part)."""

    def __init__(self, folder: Path, key: dict):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        meta = folder / "meta.json"
        if meta.exists():
            old = json.loads(meta.read_text())
            if old != key:
                raise HarnessError(f"{folder} holds features of another target, layers or data ({old.get('target')}); "
                                   "choose another --work")
        meta.write_text(json.dumps(key, indent=1))

    def parts(self) -> list[Path]:
        return sorted(self.folder.glob("part-*.pt"))

    @torch.no_grad()
    def extract(self, target, seqs: list[dict], layer_ids: tuple, k: int, progress: bool, log=print) -> None:
        from tqdm import tqdm

        done = len(self.parts()) * PART
        if done >= len(seqs):
            return
        log(f"the target's hidden states at layers {list(layer_ids)}: {len(seqs) - done} sequences")
        bar = tqdm(total=len(seqs), initial=done, desc="features", disable=not progress)
        for lo in range(done, len(seqs), PART):
            part = []
            for b in range(lo, min(lo + PART, len(seqs)), 8):
                got = target_features(target, seqs[b : min(b + 8, lo + PART, len(seqs))], layer_ids, k)
                part += got
                bar.update(len(got))
            torch.save(part, self.folder / f"part-{lo // PART:05d}.tmp")
            (self.folder / f"part-{lo // PART:05d}.tmp").replace(self.folder / f"part-{lo // PART:05d}.pt")
        bar.close()

    def load(self) -> list[dict]:
        out = []
        for p in self.parts():
            out += torch.load(p, weights_only=False)
        return out


def target_features(target, seqs: list[dict], layer_ids: tuple, k: int) -> list[dict]:
    """A batch of sequences through the target -> per sequence {ids, start, feats [L, 3, Ht] f16,
    top_ids [L, k] i32, top_lp [L, k] f16} (position t's top-k is the target's next-token
    distribution after x_0..x_t)."""
    L = max(len(s["ids"]) for s in seqs)
    ids = torch.zeros(len(seqs), L, dtype=torch.long)
    mask = torch.zeros(len(seqs), L, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s["ids"])] = torch.tensor(s["ids"])
        mask[i, : len(s["ids"])] = 1
    out = target(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    hs = torch.stack([out.hidden_states[i] for i in layer_ids], 2)  # [B, L, 3, Ht]: the inputs of those layers
    lp, ti = torch.log_softmax(out.logits.float(), -1).topk(k, -1)  # [B, L, k]
    res = []
    for i, s in enumerate(seqs):
        n = len(s["ids"])
        res.append({"ids": torch.tensor(s["ids"], dtype=torch.int32), "start": s["start"],
                    "feats": hs[i, :n].half().clone(), "top_ids": ti[i, :n].int().clone(), "top_lp": lp[i, :n].half().clone()})
    return res


def choose_vocab(seqs: list[dict], size: int, vocab: int, always: tuple = (), ranked: bool = False) -> torch.Tensor:
    """The `size` target ids the target predicts most often (its top-1 over every position), plus
    `always` (end of text); ascending -> [Vd] (ranked: most frequent first)."""
    counts = torch.zeros(vocab, dtype=torch.long)
    for s in seqs:
        counts += torch.bincount(s["top_ids"][:, 0].long(), minlength=vocab)
        counts += torch.bincount(s["ids"].long(), minlength=vocab)
    for t in always:
        counts[t] = counts.max() + 1
    size = min(size, vocab)
    top = counts.topk(size).indices
    return top if ranked else top.sort().values


def grow_vocab(head: Eagle3Head, target, ranked: torch.Tensor, size: int) -> tuple[Eagle3Head, torch.Tensor]:
    """A head whose draft vocabulary is `head`'s and the first ids of `ranked` (target ids, most
    frequent first) it lacks, `size` in all, ascending; its rows for the new ids are the target's
    output rows (as a new head's are), every other weight the head's own -> (head, vocab ids)."""
    old = head.to_target(torch.arange(head.cfg.draft_vocab))
    have = torch.zeros(head.cfg.vocab, dtype=torch.bool)
    have[old] = True
    new = ranked[~have[ranked]][: size - len(old)]
    ids, order = torch.cat([old, new]).sort()
    grown = Eagle3Head(replace(head.cfg, draft_vocab=len(ids)), head.embed)
    rows = torch.cat([head.lm_head.weight.detach(), target.get_output_embeddings().weight.detach().float()[new]])
    grown.load_state(head.state() | {"lm_head.weight": rows[order], "d2t": ids - torch.arange(len(ids))}, "grown")
    return grown, ids


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
    from tqdm import tqdm

    from core.limits import threads_of
    from models.loading import load_hf_model

    torch.set_num_threads(threads_of(cfg.threads or None))
    work = Path(cfg.work)
    work.mkdir(parents=True, exist_ok=True)
    target = load_hf_model(cfg.target, "target", torch.float32, "cpu")
    tcfg = target.config
    init = read_config(cfg.init_from) if cfg.init_from else None  # a trained head to start from
    if init is not None:
        check_fits(init, tcfg, cfg.init_from)
        if cfg.layer_ids and tuple(sorted(cfg.layer_ids)) != init.layer_ids:
            raise HarnessError(f"--layers {list(cfg.layer_ids)}: the --init-from head reads layers {list(init.layer_ids)}")
    layer_ids = init.layer_ids if init else \
        tuple(sorted(cfg.layer_ids)) if cfg.layer_ids else default_layer_ids(tcfg.num_hidden_layers)
    if max(layer_ids) >= tcfg.num_hidden_layers or min(layer_ids) < 0:
        raise HarnessError(f"--layers {list(layer_ids)}: the target has layers 0..{tcfg.num_hidden_layers - 1}")
    train_set, held = [], []
    for path in cfg.teacher_jsonl:  # features per file: a file added later costs only its own
        seqs = read_sequences((path,), cfg.max_len)
        data_key = hashlib.sha256(json.dumps([[s["start"], s["ids"]] for s in seqs]).encode()).hexdigest()[:16]
        key = {"target": str(cfg.target), "layers": list(layer_ids), "k": cfg.top_k, "max_len": cfg.max_len, "data": data_key}
        store = Features(work / "features" / f"{Path(path).stem}-{data_key}", key)
        store.extract(target, seqs, layer_ids, cfg.top_k, progress, log)
        data = store.load()
        n_held = heldout_split(data)  # the end of every file is held out
        train_set += data[: len(data) - n_held]
        held += data[len(data) - n_held:]
    if not train_set:
        raise HarnessError("no training sequences: give --teacher-jsonl files (harness models teacher-data) or --generate N")
    vocab_file = work / "vocab.pt"
    if init is not None:  # its weights, draft vocabulary and shape; a fresh optimizer and schedule
        head = load_head(cfg.init_from, target.get_input_embeddings().weight.detach().float(), tcfg).float()
        vocab_ids = torch.arange(init.draft_vocab) + head.d2t.long()
        if cfg.draft_vocab > len(vocab_ids):
            head, vocab_ids = grow_vocab(head, target, choose_vocab(train_set, tcfg.vocab_size, tcfg.vocab_size, _ends(tcfg),
                                                                    ranked=True), cfg.draft_vocab)
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
    del target
    opt = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.98))
    step, losses, evals = 0, [], []
    ckpt = work / "ckpt.pt"
    if resume and ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        head.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        step, losses, evals = state["step"], state["losses"], state["evals"]
        log(f"resumed from step {step}")
    (work / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
    rng = random.Random(cfg.seed * 1_000_003 + step)

    def evaluate() -> None:
        head.eval()
        e = {"step": step, **heldout_agreement(head, held, t2d, cfg.ttt_steps)}
        head.train()
        evals.append(e)
        log(f"step {step}: " + (f"loss {losses[-1]:.3f}; " if losses else "") + "held-out top-1 agreement by position "
            + " ".join(f"{x:.3f}" for x in e["top1"]) + "; alpha(T=1) >= " + " ".join(f"{x:.3f}" for x in e["alpha_t1"])
            + f" ({e['positions'][0]} positions)")

    def checkpoint() -> None:
        torch.save({"model": head.state_dict(), "opt": opt.state_dict(), "step": step, "losses": losses, "evals": evals},
                   work / "ckpt.tmp")
        (work / "ckpt.tmp").replace(ckpt)
        head.save(work / "head")

    if held and step == 0:
        evaluate()
    head.train()
    bar = tqdm(total=cfg.steps, initial=step, desc="eagle3", disable=not progress)
    t0, step0 = time.time(), step
    while step < cfg.steps:
        items = [train_set[rng.randrange(len(train_set))] for _ in range(cfg.batch)]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.precision == "bfloat16"):
            loss, per_step = ttt_loss(head, batch_of(items, t2d), cfg.ttt_steps)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        step += 1
        losses.append(float(loss.detach()))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.3f}", s_per_step=f"{(time.time() - t0) / max(1, step - step0):.1f}")
        if held and (step % (cfg.eval_every or cfg.ckpt_every) == 0 or step == cfg.steps):
            evaluate()
        if step % cfg.ckpt_every == 0 or step == cfg.steps:
            checkpoint()
    bar.close()
    if not (work / "head" / "config.json").exists():
        checkpoint()
    return {"step": step, "losses": losses, "evals": evals, "head_dir": str(work / "head")}


def _ends(tcfg) -> tuple:
    eos = tcfg.eos_token_id
    return tuple(eos if isinstance(eos, list) else [eos]) if eos is not None else ()


def coverage(seqs: list[dict], vocab_ids: torch.Tensor) -> float:
    """The share of the target's top-1 predictions the draft vocabulary holds."""
    keep = torch.zeros(int(vocab_ids.max()) + 1 if len(vocab_ids) else 1, dtype=torch.bool)
    keep[vocab_ids] = True
    hits = total = 0
    for s in seqs:
        t = s["top_ids"][:, 0].long()
        inside = t < len(keep)
        hits += int(keep[t[inside]].sum())
        total += len(t)
    return hits / max(total, 1)


# ---------------------------------------------------------------- the tiny test pairs' heads


def ensure_tiny_head(name: str = "tiny", steps: int = 80) -> Path:
    """An EAGLE-3 head for a tiny test pair (models/tiny.py), trained in seconds on 96 sequences the
    tiny target samples itself, kept beside the pair and reused -> its folder."""
    import json as _json

    from models.tiny import ensure_pair

    t, _ = ensure_pair(name)
    folder = Path(t).parent / f"eagle3-v2-{steps}"  # v2: trained on the answers' positions only
    if (folder / "head" / "config.json").is_file():
        return folder / "head"
    from models.loading import load_hf_model

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
