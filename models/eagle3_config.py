"""The settings of `harness models eagle3` (models/eagle3_train.py trains with them), with their
defaults, defined here once: the command line shows them in --help from this dataclass. Kept
apart from the training code so the command line reads the defaults without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from spec_harness.core.config import at_least
from spec_harness.core.errors import HarnessError


PRECISIONS = ("float32", "bfloat16")


@dataclass(frozen=True)
class Eagle3Config:
    target: str
    work: str  # working folder: the target's features, checkpoints, the head
    steps: int = 600
    batch: int = 8  # sequences per step
    lr: float = 1e-3
    draft_vocab: int = 8192  # the most frequent target tokens of the training data the head can propose
    ttt_steps: int = 3  # the training-time test: positions 1..k trained as drafting uses them
    top_k: int = 32  # the target's log-probs kept per position (the loss' teacher)
    seed: int = 0
    threads: int = 0  # 0: one per physical core
    ckpt_every: int = 50
    eval_every: int = 0  # 0: at each checkpoint
    layer_ids: tuple = ()  # the target layers the head reads; () the default (2, n/2, n-3)
    teacher_jsonl: tuple = ()  # sequences written by `harness models teacher-data`
    max_len: int = 192  # tokens of a sequence at most (the end is kept)
    precision: str = "float32"  # or bfloat16: the head's matrix products under torch.autocast (CPUs with AVX512-BF16)
    init_from: str = ""  # a trained head's folder to start from (its layers and draft vocabulary), or "" for a new head

    def __post_init__(self):
        for flag, value, low in (("--steps", self.steps, 0), ("--batch", self.batch, 1),
                                 ("--draft-vocab", self.draft_vocab, 16), ("--ttt-steps", self.ttt_steps, 1),
                                 ("--teacher-top-k", self.top_k, 1), ("--threads", self.threads, 0),
                                 ("--ckpt-every", self.ckpt_every, 1), ("--eval-every", self.eval_every, 0),
                                 ("--max-len", self.max_len, 8)):
            at_least(flag, value, low)
        if not self.lr > 0:
            raise HarnessError(f"--lr must be > 0, got {self.lr}")
        if self.precision not in PRECISIONS:
            raise HarnessError(f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.layer_ids and len(self.layer_ids) != 3:
            raise HarnessError(f"--layers takes three target layer ids, got {list(self.layer_ids)}")
