"""The runtimes' names and capabilities are declared once (runtimes/__init__.py's REGISTRY, each
class's drafters, policies, forces, serves_concurrently): the refusal texts, `harness runtimes`
and the bench derive from them, and the tables of the README and docs/ that name runtimes are
checked here against them, so that adding a runtime is one file and one registry line."""

from __future__ import annotations

import re
from pathlib import Path

from spec_harness import runtimes
from spec_harness.core.config import GenerationSettings
from spec_harness.core.config import RuntimeSettings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = README + "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "findings.md")


def _tables(text: str) -> list[list[list[str]]]:
    """Every markdown table as rows of cells (the separator row dropped)."""
    out, cur = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                cur.append(cells)
        elif cur:
            out.append(cur)
            cur = []
    return out


def _runtime_cells(table) -> list[str]:
    return [m[1] for row in table[1:] for m in [re.fullmatch(r"`([\w.-]+)`(?:, `[\w.-]+`)*", row[0])] if m]


def test_the_readme_and_the_runtimes_page_list_exactly_the_registered_runtimes():
    for text in (README, (ROOT / "docs" / "runtimes.md").read_text()):
        first = next(t for t in _tables(text) if t[0][:2] in (["name", "what runs"], ["`--runtime`", "what runs"]))
        assert sorted(_runtime_cells(first)) == sorted(runtimes.names())


def test_every_readme_table_names_only_registered_runtimes():
    """A table keyed by runtime (its first column headed runtime or name), in the README or a page
    of docs/ (findings.md's dated tables aside): every name in backticks there is a registered runtime."""
    names = set(runtimes.names())
    for t in _tables(DOCS):
        if t[0][0] not in ("runtime", "name"):
            continue
        for row in t[1:]:
            for name in re.findall(r"`([^`]+)`", row[0]):
                assert name in names, f"README table row {row[0]!r} names {name!r}, not a registered runtime"


def test_the_eagle3_table_skips_exactly_the_runtimes_without_the_head():
    table = next(t for t in _tables((ROOT / "docs" / "drafting.md").read_text()) if t[0] == ["runtime", "how the head runs"] or
                 (t[0][0] == "runtime" and any("EAGLE-3" in c for row in t for c in row)))
    skipped = {n for row in table[1:] if "skipped" in row[1] for n in re.findall(r"`([\w.-]+)`", row[0])}
    assert skipped == set(runtimes.names()) - set(runtimes.able("drafters", "eagle3"))


def test_refusals_name_the_runtimes_that_can_from_their_declarations():
    rt = runtimes.get("llamacpp-native")(RuntimeSettings())
    why = rt.supports(GenerationSettings(drafter="eagle3"))
    assert why == ("llamacpp-native has no EAGLE-3 drafting (--drafter eagle3 runs in "
                   + runtimes.listed(runtimes.able("drafters", "eagle3")) + ")")
    assert "cannot force acceptance" in rt.supports(GenerationSettings(forced=(1.0,)))
    assert runtimes.able("forces") == [n for n in runtimes.names() if runtimes.get(n).forces]


def test_harness_runtimes_prints_one_line_per_registered_runtime():
    lines = runtimes.capability_lines()
    names = runtimes.names()
    assert [ln.split()[0] for ln in lines[1:len(names) + 1]] == names
    assert all(len(ln) <= 100 for ln in lines)
    left_out = runtimes.not_in_all()
    assert sum(ln.startswith("* ") for ln in lines) == len(left_out)  # why, below the table
    assert all(lines[1 + names.index(n)].endswith(" *") for n in left_out)
    assert runtimes.listed(["a"]) == "a" and runtimes.listed(["a", "b", "c"]) == "a, b and c"
