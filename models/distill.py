"""`harness models distill`: train a small draft to imitate a target by knowledge distillation.

The draft is a narrow Llama (by default 2 layers, 256 wide: models/distill_config.py) with its own
smaller embedding, tied to its output head. Initialisation (`--init project`, the default): P = the top-`width` right singular
vectors of the target's embedding E [V, H]; the draft's embedding is E @ P [V, W], and its layers are
the target's first layers seen through P (a subset of attention heads, the MLP neurons with the
largest weights, RMSNorm weights folded in). `--init random` gives the same shape with random layers
and the projected embedding. `--init-from` starts from an earlier draft instead (its width and
heads); `--layers` above its depth appends layers that start as the identity (zeroed output
projections), so a trained draft can be made deeper without losing what it learned.

Training: text chunks (the target's own generations from models/teacher_data.py plus text on disk)
go through the target once; its temperature-1 top-k log-probabilities per position are cached on disk,
so later epochs and resumed runs pay no teacher compute. The loss is the cross-entropy from the
renormalised teacher top-k to the draft's full softmax (KL up to a constant). Checkpoints hold the
model, the optimizer and the step; `--resume` continues from the last one.

It does not write GGUF files (models/gguf_writer.py does), parse flags (harness/distill_cli.py) or
download anything.
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
from spec_harness.models.distill_config import DRAFT_LAYERS, DistillConfig
from spec_harness.models.shape import shape_from_config


# ---------------------------------------------------------------- model


def draft_config(tcfg, width: int, layers: int, kv_heads: int = 0, intermediate: int = 0):
    """A LlamaConfig for the draft: the target's vocabulary, RoPE and special ids, narrower and shallower."""
    from transformers import LlamaConfig

    t = shape_from_config(tcfg)
    heads = max(1, width // t.head_dim)
    kv = kv_heads or max(1, heads // 2)
    while heads % kv:
        kv -= 1
    return LlamaConfig(
        vocab_size=tcfg.vocab_size, hidden_size=width, intermediate_size=intermediate or 3 * width,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv, head_dim=t.head_dim,
        max_position_embeddings=t.context, rms_norm_eps=t.norm_eps,
        rope_parameters=getattr(tcfg, "rope_parameters", None), rope_theta=t.rope_theta,
        tie_word_embeddings=True, bos_token_id=tcfg.bos_token_id, eos_token_id=tcfg.eos_token_id,
        pad_token_id=getattr(tcfg, "pad_token_id", None), hidden_act="silu",
    )


def embedding_projection(E: torch.Tensor, width: int) -> torch.Tensor:
    """E [V, H] -> P [H, W]: the top-W right singular vectors (orthonormal columns)."""
    _, _, Vh = torch.linalg.svd(E.float(), full_matrices=False)  # Vh [H, H]
    return Vh[:width].T.contiguous()


def build_draft(target, width: int, layers: int, kv_heads: int = 0, intermediate: int = 0,
                init: str = "project", seed: int = 0):
    """-> LlamaForCausalLM (float32) initialised from `target` (see the module docstring)."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = draft_config(target.config, width, layers, kv_heads, intermediate)
    draft = LlamaForCausalLM(cfg).float().eval()
    E = target.get_input_embeddings().weight.detach().float()  # [V, H]
    if width > E.shape[1]:
        raise HarnessError(f"--width {width} is wider than the target ({E.shape[1]}); a draft must be at most as wide")
    P = embedding_projection(E, width)  # [H, W]
    with torch.no_grad():
        draft.get_input_embeddings().weight.copy_(E @ P)  # [V, W]
        if init == "project":
            _project_layers(target, draft, P)
        elif init != "random":
            raise ValueError(f"init must be project or random, not {init!r}")
    draft.tie_weights()
    return draft


def grow_draft(draft, layers: int):
    """Append layers to `draft` (in place) so it has `layers`; each new layer's output projections
    (o_proj, down_proj) start at zero, so the grown draft computes exactly what it did before and
    training then decides what the new layers add. -> draft"""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    have = draft.config.num_hidden_layers
    if layers < have:
        raise HarnessError(f"the starting draft has {have} layers; --layers {layers} would drop some (give {have} or more)")
    with torch.no_grad():
        for i in range(have, layers):
            layer = LlamaDecoderLayer(draft.config, layer_idx=i).to(draft.dtype)
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
            draft.model.layers.append(layer)
    draft.config.num_hidden_layers = layers
    return draft


def early_exit_model(target, layers: int):
    """The target's first `layers` layers with its final norm and (tied) head, as a LlamaForCausalLM."""
    import copy

    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**{**target.config.to_dict(), "num_hidden_layers": layers, "tie_word_embeddings": True})
    cfg.architectures = ["LlamaForCausalLM"]
    m = LlamaForCausalLM(cfg).float().eval()
    sd = {k: v for k, v in copy.deepcopy(target.state_dict()).items()
          if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers}
    m.load_state_dict(sd, strict=False)
    m.tie_weights()
    return m


def _project_layers(target, draft, P: torch.Tensor) -> None:
    """Copy the target's first layers into the draft through P (residual stream h' = P^T h)."""
    tc, dc = shape_from_config(target.config), shape_from_config(draft.config)
    H, W = P.shape
    s = math.sqrt(H / W)  # RMSNorm of h' [W] vs h [H]: norm(h) ~ P norm'(h') * s
    hd = dc.head_dim
    t_group = tc.heads // tc.kv_heads
    d_group = dc.heads // dc.kv_heads
    kv_keep = list(range(dc.kv_heads))
    q_keep = [j * t_group + i for j in kv_keep for i in range(min(d_group, t_group))]
    q_keep = (q_keep + [h for h in range(tc.heads) if h not in q_keep])[: dc.heads]

    def rows(heads):  # head indices -> row indices of a projection [heads*hd, H]
        return torch.cat([torch.arange(h * hd, (h + 1) * hd) for h in heads])

    for tl, dl in zip(target.model.layers, draft.model.layers):
        g_in = tl.input_layernorm.weight.float()  # [H]
        g_post = tl.post_attention_layernorm.weight.float()
        a, da = tl.self_attn, dl.self_attn
        da.q_proj.weight.copy_(a.q_proj.weight.float()[rows(q_keep)] * g_in @ P)  # [Q, W]
        da.k_proj.weight.copy_(a.k_proj.weight.float()[rows(kv_keep)] * g_in @ P)
        da.v_proj.weight.copy_(a.v_proj.weight.float()[rows(kv_keep)] * g_in @ P)
        da.o_proj.weight.copy_(P.T @ a.o_proj.weight.float()[:, rows(q_keep)])  # [W, Q]
        m, dm = tl.mlp, dl.mlp
        score = m.down_proj.weight.float().norm(dim=0) * m.up_proj.weight.float().norm(dim=1)  # [I]
        keep = score.topk(dc.intermediate).indices
        dm.gate_proj.weight.copy_(m.gate_proj.weight.float()[keep] * g_post @ P)  # [I', W]
        dm.up_proj.weight.copy_(m.up_proj.weight.float()[keep] * g_post @ P)
        dm.down_proj.weight.copy_(P.T @ m.down_proj.weight.float()[:, keep])  # [W, I']
        dl.input_layernorm.weight.fill_(s)
        dl.post_attention_layernorm.weight.fill_(s)
    g_f = target.model.norm.weight.float()
    draft.model.norm.weight.copy_(s * (P * g_f[:, None] * P).sum(0))  # diag(P^T diag(g_f) P)


# ---------------------------------------------------------------- data


def disk_texts(paths: tuple = ()) -> list[str]:
    """The text files/folders in `paths`; with none, offline prose found on this machine: Python's
    pydoc topics, site-packages READMEs (METADATA), /usr/share/doc READMEs."""
    import sysconfig

    texts: list[str] = []
    for p in paths:
        p = Path(p)
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        texts += [f.read_text(errors="ignore") for f in files if f.is_file() and f.stat().st_size < 2_000_000]
    if paths:
        return [t for t in texts if t.strip()]
    try:
        from pydoc_data import topics

        texts += list(topics.topics.values())
    except ImportError:
        pass
    site = Path(sysconfig.get_paths()["purelib"])
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        body = meta.read_text(errors="ignore").split("\n\n", 1)[-1]
        if len(body) > 500:
            texts.append(body)
    for f in sorted(Path("/usr/share/doc").glob("*/README*"))[:200]:
        if f.is_file() and not f.suffix.endswith("gz"):
            texts.append(f.read_text(errors="ignore"))
    return [t for t in texts if t.strip()]


def text_chunks(tokenizer, texts: list[str], seq_len: int, max_chunks: int, seed: int) -> list[list[int]]:
    """Texts -> shuffled token chunks of seq_len (each text is cut into whole chunks)."""
    rng = random.Random(seed)
    texts = list(texts)
    rng.shuffle(texts)
    chunks: list[list[int]] = []
    for t in texts:
        ids = tokenizer.encode(t, add_special_tokens=False)
        chunks += [ids[i : i + seq_len] for i in range(0, len(ids) - seq_len + 1, seq_len)]
        if len(chunks) >= 4 * max_chunks:
            break
    rng.shuffle(chunks)
    return chunks[:max_chunks]


def teacher_records(paths: tuple, seq_len: int, k: int) -> list[dict]:
    """Generated sequences (teacher_data.py JSONL) -> {ids [L], top_ids [L,k], top_lp [L,k], mask [L]}."""
    out = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            ids, start = r["ids"], r["start"]
            L = len(ids)
            ti = torch.zeros(L, k, dtype=torch.int32)
            tl = torch.full((L, k), -1e4, dtype=torch.float16)
            mask = torch.zeros(L, dtype=torch.bool)
            for j, (a, b) in enumerate(zip(r["top_ids"], r["top_lp"])):
                pos = start - 1 + j  # the position whose output predicts ids[start + j]
                if pos + 1 >= L:
                    break
                ti[pos] = torch.tensor(a[:k], dtype=torch.int32)
                tl[pos] = torch.tensor(b[:k], dtype=torch.float16)
                mask[pos] = True
            lo = max(0, L - seq_len)  # keep the end (the answer) when too long
            out.append({"ids": torch.tensor(ids[lo:]), "top_ids": ti[lo:], "top_lp": tl[lo:], "mask": mask[lo:]})
    return out


@torch.no_grad()
def teacher_topk(target, ids: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ids [B, L] -> (top_ids [B, L, k] int32, top_lp [B, L, k] float16), temperature-1 log-probs."""
    logits = target(input_ids=ids.to(target.device)).logits.float()  # [B, L, V]
    lp, ti = torch.log_softmax(logits, -1).topk(k, -1)
    return ti.int().cpu(), lp.half().cpu()


# ---------------------------------------------------------------- training


def distill_loss(student_logits: torch.Tensor, top_ids: torch.Tensor, top_lp: torch.Tensor,
                 mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy from the renormalised teacher top-k to the student.
    student_logits [B, L, V], top_ids/top_lp [B, L, k], mask [B, L] -> scalar."""
    logq = torch.log_softmax(student_logits.float(), -1)  # [B, L, V]
    p = torch.softmax(top_lp.float(), -1)  # [B, L, k]
    ce = -(p * logq.gather(-1, top_ids.long())).sum(-1)  # [B, L]
    m = mask.float()
    return (ce * m).sum() / m.sum().clamp(min=1)


class TeacherCache:
    """Teacher top-k per chunk, keyed by the chunk's token ids (not its position in the corpus: text
    on disk can change between a run and its resume), saved to `folder/teacher.pt`."""

    def __init__(self, folder: Path):
        self.path = folder / "teacher.pt"
        self.data: dict[int, tuple] = torch.load(self.path) if self.path.exists() else {}
        self.dirty = False

    @staticmethod
    def key(chunk: torch.Tensor, k: int) -> str:
        import hashlib

        return f"{k}:" + hashlib.sha1(chunk.to(torch.int32).numpy().tobytes()).hexdigest()

    def get(self, target, chunk: torch.Tensor, k: int):
        i = self.key(chunk, k)
        if i not in self.data:
            ti, tl = teacher_topk(target, chunk[None], k)
            self.data[i] = (ti[0], tl[0])
            self.dirty = True
        return self.data[i]

    def save(self) -> None:
        if self.dirty:
            tmp = self.path.with_suffix(".tmp")
            torch.save(self.data, tmp)
            tmp.replace(self.path)
            self.dirty = False


def _pad_batch(items: list[dict], pad: int) -> dict:
    L = max(len(it["ids"]) for it in items)

    def padded(key, fill, dtype):
        out = torch.full((len(items), L, *items[0][key].shape[1:]), fill, dtype=dtype)
        for b, it in enumerate(items):
            out[b, : len(it[key])] = it[key]
        return out

    return {"ids": padded("ids", pad, torch.long), "top_ids": padded("top_ids", 0, torch.int32),
            "top_lp": padded("top_lp", -1e4, torch.float16), "mask": padded("mask", False, torch.bool)}


def make_batch(step: int, cfg: DistillConfig, chunks: list[list[int]], gen: list[dict], cache: TeacherCache,
               target, pad: int) -> dict:
    """Batch `step`: a fixed, seeded order over generated records and text chunks (so a resumed run
    sees the same batches as an uninterrupted one)."""
    n = len(chunks) + len(gen)
    order = list(range(n))
    epoch = (step * cfg.batch) // max(n, 1)
    random.Random(cfg.seed * 1000 + epoch).shuffle(order)
    items = []
    for j in range(cfg.batch):
        i = order[(step * cfg.batch + j) % n]
        if i < len(gen):
            items.append(gen[i])
        else:
            c = torch.tensor(chunks[i - len(gen)])
            ti, tl = cache.get(target, c, cfg.top_k)
            items.append({"ids": c, "top_ids": ti, "top_lp": tl, "mask": torch.ones(len(c), dtype=torch.bool)})
    return _pad_batch(items, pad)


def lr_at(step: int, cfg: DistillConfig) -> float:
    warm = max(1, min(20, cfg.steps // 10))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    frac = (step - warm) / max(1, cfg.steps - warm)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def save_checkpoint(folder: Path, draft, opt, step: int, losses: list[float], evals: Optional[list] = None) -> None:
    tmp = folder / "ckpt.tmp"
    torch.save({"model": draft.state_dict(), "opt": opt.state_dict(), "step": step, "losses": losses,
                "evals": evals or [], "rng": torch.get_rng_state()}, tmp)
    tmp.replace(folder / "ckpt.pt")
    draft.save_pretrained(folder / "draft")


def pad_id(tok, target) -> int:
    """The id that pads a batch: the tokenizer's pad token, else the target's (first) end of text, else 0."""
    pad = tok.pad_token_id if tok.pad_token_id is not None else (target.config.eos_token_id or 0)
    return pad[0] if isinstance(pad, list) else pad


def starting_draft(cfg: DistillConfig, target):
    """The draft training starts from: the `init_from` draft grown to --layers, or a new one from the target."""
    from spec_harness.models.loading import load_hf_model

    if cfg.init_from:
        torch.manual_seed(cfg.seed)
        start = load_hf_model(cfg.init_from, "draft", torch.float32, "cpu")
        return grow_draft(start, cfg.layers or start.config.num_hidden_layers)
    return build_draft(target, cfg.width, cfg.layers or DRAFT_LAYERS, cfg.kv_heads, cfg.intermediate, cfg.init, cfg.seed)


def training_data(cfg: DistillConfig, tok) -> tuple[list, list, list]:
    """-> (text chunks on disk, generated sequences to train on, held-out generated sequences)."""
    chunks = text_chunks(tok, disk_texts(cfg.text), cfg.seq_len, cfg.max_chunks, cfg.seed) if cfg.max_chunks else []
    gen = teacher_records(cfg.teacher_jsonl, cfg.seq_len, cfg.top_k)
    if not chunks and not gen:
        raise HarnessError("no training text: give --generate N, --teacher-jsonl or --text, or allow --max-chunks")
    held = heldout_split(gen)
    return chunks, gen[: len(gen) - len(held)], held


def train(cfg: DistillConfig, resume: bool = False, progress: bool = True, log=print,
          stop_after: Optional[int] = None) -> dict:
    """Distil; returns {step, losses, draft_dir}. Writes cfg.out/{config.json, teacher.pt, ckpt.pt, draft/}.
    `stop_after`: checkpoint and return at that step (as an interruption would; tests use it)."""
    from tqdm import tqdm

    from spec_harness.models.loading import load_hf_model, load_hf_tokenizer

    torch.set_num_threads(cfg.threads)
    folder = Path(cfg.out)
    folder.mkdir(parents=True, exist_ok=True)
    target = load_hf_model(cfg.target, "target", torch.float32, cfg.device)
    tok = load_hf_tokenizer(cfg.target, "target")
    pad = pad_id(tok, target)
    draft = starting_draft(cfg, target).to(cfg.device).train()
    opt = torch.optim.AdamW(draft.parameters(), lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.98))
    step, losses, state = 0, [], {}
    ckpt = folder / "ckpt.pt"
    if resume and ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        draft.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, losses = state["step"], state["losses"]
        torch.set_rng_state(state["rng"])
        log(f"resumed from step {step}")
    (folder / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
    chunks, gen, held = training_data(cfg, tok)
    cache = TeacherCache(folder)
    evals = state.get("evals", [])  # state is {} unless resumed

    def evaluate() -> None:
        evals.append({"step": step, **heldout_agreement(draft.eval(), held, pad)})
        draft.train()
        e = evals[-1]
        log(f"step {step}: " + (f"loss {losses[-1]:.3f}; " if losses else "")
            + f"held-out alpha(T=1) >= {e['alpha_t1']:.3f}, top-1 agreement {e['top1']:.3f} ({e['positions']} positions)")

    if held and step == 0:
        evaluate()  # the starting point, for comparison
    bar = tqdm(total=cfg.steps, initial=step, desc="distill", disable=not progress)
    t0, step0 = time.time(), step
    end = min(cfg.steps, stop_after) if stop_after else cfg.steps
    while step < end:
        b = make_batch(step, cfg, chunks, gen, cache, target, pad)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        logits = draft(input_ids=b["ids"].to(cfg.device)).logits  # [B, L, V]
        loss = distill_loss(logits, b["top_ids"].to(cfg.device), b["top_lp"].to(cfg.device), b["mask"].to(cfg.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        step += 1
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.3f}", s_per_step=f"{(time.time() - t0) / max(1, step - step0):.1f}")
        every = cfg.eval_every or cfg.ckpt_every
        if held and (step % every == 0 or step == end):
            evaluate()
        if step % cfg.ckpt_every == 0 or step == end:
            cache.save()
            save_checkpoint(folder, draft.eval(), opt, step, losses, evals)
            draft.train()
    bar.close()
    if not (folder / "draft").exists():  # no step was run (steps 0, or resumed at the end)
        cache.save()
        save_checkpoint(folder, draft.eval(), opt, step, losses, evals)
    return {"step": step, "losses": losses, "evals": evals, "draft_dir": str(folder / "draft")}


def heldout_split(gen: list[dict]) -> list[dict]:
    """The generated sequences kept out of training: the last 1 in 20 (at most 48), none under 40."""
    return gen[len(gen) - min(48, len(gen) // 20):] if len(gen) >= 40 else []


@torch.no_grad()
def heldout_agreement(draft, held: list[dict], pad: int, batch: int = 8) -> dict:
    """Teacher-forced agreement of the draft with the stored teacher top-k on held-out sequences:
    alpha_t1 = mean of sum_{x in top-k} min(p(x), q(x)) at temperature 1, a lower bound on
    Leviathan's alpha (the mass outside the teacher's top-k is left out); top1 = how often the
    draft's argmax is the teacher's (greedy acceptance)."""
    a_sum, t_sum, n = 0.0, 0.0, 0
    dev = next(draft.parameters()).device
    for i in range(0, len(held), batch):
        b = {k: v.to(dev) for k, v in _pad_batch(held[i : i + batch], pad).items()}
        q = torch.softmax(draft(input_ids=b["ids"]).logits.float(), -1)  # [B, L, V]
        p = b["top_lp"].float().exp()  # [B, L, k]
        qk = q.gather(-1, b["top_ids"].long())  # [B, L, k]
        m = b["mask"]
        a_sum += float(torch.minimum(p, qk).sum(-1)[m].sum())
        t_sum += float((q.argmax(-1) == b["top_ids"][..., 0].long())[m].sum())
        n += int(m.sum())
    return {"alpha_t1": a_sum / max(n, 1), "top1": t_sum / max(n, 1), "positions": n}
