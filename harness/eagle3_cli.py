"""`harness models eagle3`: the click front end of models/eagle3_train.py (training an EAGLE-3 head
on the CPU) and of models/eagle3.py's GGUF conversion. Parses options, runs, prints where the
files went; nothing else. Every default comes from models/eagle3_config.py, models/teacher_data.py or
a constant here; the options it shares with `harness models distill` are harness/training_options.py's.

Registered on the `models` group by harness/cli.py.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import click

from spec_harness.core.config import default_of
from spec_harness.core.errors import HarnessError
from spec_harness.harness.options import options
from spec_harness.harness.training_options import default_target, generated, training_options
from spec_harness.models.eagle3_config import PRECISIONS, Eagle3Config
from spec_harness.models.presets import EAGLE3_HEAD

MAX_BYTES = 32 * 1024 * 1024  # what the repository allows the shipped head to weigh
LAYERS = ""  # --layers: the head reads the default layers (2, n/2, n-3)


def _d(name: str):
    return default_of(Eagle3Config, name)


@click.command(name="eagle3")
@options(training_options(Eagle3Config, EAGLE3_HEAD,
                          "The head folder to write (config.json, model.safetensors; default: the embedded default head).",
                          "Working folder: the target's features, checkpoints (default .cache/eagle3/<out name>)."))
@click.option("--draft-vocab", default=_d("draft_vocab"), show_default=True, type=int,
              help="Target tokens the head can propose (the most frequent of the data); with --init-from, "
              "a larger value grows the head's vocabulary by the new data's most frequent tokens.")
@click.option("--ttt-steps", default=_d("ttt_steps"), show_default=True, type=int,
              help="Draft positions trained as drafting runs them (the training-time test).")
@click.option("--layers", default=LAYERS, help="The three target layers the head reads, e.g. 2,15,27 (default: 2, n/2, n-3).")
@click.option("--max-len", default=_d("max_len"), show_default=True, type=int, help="Tokens of a sequence at most.")
@click.option("--precision", type=click.Choice(PRECISIONS), default=_d("precision"), show_default=True,
              help="bfloat16: the training's matrix products under autocast (about 2x faster on CPUs with AVX512-BF16).")
@click.option("--init-from", default=_d("init_from"), help="Start from this trained head's folder (its weights, layers and draft vocabulary, grown by a larger --draft-vocab) "
              "instead of a new head, e.g. to train the shipped head further on new answers.")
@click.option("--no-gguf", is_flag=True, help="Do not convert the head to GGUF (llama-server converts it on first use).")
def eagle3(*, target, out_path, work, teacher_jsonl, generate, max_new_tokens, temperature, steps, batch, lr, top_k, seed,
           threads, ckpt_every, eval_every, resume, no_progress, draft_vocab, ttt_steps, layers, max_len, precision, init_from,
           no_gguf):
    """Train an EAGLE-3 head for TARGET on its own answers and hidden states (CPU), write its folder."""
    from spec_harness.models.eagle3_train import train

    target = target or default_target()
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
        from spec_harness.models.eagle3 import is_head_folder

        if not is_head_folder(init_from):
            raise HarnessError(f"--init-from {init_from}: not an EAGLE-3 head's folder (config.json and model.safetensors, "
                               "as `harness models eagle3` writes)")
    for f in teacher_jsonl:
        if not Path(f).is_file():
            raise HarnessError(f"--teacher-jsonl {f}: no such file (write one with `harness models teacher-data`)")
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file: a head is a folder (config.json, model.safetensors)")
    if generate:
        gen = generated(target, work, generate, max_new_tokens, top_k, temperature, seed, not no_progress)
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
        from spec_harness.models.eagle3 import gguf_of
        from spec_harness.models.loading import model_folder

        click.echo(f"GGUF for llama.cpp: {gguf_of(out, model_folder(target, 'target'))}")

