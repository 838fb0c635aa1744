"""The floors of docs/DESIGN.md, read from the source: which package may import which, and no
private name taken across packages. A new import that breaks a floor fails here, naming the line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("core", "models", "runtimes", "reports", "harness", "tests")
MAY_IMPORT = {  # package -> the packages of ours it may import (besides itself)
    "core": set(),
    "models": {"core"},
    "runtimes": {"core", "models"},
    "reports": {"core", "models"},
    "harness": {"core", "models", "runtimes", "reports"},
    "tests": set(OURS),
}


def _modules(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _imports(tree: ast.AST):
    """(line, imported module, names taken from it) of every import, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [a.name for a in node.names]


@pytest.mark.parametrize("package", list(MAY_IMPORT))
def test_each_package_imports_only_the_floors_below_it(package):
    bad = []
    for path, tree in _modules(package):
        for line, module, _ in _imports(tree):
            top = module.split(".")[0]
            if top in OURS and top != package and top not in MAY_IMPORT[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", OURS)
def test_no_private_name_is_imported_across_packages(package):
    bad = []
    for path, tree in _modules(package):
        for line, module, names in _imports(tree):
            top = module.split(".")[0]
            if top in OURS and top != package:
                private = [n for n in names if n.startswith("_")] + [m for m in module.split(".") if m.startswith("_")]
                if private:
                    bad.append(f"{path.relative_to(ROOT)}:{line} takes {', '.join(private)} from {module}")
    assert not bad, "\n".join(bad)


def test_the_checks_above_can_fail():
    """The parser sees imports inside functions too, where most of ours are."""
    tree = ast.parse("def f():\n    from harness.runner import _secret\n    import runtimes.loop\n")
    assert [(m, n) for _, m, n in _imports(tree)] == [("harness.runner", ["_secret"]), ("runtimes.loop", [])]


def test_every_module_says_what_it_owns_and_cites_files_that_exist():
    """A module docstring on every module; every path it names (docs/..., core/x.py, ...) is in the repository."""
    import re

    missing, cited = [], []
    for package in OURS[:-1]:
        for path, tree in _modules(package):
            doc = ast.get_docstring(tree)
            if not doc:
                missing.append(str(path.relative_to(ROOT)))
                continue
            for ref in re.findall(r"\b((?:docs|core|models|runtimes|reports|harness|tests)/[\w/.-]*\w)", doc):
                if not (ROOT / ref).exists():
                    cited.append(f"{path.relative_to(ROOT)} cites {ref}")
    assert not missing, f"modules without a docstring: {missing}"
    assert not cited, "\n".join(cited)
