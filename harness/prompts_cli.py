"""`harness prompts list | fetch NAME`: the click group harness/cli.py mounts. `list` names the
built-in prompt sets and the public ones the harness knows (harness/public_sets.py), with what is
in the local cache; `fetch` downloads a public set into the Hugging Face cache.

Everything heavy is imported inside the commands. Errors are HarnessErrors, printed as one line
with exit 2 by the main group. What it does not do: read prompt files (harness/prompt_formats.py)
or talk to the Hub itself (huggingface_hub, through harness/public_sets.py).
"""

from __future__ import annotations

import click

from spec_harness.harness import public_sets


@click.group()
def prompts():
    """Prompt sets: the built-in ones and the public benchmark sets (--prompts NAME, or a file)."""


@prompts.command("list")
def list_():
    """The built-in sets and the public ones, and which public sets are in the local cache."""
    from spec_harness.harness.console import fit
    from spec_harness.harness.prompts import CATEGORIES, SETS, builtin

    click.echo("Built in (written for this project; --prompts NAME[,NAME]):")
    for name in (*CATEGORIES, *SETS):
        n = sum(len(builtin(c)) for c in SETS.get(name, (name,)))
        click.echo(fit(f"  {name:<15} {n:>3} prompts"))
    click.echo("Public sets (--prompts NAME after `harness prompts fetch NAME`; NAME:N keeps N questions per category):")
    for s in public_sets.SETS.values():
        if s.repo is None:
            where = f"not on the Hub: {s.elsewhere}"
        else:
            folder = public_sets.fetched(s.name)
            where = f"datasets/{s.repo}; " + (f"in the cache: {folder}" if folder else "not fetched")
        click.echo(fit(f"  {s.name:<15} {s.about}. {where}"))


@prompts.command()
@click.argument("name")
def fetch(name):
    """Download public set NAME into the Hugging Face cache (resumable; --prompts NAME reads it offline afterwards)."""
    from spec_harness.harness.prompts import load_prompts

    files = public_sets.fetch(name)
    got = load_prompts(name)
    questions = len({p.id for p in got})
    click.echo(f"{name}: {questions} questions, {len(got)} turns in {', '.join(str(f) for f in files)}")
