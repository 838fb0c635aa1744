"""The `harness` command line (click). Subcommands parse flags into the dataclasses of
harness/config.py and hand over to the runner; a HarnessError becomes one line and exit 2.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import click

from harness.errors import HarnessError


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except HarnessError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted; rows already written are kept", err=True)
            sys.exit(130)


@click.group(cls=_Group)
@click.version_option(package_name="spec-harness")
def main():
    """Measure speculative decoding across runtimes: where the time goes, and how far from theory."""


@main.command()
@click.option("--runtime", "runtime_spec", default="torch", show_default=True, help="Comma list of runtimes, or 'all'.")
@click.option("--pair", default=None, help="Preset pair name (default: the embedded default pair).")
@click.option("--target", default=None, help="Target model: local folder, .gguf file or Hugging Face id.")
@click.option("--draft", default=None, help="Draft model (path or id), or 'self' to draft with the target.")
@click.option("--target-gguf", default=None, help="Target GGUF file for the llama.cpp runtimes.")
@click.option("--draft-gguf", default=None, help="Draft GGUF file for the llama.cpp runtimes, or 'self'.")
@click.option("--gamma", default=4, show_default=True, type=int, help="Draft tokens per round.")
@click.option("--temperature", default=0.0, show_default=True, type=float, help="0 = greedy.")
@click.option("--top-p", default=1.0, show_default=True, type=float)
@click.option("--top-k", default=0, show_default=True, type=int, help="0 = off.")
@click.option("--max-new-tokens", default=64, show_default=True, type=int)
@click.option("--prompts", "prompt_spec", default="factual", show_default=True,
              help="Built-in categories (comma list, or 'all') or a JSONL file of {id, category, prompt}.")
@click.option("--repeats", default=1, show_default=True, type=int)
@click.option("--warmup", default=1, show_default=True, type=int, help="Warm-up generations per runtime (not recorded).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--ignore-eos", is_flag=True, help="Always generate --max-new-tokens tokens.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or mps.")
@click.option("--dtype", default="auto", show_default=True, help="auto, float32, float16 or bfloat16.")
@click.option("--n-threads", default=None, type=int, help="llama.cpp threads (default: the library's own).")
@click.option("--n-gpu-layers", default=0, show_default=True, type=int, help="llama.cpp layers to offload (-1 = all).")
@click.option("--n-ctx", default=None, type=int, help="llama.cpp context length (default: min(model's, 4096)).")
@click.option("--out", default=None, type=click.Path(path_type=Path), help="Output folder (default runs/<time>).")
def run(runtime_spec, pair, target, draft, target_gguf, draft_gguf, gamma, temperature, top_p, top_k, max_new_tokens,
        prompt_spec, repeats, warmup, seed, ignore_eos, device, dtype, n_threads, n_gpu_layers, n_ctx, out):
    """Run baseline and speculative generation per runtime; write run.json and results.jsonl."""
    import runtimes
    from harness.config import GenerationSettings, RuntimeSettings, SamplingParams
    from harness.prompts import load_prompts
    from harness.runner import RunConfig
    from harness.runner import run as run_all
    from harness.summary import print_summary
    from models.presets import resolve_pair

    names = runtimes.parse_names(runtime_spec)
    gen = GenerationSettings(SamplingParams(temperature, top_p, top_k), gamma, max_new_tokens, seed, ignore_eos)
    settings = RuntimeSettings(device=device, dtype=dtype, n_threads=n_threads, n_gpu_layers=n_gpu_layers, n_ctx=n_ctx)
    prompts = load_prompts(prompt_spec)
    out = out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    cfg = RunConfig(names, resolve_pair(pair, target, draft, target_gguf, draft_gguf), prompts, gen, settings, repeats, warmup, out)
    rows = run_all(cfg)
    print_summary(rows)
    click.echo(f"\nresults: {out / 'results.jsonl'}  run info: {out / 'run.json'}")
    if rows and all(r["error"] for r in rows):
        click.echo("error: every runtime failed; see the rows above and errors.log", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
