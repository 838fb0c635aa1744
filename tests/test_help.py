"""`--help` of every command and subcommand of `harness`, found by walking the click group: on a
terminal of WIDTH columns, and on a wider one, no line is wider than WIDTH, and every option's help
and the command's own text are all there (click wraps them; nothing is cut)."""

from __future__ import annotations

import contextlib

import click
import click.formatting
import pytest
from click.testing import CliRunner

from spec_harness.harness.cli import main

WIDTH = 100


def command_paths(group: click.Group = main, path: tuple[str, ...] = ()):
    """() for `harness` itself, then every subcommand's path, groups' subcommands included."""
    yield path
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from command_paths(cmd, (*path, name))
        else:
            yield (*path, name)


def contexts(path: tuple[str, ...]) -> click.Context:
    """The context a command at `path` runs in, below its groups' (not invoked)."""
    ctx = click.Context(main, info_name="harness")
    for name in path:
        ctx = click.Context(ctx.command.commands[name], info_name=name, parent=ctx)
    return ctx


class TerminalRunner(CliRunner):
    """CliRunner with the width a terminal gives: click's own runner fixes help at 80 columns
    (formatting.FORCED_WIDTH); here it comes from COLUMNS, as in a terminal, through the
    contexts' max_content_width."""

    @contextlib.contextmanager
    def isolation(self, *args, **kwargs):
        with super().isolation(*args, **kwargs) as streams:  # restores FORCED_WIDTH on the way out
            click.formatting.FORCED_WIDTH = None
            yield streams


def help_text(path: tuple[str, ...], columns: int) -> str:
    result = TerminalRunner().invoke(main, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, (path, result.output)
    return result.output


def what_it_says(path: tuple[str, ...]) -> list[str]:
    """The command's own text (its `\\b` markers aside) and each option's name and help, as written."""
    ctx = contexts(path)
    said = [(ctx.command.help or "").replace("\b", "")]
    for param in ctx.command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record:
            said.extend(record)
    return said


def _flat(text: str) -> str:  # click re-wraps (and breaks words at hyphens): compare without whitespace
    return "".join(text.split())


PATHS = list(command_paths())


def test_the_walk_finds_the_nested_commands():
    assert {(), ("run",), ("bench",), ("models",), ("models", "distill"), ("models", "eagle3")} <= set(PATHS)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(("harness", *p)))
def test_help_fits_the_terminal_and_says_everything(path):
    for columns in (WIDTH, 2 * WIDTH):  # a wider terminal gets no wider lines: max_content_width
        text = help_text(path, columns)
        wide = [line for line in text.splitlines() if len(line) > WIDTH]
        assert not wide, f"COLUMNS={columns}: lines over {WIDTH} columns:\n" + "\n".join(wide)
        shown = _flat(text)
        lost = [s for s in what_it_says(path) if _flat(s) not in shown]
        assert not lost, f"COLUMNS={columns}: not shown in full:\n" + "\n".join(lost)


def test_a_narrower_terminal_is_filled_to_its_width():
    """At 80 columns `run --help` wraps at 80 (click's floor is 50): the width follows the terminal."""
    assert max(map(len, help_text(("run",), 80).splitlines())) <= 80
    assert max(map(len, help_text(("run",), WIDTH).splitlines())) > 80


def test_bench_help_names_every_figure_from_its_table():
    from spec_harness.harness.bench import FIGURES

    text = help_text(("bench",), WIDTH)
    for n, what in FIGURES.items():
        assert f"{n}. {what}" in text, (n, what)
    assert "see harness/bench.py" not in text
