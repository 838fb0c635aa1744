"""report.html: report.md as one self-contained page to open in a browser.

The page says what report.md says, in the same order: the headings (each with an anchor, the ##
ones, with the ### under them, in a sidebar that links to them), paragraphs, "- " lists with
**bold** and `code`, pipe tables (each in its own horizontally scrolling box, sortable by a click
on a header: numbers by value, "1.11x", "12.3%" and "0.53 / 0.61" by their first number, "-" and
empty cells last either way) and the PNG plots, inlined as base64 data: URIs. CSS and script are
inline; a Content-Security-Policy lets the page load nothing but its own data: images, so it
reads the same offline, mailed or archived. An image that is not in the report folder (or is
not a local PNG, JPEG, GIF or SVG) becomes a visible note. All text is HTML-escaped.

It converts exactly the markdown subset that markdown.py, concurrency.py and build.py write;
anything else is shown as plain text, never as HTML.
What it does not do: decide what the report says (markdown.py), compute or draw anything
(tables.py, plots.py), or write report.md (build.py calls write_html after writing it).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Optional

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".svg": "image/svg+xml"}
_HEADING = re.compile(r"^(#{1,3}) +(.*?)\s*$")
_RULE = re.compile(r"^\|? *:?-+:? *(\| *:?-+:? *)*\|? *$")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_INLINE = re.compile(r"(`+)(.+?)\1|\*\*(.+?)\*\*|" + _IMAGE.pattern)


def write_html(report_md: Path) -> Path:
    """Read report.md and write report.html beside it (images from the same folder). -> report.html."""
    report_md = Path(report_md)
    out = report_md.with_suffix(".html")
    out.write_text(page(report_md.read_text(encoding="utf-8"), report_md.parent), encoding="utf-8")
    return out


def page(md: str, folder: Path) -> str:
    """The whole HTML document of markdown `md`, its images read from `folder`."""
    body, toc, title = _Converter(Path(folder)).convert(md)
    nav = _nav(toc)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # Nothing but this page's own inline style, script and data: images may load.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        '<link rel="icon" href="data:,">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        nav,
        '<main id="content">',
        body,
        "</main>",
        f"<script>{SCRIPT}</script>",
        "</body>",
        "</html>",
        ""])


def _nav(toc: list[tuple[int, str, str]]) -> str:
    """The sidebar: each ## heading, the ### under it nested."""
    out = ['<nav id="sections" aria-label="Sections">', '<p class="nav-title">Sections</p>', "<ul>"]
    open_sub = False
    for level, anchor, text in toc:
        link = f'<a href="#{anchor}">{text}</a>'
        if level == 2:
            if open_sub:
                out.append("</ul></li>")
                open_sub = False
            elif len(out) > 3:
                out.append("</li>")
            out.append(f"<li>{link}")
        elif level == 3:
            if len(out) == 3:  # a ### before any ##: its own top-level entry
                out.append(f'<li class="sub">{link}')
                continue
            if not open_sub:
                out.append('<ul class="sub">')
                open_sub = True
            out.append(f"<li>{link}</li>")
    if open_sub:
        out.append("</ul></li>")
    elif len(out) > 3:
        out.append("</li>")
    out += ["</ul>", "</nav>"]
    return "\n".join(out)


