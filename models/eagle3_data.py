"""The training data of an EAGLE-3 head (models/eagle3_train.py's items 1 and 2): the teacher-data
sequences (`harness models teacher-data`'s JSONL), the target's features and top-k at every
position of them, kept per data file under WORK/features (`Features`, part files written whole, so
an interrupted extraction resumes), the held-out split, and the draft vocabulary (the tokens the
target predicts most often; `grow_vocab` widens a trained head's).

It does not train or score the head (models/eagle3_train.py) or generate the answers
(models/teacher_data.py).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import torch

from spec_harness.core.errors import HarnessError
from spec_harness.models.eagle3 import Eagle3Head
from spec_harness.models.eagle3_config import Eagle3Config

PART = 64  # sequences per file of features


def training_features(cfg: Eagle3Config, target, layer_ids: tuple, progress: bool, log) -> tuple[list, list]:
    """Every --teacher-jsonl file's features (extracted once, kept per file under WORK/features, so
    a file added later costs only its own) -> (training sequences, held-out sequences: the end of
    every file)."""
    train_set, held = [], []
    for path in cfg.teacher_jsonl:
        seqs = read_sequences((path,), cfg.max_len)
        data_key = hashlib.sha256(json.dumps([[s["start"], s["ids"]] for s in seqs]).encode()).hexdigest()[:16]
        key = {"target": str(cfg.target), "layers": list(layer_ids), "k": cfg.top_k, "max_len": cfg.max_len, "data": data_key}
        store = Features(Path(cfg.work) / "features" / f"{Path(path).stem}-{data_key}", key)
        store.extract(target, seqs, layer_ids, cfg.top_k, progress, log)
        data = store.load()
        n_held = heldout_split(data)
        train_set += data[: len(data) - n_held]
        held += data[len(data) - n_held:]
    if not train_set:
        raise HarnessError("no training sequences: give --teacher-jsonl files (harness models teacher-data) or --generate N")
    return train_set, held


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
