"""The drafter registry: who proposes a round's draft tokens, one module per kind, by name.

A kind is a frozen dataclass subclassing `DrafterSpec` (below) in a file of its own under
core/drafters/; REGISTRY maps its name to "module:Class", imported when first asked for, like the
runtimes' registry (runtimes/__init__.py). A kind declares its name, its `--drafter` syntax and
help, how it reads its arguments, its label in the reports, what it costs (a draft model, nothing,
or its own round), and where our loop's drafter for it is built (`loop`, "module:function" in
runtimes/, resolved there). Each runtime maps the kinds it runs to its own machinery in its own
file, keyed by the kind's class; a runtime without a mapping for a kind gets a "skipped: reason"
row. A new drafter is its file plus one line in REGISTRY (or a `register` call).

A `--drafter` text is parsed once, at the edges (the command line, RunConfig, the results loader
reading rows back), into a kind's value; `str()` of the value is that text again, which rows and
run.json keep. What this module does not do: build or run a drafter (runtimes/), check a head's
files (models/eagle3.py), price a drafter (reports/).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import ClassVar, Optional, Union

from spec_harness.core.errors import HarnessError

REGISTRY: dict[str, str] = {
    "model": "spec_harness.core.drafters.model:DraftModelSpec",
    "ngram": "spec_harness.core.drafters.ngram:NgramSpec",
    "eagle3": "spec_harness.core.drafters.eagle3:Eagle3Spec",
}
DEFAULT = "model"  # --drafter's default: the pair's draft model

# What a round's drafting costs, for the cost models and the reports (DrafterSpec.cost)
DRAFT_MODEL = "draft model"  # the pair's draft model's steps (c = a draft step / a target step)
NOTHING = "nothing"  # no model runs (c = 0)
OWN_ROUND = "own round"  # a model of its own beside the target, priced by its measured round


@dataclass(frozen=True)
class DrafterSpec:
    """A --drafter parsed: one registered kind's value. Subclasses set the class variables and,
    where the kind takes arguments, their fields, `from_args` and `args`."""

    name: ClassVar[str] = "?"
    syntax: ClassVar[str] = "?"  # the flag's forms, e.g. "ngram[:N,K]"
    help: ClassVar[str] = ""  # what it is, for --help: "prompt lookup: ..."
    title: ClassVar[str] = "?"  # what a runtime lacks when it cannot run it: "prompt lookup"
    cost: ClassVar[str] = OWN_ROUND  # DRAFT_MODEL, NOTHING or OWN_ROUND
    has_probabilities: ClassVar[bool] = True  # a draft distribution q (confidence stopping reads it)
    # Our loop's drafter: "module:function" of runtimes/, called (runtime, this value, generation
    # settings) -> a runtimes.loop.Drafter; None: our loop cannot run this kind
    loop: ClassVar[Optional[str]] = None
    # Why a loop runtime cannot run this value (a head that does not fit): "module:function" of
    # runtimes/, called (runtime, this value) -> a reason or None; None: nothing to check
    loop_check: ClassVar[Optional[str]] = None
    # Checked before any model loads: "module:function" of models/, called (this value, pair),
    # raising HarnessError where the pair cannot be drafted so (a head for another target)
    check: ClassVar[Optional[str]] = None

    @classmethod
    def from_args(cls, args: str) -> DrafterSpec:
        """The value of `NAME:ARGS` (args "" for a bare NAME); HarnessError when they do not fit."""
        if args:
            raise HarnessError(f"--drafter {cls.name} takes no arguments, got {cls.name}:{args}")
        return cls()

    def args(self) -> str:
        """The text after `NAME:` that gives this value back ("" for none)."""
        return ""

    def available(self, pair) -> bool:
        """Whether pair (a PairSpec) has what this value drafts with, as given (a default --drafter
        list leaves out a value that it has not)."""
        return True

    def label(self) -> str:
        """How the reports name it (a head by its folder's name, not its whole path)."""
        return str(self)

    def __str__(self) -> str:
        a = self.args()
        return f"{self.name}:{a}" if a else self.name


def register(name: str, target: Union[str, type]) -> None:
    """Add a drafter kind: `target` is "module:Class" (imported when first asked for) or the class."""
    REGISTRY[name] = target  # type: ignore[assignment]


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> type[DrafterSpec]:
    """The kind registered as `name`; HarnessError naming the kinds for an unknown one."""
    target = REGISTRY.get(name)
    if target is None:
        raise HarnessError(f"unknown --drafter {name!r}; choose from: {syntaxes()}")
    if isinstance(target, str):
        target = REGISTRY[name] = resolve(target)
    return target


def resolve(target: str):
    """What "module:attr" names, imported now: a registry entry, and a kind's `loop`, `loop_check`
    and `check`, which the floors above resolve when a run asks for the kind."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def kinds() -> list[type[DrafterSpec]]:
    return [get(n) for n in names()]


def syntaxes() -> str:
    """Every kind's --drafter forms: "model, ngram[:N,K], eagle3[:PATH]"."""
    return ", ".join(k.syntax for k in kinds())


def parse(text: str) -> DrafterSpec:
    """'NAME' or 'NAME:ARGS' -> the registered kind's value; HarnessError otherwise."""
    name, _, args = text.strip().partition(":")
    if name not in REGISTRY:
        raise HarnessError(f"--drafter must be one of {syntaxes()}, got {text!r}")
    return get(name).from_args(args)


def of(value: Union[str, DrafterSpec, None]) -> DrafterSpec:
    """A value that may be parsed already, text (a row's, a test's), or None (the default)."""
    if value is None:
        return default()
    return parse(value) if isinstance(value, str) else value


def default() -> DrafterSpec:
    return get(DEFAULT)()


def parse_list(value: str) -> list[DrafterSpec]:
    """A --drafter comma list, each parsed: 'model,ngram:3,5' -> [model, ngram:3,5]. A part that
    names no kind continues the one before it (a kind's arguments may hold commas)."""
    out: list[str] = []
    for part in (p.strip() for p in value.split(",") if p.strip()):
        if out and ":" in out[-1] and part.partition(":")[0] not in REGISTRY:
            out[-1] += f",{part}"
        else:
            out.append(part)
    return [parse(d) for d in out]


def help_text() -> str:
    """--drafter's help, from every registered kind."""
    return "Comma list: " + ", ".join(f"{k.syntax} ({k.help})" for k in kinds()) + \
        "; `harness runtimes` says which runtime runs which."
