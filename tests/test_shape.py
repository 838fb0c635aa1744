"""The source's shape, read with `ast` from every .py of the repository's source folders: no function
takes more than MAX_POSITIONAL positional parameters (self and cls not counted; the rest go after
a `*`), no function is longer than MAX_FUNCTION_LINES (from its `def` line to its last), no
module longer than MAX_MODULE_LINES. A function or module that grows past a limit fails here,
named with its line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "models", "runtimes", "reports", "harness", "spec_harness", "tests")
MAX_POSITIONAL = 8
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500

def _sources():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text()


def positional(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters a caller may pass by position, self or cls (the first) not counted."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return len(names) - (1 if names and names[0] in ("self", "cls") else 0)


def offences(name: str, source: str) -> dict[tuple[str, str, str], str]:
    """(module, function or "module", limit) -> "module:line: what" for each limit that the module,
    or a function in it (at any depth), goes over."""
    found = {}
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found[name, "module", "lines"] = f"{name}: {lines} lines, over {MAX_MODULE_LINES}"
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        n, length = positional(node), node.end_lineno - node.lineno + 1
        where = f"{name}:{node.lineno}: {node.name}"
        if n > MAX_POSITIONAL:
            found[name, node.name, "positional parameters"] = f"{where} takes {n} positional parameters, over {MAX_POSITIONAL}"
        if length > MAX_FUNCTION_LINES:
            found[name, node.name, "lines"] = f"{where} is {length} lines long, over {MAX_FUNCTION_LINES}"
    return found


@pytest.fixture(scope="module")
def found() -> dict[tuple[str, str, str], str]:
    """Every offence of the source."""
    return {k: v for name, source in _sources() for k, v in offences(name, source).items()}


def test_no_function_or_module_over_its_limit(found):
    assert not found, "over a limit of tests/test_shape.py:\n" + "\n".join(sorted(found.values()))


def test_the_limits_are_read_as_meant():
    """Each limit passes a function or module at it and fails one over it."""
    params = ", ".join(f"a{i}" for i in range(MAX_POSITIONAL))
    assert offences("m.py", f"def f({params}, *, k): pass\nclass C:\n    def g(self, {params}): pass\n") == {}
    for over in (f"def f({params}, extra): pass\n", f"def f(a, /, {params}): pass\n",
                 f"class C:\n    def f(self, {params}, extra): pass\n"):
        assert list(offences("m.py", over)) == [("m.py", "f", "positional parameters")], over
    body = "def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1)
    assert offences("m.py", body) == {}
    assert offences("m.py", body + "    x = 2\n") == {("m.py", "f", "lines"): f"m.py:1: f is {MAX_FUNCTION_LINES + 1} lines long, over {MAX_FUNCTION_LINES}"}
    assert offences("m.py", "x = 1\n" * MAX_MODULE_LINES) == {}
    assert list(offences("m.py", "x = 1\n" * (MAX_MODULE_LINES + 1))) == [("m.py", "module", "lines")]
