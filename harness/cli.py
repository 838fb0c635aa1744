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
@click.option("--out", default=None, type=click.Path(path_type=Path), help="Output folder (default runs/<time>).")
def run(runtime_spec, pair, target, draft, gamma, temperature, top_p, top_k, max_new_tokens, prompt_spec,
        repeats, warmup, seed, ignore_eos, device, dtype, out):
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
    settings = RuntimeSettings(device=device, dtype=dtype)
    prompts = load_prompts(prompt_spec)
    out = out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    cfg = RunConfig(names, resolve_pair(pair, target, draft), prompts, gen, settings, repeats, warmup, out)
    rows = run_all(cfg)
    print_summary(rows)
    click.echo(f"\nresults: {out / 'results.jsonl'}  run info: {out / 'run.json'}")
    _report_of_run(out)
    if rows and all(r["error"] for r in rows):
        click.echo("error: every runtime failed; see the rows above and errors.log", err=True)
        sys.exit(2)


@main.command()
@click.option("--alpha", type=float, default=None, help="Acceptance probability per draft token (Leviathan's alpha).")
@click.option("--gamma", type=int, default=None, help="Draft tokens per round.")
@click.option("--c", "c", type=float, default=None, help="Cost ratio: draft step time / target step time.")
@click.option("--target", default=None, help="Target model for c from FLOPs: HF id, folder, config.json or .gguf.")
@click.option("--draft", default=None, help="Draft model for c from FLOPs (same forms as --target).")
@click.option("--context", default=0, show_default=True, type=int, help="Add the attention term at this context length.")
@click.option("--max-gamma", default=8, show_default=True, type=int, help="Last gamma of the table.")
def theory(alpha, gamma, c, target, draft, context, max_gamma):
    """Leviathan's expected speedup, breakeven alpha and best gamma; c given or from model configs."""
    from harness import theory_cli

    c, lines = theory_cli.resolve_c(c, target, draft, context)
    click.echo("\n".join(lines + theory_cli.summary_lines(alpha, gamma, c, max_gamma)))


@main.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", default=None, type=click.Path(path_type=Path), help="Report folder (default: DIR/report of the first DIR).")
def report(dirs, out):
    """Markdown, CSV, JSON and PNG plots from the results.jsonl under each DIR."""
    from reports import write_report

    click.echo(f"report: {write_report(list(dirs), out)}")


def _report_of_run(out: Path) -> None:
    """The end of `harness run`: its report; a failure here must not cost the measured rows."""
    from reports import write_report

    try:
        click.echo(f"report: {write_report([out])}")
    except Exception as e:  # noqa: BLE001 - the results are on disk; say so and how to retry
        click.echo(f"report not written ({type(e).__name__}: {e}); retry with `harness report {out}`", err=True)


from harness.models_cli import models as _models  # noqa: E402 - `harness models list|download|info`

main.add_command(_models)

if __name__ == "__main__":
    main()
