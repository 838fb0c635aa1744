"""The settings of `harness models distill` (models/distill.py trains with them), with their
defaults, defined here once: the command line shows them in --help from this dataclass.

Kept apart from the training code so the command line can read the defaults without importing
torch. What it does not do: train, or resolve the target (harness/distill_cli.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from spec_harness.core.config import at_least
from spec_harness.core.errors import HarnessError

DRAFT_LAYERS = 2  # layers of a draft built from the target when --layers is not given
INITS = ("project", "random")


@dataclass(frozen=True)
class DistillConfig:
    target: str
    out: str  # working folder: teacher cache, checkpoints, config
    steps: int = 300
    batch: int = 8
    seq_len: int = 128
    lr: float = 2e-3
    width: int = 256
    layers: int = 0  # 0: the --init-from draft's depth, else DRAFT_LAYERS
    kv_heads: int = 0  # 0: half the draft's heads (at least 1)
    intermediate: int = 0  # 0: 3 x width
    top_k: int = 16  # teacher log-probs kept per position
    init: str = "project"  # project | random
    seed: int = 0
    device: str = "cpu"
    threads: int = 1  # torch CPU threads
    max_chunks: int = 4096  # text chunks from disk (0: none)
    ckpt_every: int = 25
    text: tuple = ()  # extra text files / folders
    teacher_jsonl: tuple = ()  # files written by models/teacher_data.py
    eval_every: int = 0  # 0: at checkpoints; held-out agreement on the last generated sequences
    init_from: str = ""  # start from this draft (folder or GGUF) instead of building one from the target

    def __post_init__(self):
        for flag, value, low in (("--steps", self.steps, 0), ("--batch", self.batch, 1), ("--seq-len", self.seq_len, 2),
                                 ("--width", self.width, 1), ("--layers", self.layers, 0), ("--kv-heads", self.kv_heads, 0),
                                 ("--intermediate", self.intermediate, 0), ("--teacher-top-k", self.top_k, 1),
                                 ("--threads", self.threads, 1), ("--max-chunks", self.max_chunks, 0),
                                 ("--ckpt-every", self.ckpt_every, 1), ("--eval-every", self.eval_every, 0)):
            at_least(flag, value, low)
        if not self.lr > 0:
            raise HarnessError(f"--lr must be > 0, got {self.lr}")
        if self.init not in INITS:
            raise HarnessError(f"--init must be one of {', '.join(INITS)}, got {self.init!r}")
