"""`--drafter eagle3[:PATH]` in the shared loop: an EAGLE-3 head (models/eagle3.py) drafting from
the target's own hidden states, as a Drafter (runtimes/loop.py), Algorithm 1 unchanged.

The target Model keeps the residual stream entering the head's three layers at every position it
caches (Model.keep_features: the torch runtime's forwards, its C++ kernels included, and
llama.cpp's layer inputs), so after the target's pass over a round, the features f_i of every
position it holds are there. The head has its own KV cache over head positions: position i holds
(x_{i+1}, fc(f_i)). A round after seq (n tokens; the target holds positions 0..n-2):

    catch up: head positions verified .. n-2 from the target's features  -> h, logits   (draft)
    token 1   = choice over the draft vocabulary (argmax, or sampled from q)              (sampling)
    step j    : head position n-2+j from (token j, h of the step before)  -> h, logits    (draft)
    ...
    accepted  : the head's cache back to position n-2 (what the target's features gave);
                the next round's catch-up covers the verified positions with their own features.

q when sampling is the head's distribution over the draft vocabulary, placed in the target's (0
elsewhere), so Leviathan's rule stays exact. The head's passes are draft time; the choice of each
token is sampling. `confidence:P` stops before the first position whose top-1 probability is < P,
as a draft model does. The head runs in PyTorch (float32 on a CPU, each matrix through
runtimes/packed_matmul.py's kernel where it can run) whatever runs the target, on `threads` torch
threads when given (the llamacpp runtime samples on one torch thread, and gives the head's passes
the run's threads, as its draft model's passes get in llama.cpp).
The head a runtime drafts with, written once for every runtime: `head_folder` (PATH of
`--drafter eagle3:PATH`, else the pair's own; the one "has no EAGLE-3 head" refusal),
`checked_folder` (that folder, checked against the target's: llama-server converts it, vLLM reads
it), and for the runtimes over the shared loop (runtimes/base.py's LoopRuntime) `loaded_head` (read
once per folder, checked against the target, packed) and `why_not` (why the target cannot draft
with it).
What it does not do: tree drafting, or train the head (models/eagle3_train.py).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F

from spec_harness.core import sampling
from spec_harness.core.config import PairSpec
from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.core.limits import torch_threads
from spec_harness.models.eagle3 import Eagle3Head
from spec_harness.runtimes import packed_matmul
from spec_harness.runtimes.loop import Draft, Drafter, Model


def head_folder(drafter: Eagle3Spec, pair: Optional[PairSpec]) -> str:
    """The folder of the head `drafter` (`eagle3[:PATH]`) drafts with: PATH, else the pair's own
    (PairSpec.eagle3); ValueError, the line a runtime refuses the setting with, when there is neither."""
    folder = drafter.folder(pair.eagle3 if pair else None)
    if folder is None:
        raise ValueError(f"the pair {pair.name if pair else ''} has no EAGLE-3 head of its own: give --drafter eagle3:PATH")
    return folder


def checked_folder(drafter: Eagle3Spec, pair: Optional[PairSpec], target_folder) -> str:
    """head_folder, its configuration checked against the target model folder's (models/eagle3.py's
    check_fits: HarnessError naming the mismatch), for a runtime whose library reads the head itself."""
    from spec_harness.models.eagle3 import check_fits, read_config

    folder = head_folder(drafter, pair)
    check_fits(read_config(folder), target_folder, folder)
    return folder


def loaded_head(rt, drafter: Eagle3Spec) -> Eagle3Head:
    """The head `drafter` names for a loop runtime `rt` (runtimes/base.py's LoopRuntime: its pair,
    head_embedding(), target_config()), loaded once per folder (models/eagle3.py's load_head,
    checked against the target's config) with its matrices packed for drafting; kept on `rt`."""
    from spec_harness.models.eagle3 import load_head

    folder = head_folder(drafter, rt.pair)
    heads = rt.__dict__.setdefault("_heads", {})
    if folder not in heads:
        heads[folder] = pack(load_head(folder, rt.head_embedding(), rt.target_config()))
    return heads[folder]


def why_not(rt, drafter: Eagle3Spec) -> Optional[str]:
    """Why loop runtime `rt` cannot draft with the head `drafter` names (None: it can): no head, or a
    target that cannot hand out the layers it reads. A head that does not fit the target is bad
    input (HarnessError)."""
    try:
        head_folder(drafter, rt.pair)
    except ValueError as e:
        return str(e)
    try:
        rt.target.keep_features(loaded_head(rt, drafter).cfg.layer_ids)  # can the target hand them out?
    except ValueError as e:
        return str(e)
    finally:
        rt.target.keep_features(())
    return None


def pack(head: Eagle3Head) -> Eagle3Head:
    """Each of the head's matrices through packed_matmul's kernel (CPU, float32, whole 16-row
    blocks), instead of F.linear; the same weights. A matrix whose values are all float16 values
    (a head saved in float16, as models/eagle3.py saves them) is packed in float16: the same
    products, and a draft step reads half the bytes (the step is memory bound: the 8192-row
    lm_head alone is 19 MiB in float32)."""
    w = head.fc.weight
    if packed_matmul.unusable_reason(w.device, w.dtype) is not None:
        return head
    for lin in (head.fc, head.q_proj, head.k_proj, head.v_proj, head.o_proj, head.gate_proj, head.up_proj,
                head.down_proj, head.lm_head):
        out = lin.weight.shape[0]
        if out % packed_matmul.BLOCK:
            continue
        w = lin.weight.detach()
        dtype = torch.float16 if packed_matmul.exact_in_half(w) else torch.float32
        packed = packed_matmul.pack(w, torch.empty(packed_matmul.packed_numel(*w.shape), dtype=dtype))
        lin.forward = lambda x, p=packed, n=out: packed_matmul.matmul(x, p, n)
    return head


class HeadCache:
    """The head's keys and values by head position, batch 1: [capacity, kv_heads, hd]."""

    def __init__(self, head: Eagle3Head, capacity: int = 256):
        c = head.cfg
        self.head, self.length = head, 0
        w = head.fc.weight
        self.k = torch.zeros(capacity, c.kv_heads, c.head_dim, dtype=w.dtype, device=w.device)
        self.v = torch.zeros_like(self.k)

    def forward(self, tokens: list[int], g: torch.Tensor, start: int) -> torch.Tensor:
        """Head positions start .. start + T - 1 from tokens [T] and g [T, H] (fc of the target's
        features, or a fed-back h), each attending to positions 0 .. its own -> h [T, H]."""
        head, c = self.head, self.head.cfg
        T = len(tokens)
        end = start + T
        self._reserve(end)
        dev = self.k.device
        pos = torch.arange(start, end, device=dev)
        q, k, v, residual = head.project(torch.tensor(tokens, device=dev), g, pos)  # q [T, nh, hd], k, v [T, nkv, hd]
        self.k[start:end], self.v[start:end] = k, v
        mask = torch.arange(end, device=dev)[None, :] <= pos[:, None] if T > 1 else None  # [T, end]
        att = F.scaled_dot_product_attention(q.transpose(0, 1)[None], self.k[:end].transpose(0, 1)[None],
                                             self.v[:end].transpose(0, 1)[None], attn_mask=mask,
                                             scale=1.0 / math.sqrt(c.head_dim), enable_gqa=True)  # [1, nh, T, hd]
        self.length = end
        return head.finish(att[0].transpose(0, 1).flatten(1), residual)  # [T, H]

    def _reserve(self, need: int) -> None:
        if need > self.k.shape[0]:
            cap = max(need, 2 * self.k.shape[0])
            for name in ("k", "v"):
                old = getattr(self, name)
                new = torch.zeros(cap, *old.shape[1:], dtype=old.dtype, device=old.device)
                new[: self.length] = old[: self.length]
                setattr(self, name, new)


class Eagle3Drafter(Drafter):
    """An EAGLE-3 head over a target Model that keeps its features (the module docstring)."""

    model = None  # no library counters: the head's passes are ours

    def __init__(self, head: Eagle3Head, target: Model, confidence: Optional[float] = None, threads: Optional[int] = None):
        self.head, self.target, self.confidence, self.threads = head, target, confidence, threads
        self.cache = HeadCache(head)
        self.verified = 0  # head positions computed from the target's features
        self.h: Optional[torch.Tensor] = None  # [H], the last verified position's output
        target.keep_features(head.cfg.layer_ids)

    def _passes(self):
        """The head's passes on `threads` torch threads (None: as they are), restored afterwards."""
        return torch_threads(self.threads)

    def reset(self, prompt: list[int]) -> None:
        """The head over the prompt: positions 0 .. len - 2 (the target has the prompt but its last token)."""
        self.cache.length, self.verified, self.h = 0, 0, None
        with self._passes():
            self._catch_up(prompt)

    def _catch_up(self, seq: list[int]) -> Optional[torch.Tensor]:
        """Head positions verified .. len(seq) - 2 from the target's features -> the last h [H]."""
        n = len(seq)
        if self.verified < n - 1:
            g = self.head.combine(self.target.features(self.verified, n - 1))  # [T, H]
            self.h = self.cache.forward(seq[self.verified + 1 : n], g, self.verified)[-1]
            self.verified = n - 1
        self.cache.length = self.verified
        return self.h

    def propose(self, seq, g, s, rng, timer) -> Draft:
        tokens, qs = [], []
        with timer.phase("draft"), self._passes():
            h = self._catch_up(seq)
            logits = self.head.logits(h)  # [Vd]
        for i in range(g):
            with timer.phase("sampling"):
                full = self.head.target_logits(logits)[None]  # [1, V]
                d, q = sampling.draft_token(full, s, rng)
                if self.confidence is not None and sampling.top1_prob(full, q) < self.confidence:
                    break
            tokens.append(d)
            if q is not None:
                qs.append(q)
            if i == g - 1:
                break
            with timer.phase("draft"), self._passes():
                h = self.cache.forward([d], h[None], self.verified + i)[0]  # position n-2+i+1 from token i+1
                logits = self.head.logits(h)
        return Draft(tokens, sampling.stack(qs))

    def accepted(self, seq: list[int], keep: int) -> None:
        """Drafted positions are dropped: the next round computes the verified ones from the target's features."""
        self.cache.length = self.verified
        if self.verified > len(seq) - 1:
            raise AssertionError(f"EAGLE-3 head ahead of the sequence: {self.verified} of {len(seq)} tokens")


def build(rt, drafter: Eagle3Spec, gen) -> Eagle3Drafter:
    """`--drafter eagle3[:PATH]` in our loop (core/drafters/eagle3.py): the head, loaded once, over
    loop runtime `rt`'s target, stopping under gen's confidence P if it has one."""
    return Eagle3Drafter(loaded_head(rt, drafter), rt.target, gen.confidence, rt.head_threads)
