"""The report as a list of sections: `Section` (a heading, text, a table, and the CSV and
report.json key its records are kept under), `render`, which lays a list out as report.md, and
`csv_tables`, the records each section keeps, by report.json key, for the CSVs and report.json.

A section's parts are written in a fixed order, each followed by one blank line: its `## ` heading,
its text, its table (markdown.md_table of the rows and columns), the text after the table; then
the lines another module laid out itself (explain, the roofline, under load, quantization), as they
are. A section whose `when` is false is left out of report.md; its records are kept all the same.

What it does not do: decide which sections a report has or their order (build.py), word them or
format a number (markdown.py), or write files (build.py).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import PurePath
from typing import Optional, Sequence

from spec_harness.reports.markdown import md_table

Column = tuple[str, str, str]  # (record key, header, format spec), as markdown.md_table reads it


@dataclass(frozen=True)
class Section:
    """One part of report.md and, where it names a CSV, one table of the CSVs and report.json."""

    title: str = ""  # the `## ` heading; "" for none
    _: KW_ONLY  # the rest by name
    text: Sequence[str] = ()  # lines before the table: paragraphs, "- " bullets, ``` blocks, images
    rows: Sequence[dict] = ()  # the table's rows as report.md shows them
    columns: Sequence[Column] = ()  # report.md's columns of them; () for no table
    after: Sequence[str] = ()  # lines after the table
    lines: Sequence[str] = ()  # markdown laid out elsewhere, its heading and blank lines included
    records: Optional[Sequence[dict]] = None  # what the CSV and report.json keep (default: rows)
    csv: Optional[str] = None  # the file its records are written to, every column; None for none
    key: Optional[str] = None  # its report.json key (default: the CSV's name without .csv)
    when: bool = True  # report.md shows it only when true

    def markdown(self) -> list[str]:
        """Its lines of report.md ([] when it is not shown)."""
        if not self.when:
            return []
        out = [f"## {self.title}", ""] if self.title else []
        table = md_table(list(self.rows), list(self.columns)) if self.columns else []
        for part in (self.text, table, self.after):
            if part:
                out += [*part, ""]
        return out + list(self.lines)

    def kept(self) -> list[dict]:
        """The records its CSV and report.json key hold."""
        return list(self.rows if self.records is None else self.records)

    def json_key(self) -> str:
        return self.key or PurePath(self.csv or "").stem


def render(sections: Sequence[Section]) -> str:
    """report.md: every shown section's lines in the list's order."""
    return "\n".join(line for s in sections for line in s.markdown())


def csv_tables(sections: Sequence[Section]) -> dict[str, tuple[str, list[dict]]]:
    """Each section that names a CSV: report.json key -> (CSV name, its records), in the list's order."""
    return {s.json_key(): (s.csv, s.kept()) for s in sections if s.csv}