class _Converter:
    """Markdown lines -> HTML blocks, the headings' anchors and the document's title."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.anchors: set[str] = set()
        self.toc: list[tuple[int, str, str]] = []
        self.title = "Report"

    def convert(self, md: str) -> tuple[str, list[tuple[int, str, str]], str]:
        lines = md.splitlines()
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
            elif m := _HEADING.match(line):
                out.append(self._heading(len(m.group(1)), m.group(2)))
                i += 1
            elif line.startswith("- "):
                items: list[str] = []
                while (i < len(lines) and lines[i].strip() and not _HEADING.match(lines[i])
                       and not lines[i].lstrip().startswith("|")):
                    if lines[i].startswith("- "):
                        items.append(lines[i][2:].strip())
                    else:  # a wrapped item goes on
                        items[-1] += " " + lines[i].strip()
                    i += 1
                out.append("<ul>\n" + "\n".join(f"<li>{self.inline(t)}</li>" for t in items) + "\n</ul>")
            elif line.lstrip().startswith("|") and i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()):
                rows = [line]
                i += 2
                while i < len(lines) and lines[i].lstrip().startswith("|"):
                    rows.append(lines[i])
                    i += 1
                out.append(self._table(rows))
            else:
                para: list[str] = []
                while (i < len(lines) and lines[i].strip() and not _HEADING.match(lines[i])
                       and not lines[i].startswith("- ") and not lines[i].lstrip().startswith("|")):
                    para.append(lines[i].strip())
                    i += 1
                if not para:  # a "|" line that opens no table
                    para, i = [line.strip()], i + 1
                text = " ".join(para)
                alone = _IMAGE.fullmatch(text)
                out.append(self._figure(alone.group(1), alone.group(2)) if alone else f"<p>{self.inline(text)}</p>")
        return "\n".join(out), self.toc, self.title

    # ------------------------------------------------------------ blocks

    def _heading(self, level: int, text: str) -> str:
        anchor = self._anchor(text)
        inner = self.inline(text)
        if level == 1 and self.title == "Report":
            self.title = text
        if level in (2, 3):
            self.toc.append((level, anchor, inner))
        return f'<h{level} id="{anchor}">{inner}<a class="anchor" href="#{anchor}" aria-hidden="true">#</a></h{level}>'

    def _anchor(self, text: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
        anchor, n = base, 2
        while anchor in self.anchors:
            anchor, n = f"{base}-{n}", n + 1
        self.anchors.add(anchor)
        return anchor

    def _table(self, rows: list[str]) -> str:
        head, body = _cells(rows[0]), [_cells(r) for r in rows[1:]]
        width = max([len(head)] + [len(r) for r in body])
        th = "".join(f'<th scope="col" aria-sort="none"><button type="button">{self.inline(c)}</button></th>'
                     for c in head + [""] * (width - len(head)))
        trs = "\n".join("<tr>" + "".join(self._td(c) for c in r + [""] * (width - len(r))) + "</tr>" for r in body)
        return (f'<div class="table-wrap" tabindex="0">\n<table class="sortable">\n<thead><tr>{th}</tr></thead>\n'
                f"<tbody>\n{trs}\n</tbody>\n</table>\n</div>")

    def _td(self, text: str) -> str:
        """A cell; a long text one (a prompt, a token string) wraps instead of widening its table."""
        return f'<td class="long">{self.inline(text)}</td>' if len(text) > 60 else f"<td>{self.inline(text)}</td>"

    def _figure(self, alt: str, src: str) -> str:
        img = self._image(alt, src)
        caption = f"<figcaption>{html.escape(alt)}</figcaption>" if alt and "<img" in img else ""
        return f"<figure>{img}{caption}</figure>"

    def _image(self, alt: str, src: str) -> str:
        data = self._data_uri(src)
        if data is None:
            what = f"{html.escape(alt)}: " if alt else ""
            return (f'<span class="missing" role="img" aria-label="{html.escape(alt or src)}">Image not available: '
                    f"{what}<code>{html.escape(src)}</code> is not a picture in the report folder.</span>")
        return f'<img src="{data}" alt="{html.escape(alt)}">'

    def _data_uri(self, src: str) -> Optional[str]:
        """The image as a data: URI, or None: not a local file of the report folder, or unreadable."""
        if re.match(r"^[a-z][a-z0-9+.-]*:", src, re.I) or src.startswith(("/", "\\")):
            return None  # a URL or an absolute path: nothing outside the folder is read, nothing fetched
        mime = IMAGE_TYPES.get(Path(src).suffix.lower())
        path = self.folder / src
        try:
            if mime is None or not path.resolve().is_relative_to(self.folder.resolve()) or not path.is_file():
                return None
            return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError:
            return None

    # ------------------------------------------------------------ inline

    def inline(self, text: str) -> str:
        """`code`, **bold** and ![images](name.png) in escaped text."""
        out, pos = [], 0
        for m in _INLINE.finditer(text):
            out.append(html.escape(text[pos:m.start()]))
            if m.group(1):
                out.append(f"<code>{html.escape(m.group(2).strip())}</code>")
            elif m.group(3) is not None:
                out.append(f"<strong>{self.inline(m.group(3))}</strong>")
            else:
                out.append(self._image(m.group(4), m.group(5)))
            pos = m.end()
        out.append(html.escape(text[pos:]))
        return "".join(out)


def _cells(row: str) -> list[str]:
    """A pipe-table row's cells (a "\\|" is a pipe inside a cell)."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


