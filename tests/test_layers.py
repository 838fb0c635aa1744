"""The floors of docs/DESIGN.md, read from the source: which package may import which, no
private name taken across packages, and no import cycle among our modules (inside a package too:
a module that imports one that imports it back, at any depth, inside functions as well). A new
import that breaks a floor or closes a cycle fails here, naming the lines."""

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


PACKAGE = "spec_harness"  # the one import package; its subpackages are the folders of OURS


def _local(name: str) -> str:
    """spec_harness.core.x -> core.x (our modules by their folder); other names as they are."""
    return name[len(PACKAGE) + 1:] if name.startswith(PACKAGE + ".") else name


def _imports(tree: ast.AST):
    """(line, imported module, names taken from it) of every import, at any depth; ours named by
    folder (`from spec_harness import runtimes` is the module runtimes)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, _local(a.name), []
        elif isinstance(node, ast.ImportFrom) and node.module == PACKAGE and node.level == 0:
            for a in node.names:
                yield node.lineno, a.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, _local(node.module), [a.name for a in node.names]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, dict[str, int]]:
    """module -> {module of ours it imports: the first line}, from {module: (source, is a package)}:
    every import at any depth (inside functions too), relative ones resolved; `from a import b`
    is an edge to the module a.b where there is one, else to a; a name that is no module of ours
    is followed to the nearest module above it (`import a.b.c` of a function c: a.b)."""

    def ours(name: str):
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for module, (text, is_package) in sources.items():
        package = module if is_package else module.rpartition(".")[0]
        edges = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [_local(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = "" if node.module == PACKAGE and not node.level else _local(node.module or "")
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in sources else base for a in node.names]
            else:
                continue
            for name in names:
                to = ours(name)
                if to and to != module:
                    edges[to] = min(edges.get(to, node.lineno), node.lineno)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Each set of modules that import each other round a loop (a strongly connected component of
    more than one module, Tarjan's algorithm), sorted, each as the sorted module names."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _cycle_lines(graph, cycles) -> list[str]:
    return [" <-> ".join(c) + ": " + "; ".join(f"{a}:{line} imports {b}" for a in c for b, line in sorted(graph[a].items())
                                                if b in c) for c in cycles]


def test_no_import_cycle_among_our_modules():
    """Every module of every package of ours (tests too), imports inside functions included."""
    sources = {_module_name(path): (path.read_text(), path.name == "__init__.py")
               for package in OURS for path in sorted((ROOT / package).rglob("*.py"))}
    graph = _import_graph(sources)
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the whole source was read
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(_cycle_lines(graph, cycles))


def test_the_cycle_check_can_fail():
    """A loop through an import inside a function, and one through a relative import and a
    package, are found; a chain is not a cycle."""
    sources = {
        "pkg": ("", True),
        "pkg.base": ("def f():\n    from pkg.eagle import E\n", False),
        "pkg.eagle": ("from pkg.common import threads\n", False),
        "pkg.common": ("from .base import Text\n", False),
        "pkg.alone": ("import pkg.base\nfrom pkg import common\n", False),
        "other": ("from other import sub\n", True),
        "other.sub": ("import other.sub.missing_name\nfrom other import x\n", False),
    }
    graph = _import_graph(sources)
    assert graph["pkg.common"] == {"pkg.base": 1} and graph["pkg.alone"] == {"pkg.base": 1, "pkg.common": 2}
    assert _cycles(graph) == [["other", "other.sub"], ["pkg.base", "pkg.common", "pkg.eagle"]]
    assert _cycle_lines(graph, _cycles(graph))[1] == (
        "pkg.base <-> pkg.common <-> pkg.eagle: pkg.base:2 imports pkg.eagle; pkg.common:1 imports pkg.base; "
        "pkg.eagle:1 imports pkg.common")
    del sources["pkg.common"]
    assert _cycles(_import_graph(sources)) == [["other", "other.sub"]]


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
    tree = ast.parse("def f():\n    from spec_harness.harness.runner import _secret\n    import spec_harness.runtimes.loop\n"
                     "    from spec_harness import reports\n")
    assert [(m, n) for _, m, n in _imports(tree)] == [("harness.runner", ["_secret"]), ("runtimes.loop", []), ("reports", [])]


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


def test_the_run_loop_names_no_runtime():
    """The runner asks a runtime's class what it can do (the capabilities runtimes/base.py's Runtime
    declares), never its name: no string of the run loop's modules is a registered runtime's."""
    from spec_harness import runtimes

    names, bad = set(runtimes.names()), []
    for path in (ROOT / "harness" / f"{m}.py" for m in ("runner", "run_config", "under_load", "rows")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} names the runtime {node.value!r}")
    assert not bad, "\n".join(bad)


def test_every_import_of_ours_goes_through_the_one_package():
    """`from core.x import y` works in a checkout only; installed, our folders exist only as
    spec_harness.core, spec_harness.models, ... (pyproject.toml), so every import names the package."""
    bad = []
    for package in OURS:
        for path, tree in _modules(package):
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
                bad += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in OURS[:-1]]
    assert not bad, "\n".join(bad)