CSS = """
:root { --fg: #1d2330; --muted: #5b6474; --line: #d8dde6; --bg: #ffffff; --side: #f4f6f9; --accent: #2456a6;
  --head: #eef1f6; --stripe: #fafbfc; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg); display: grid; grid-template-columns: 15rem minmax(0, 1fr);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
nav#sections { position: sticky; top: 0; height: 100vh; overflow-y: auto; background: var(--side);
  border-right: 1px solid var(--line); padding: 1rem 0.75rem; font-size: 0.9rem; }
nav .nav-title { margin: 0 0 0.5rem; font-weight: 600; color: var(--muted); text-transform: uppercase;
  font-size: 0.75rem; letter-spacing: 0.05em; }
nav ul { list-style: none; margin: 0; padding: 0; }
nav li { margin: 0.15rem 0; }
nav ul.sub { padding-left: 0.8rem; font-size: 0.85rem; }
nav a { color: var(--fg); text-decoration: none; display: block; padding: 0.15rem 0.4rem; border-radius: 4px; }
nav a:hover, nav a.current { background: #e2e8f2; color: var(--accent); }
main { min-width: 0; max-width: 78rem; padding: 1.5rem 2rem 4rem; }
h1 { font-size: 1.6rem; margin: 0 0 1rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 0.75rem; padding-bottom: 0.3rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05rem; margin: 1.5rem 0 0.5rem; }
h1, h2, h3 { scroll-margin-top: 0.75rem; }
a.anchor { margin-left: 0.4rem; color: transparent; text-decoration: none; font-weight: 400; }
h1:hover a.anchor, h2:hover a.anchor, h3:hover a.anchor { color: var(--muted); }
p, li { max-width: 62rem; }
ul { padding-left: 1.3rem; }
code { font: 0.85em/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--head);
  padding: 0.05em 0.3em; border-radius: 3px; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; max-width: 100%; margin: 0.75rem 0 1rem; border: 1px solid var(--line); border-radius: 6px; }
.table-wrap:focus { outline: 2px solid var(--accent); outline-offset: 1px; }
table { border-collapse: collapse; font-size: 0.85rem; font-variant-numeric: tabular-nums; }
th, td { padding: 0.3rem 0.6rem; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
td { white-space: nowrap; }
tbody tr:nth-child(even) { background: var(--stripe); }
tbody tr:hover { background: #eef4ff; }
td.long { white-space: normal; min-width: 20rem; max-width: 36rem; }
th { background: var(--head); padding: 0; vertical-align: bottom; max-width: 12rem; }
th button { all: unset; box-sizing: border-box; display: block; width: 100%; padding: 0.35rem 1.3rem 0.35rem 0.6rem;
  cursor: pointer; font-weight: 600; position: relative; min-width: 4rem; }
th button:focus-visible { outline: 2px solid var(--accent); outline-offset: -2px; }
th button::after { content: "\\2195"; position: absolute; right: 0.35rem; bottom: 0.35rem; color: #a4acba; font-size: 0.8em; }
th[aria-sort="ascending"] button::after { content: "\\25B2"; color: var(--accent); }
th[aria-sort="descending"] button::after { content: "\\25BC"; color: var(--accent); }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
figcaption { color: var(--muted); font-size: 0.85rem; }
.missing { display: inline-block; padding: 0.5rem 0.75rem; border: 1px dashed #c0392b; color: #922b21;
  background: #fdf2f0; border-radius: 6px; }
@media (max-width: 50rem) {
  body { display: block; }
  nav#sections { position: static; height: auto; border-right: 0; border-bottom: 1px solid var(--line); }
  main { padding: 1rem; }
}
@media print { nav#sections { display: none; } body { display: block; } .table-wrap { overflow: visible; } }
"""

SCRIPT = r"""
"use strict";
(function () {
  // A cell's sort key: [0, number] for a leading number ("1.11x", "12.3%", "0.53 / 0.61", "1e-05"),
  // [1, text] for other text, [2] for "-" and empty (last in either direction).
  var NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?/i;
  function key(cell) {
    var t = cell.textContent.trim().replace(/\u2212/g, "-");
    if (t === "" || t === "-" || t === "\u2013" || t === "\u2014") return [2, 0];
    var m = NUMBER.exec(t.replace(/,/g, ""));
    return m ? [0, parseFloat(m[0])] : [1, t.toLowerCase()];
  }
  function compare(a, b, dir) {
    if (a[0] !== b[0]) return a[0] - b[0];
    if (a[0] === 2) return 0;
    if (a[0] === 0) return dir * (a[1] - b[1]);
    return dir * a[1].localeCompare(b[1], undefined, {numeric: true});
  }
  function sortBy(table, th) {
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    table.querySelectorAll("thead th").forEach(function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.map.call(body.rows, function (row, i) {
      return {row: row, key: key(row.cells[col] || row), i: i};
    });
    rows.sort(function (a, b) { return compare(a.key, b.key, dir) || a.i - b.i; });
    rows.forEach(function (r) { body.appendChild(r.row); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th) {
      th.querySelector("button").addEventListener("click", function () { sortBy(table, th); });
    });
  });
  // The sidebar marks the section in view.
  var links = {};
  document.querySelectorAll("nav#sections a").forEach(function (a) { links[a.getAttribute("href").slice(1)] = a; });
  if ("IntersectionObserver" in window) {
    var seen = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (!e.isIntersecting || !links[e.target.id]) return;
        Object.keys(links).forEach(function (k) { links[k].classList.remove("current"); });
        links[e.target.id].classList.add("current");
      });
    }, {rootMargin: "0px 0px -70% 0px"});
    document.querySelectorAll("main h2[id], main h3[id]").forEach(function (h) { seen.observe(h); });
  }
})();
"""
