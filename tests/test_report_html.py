"""report.html (reports/html.py): the converter on hand-written markdown (escaping, lists, tables,
images inlined or noted missing), and a real report of the tiny pair opened over file:// in
Debian's headless Chromium: no console error, every image drawn, every nav link reaching its
section, a header click sorting its table by number, nothing referenced outside the file; and a
synthetic report with the output-thirds and per-turn sections (tests/test_report_turns.py) there too."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from spec_harness.reports.html import page, write_html

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL = "apt-get install chromium chromium-driver"
# As root on a machine with no network: no sandbox, and no background connections (refused ones log errors)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900"]
# A 1x1 PNG
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)

MD = """# Report <of> "things"

- **Fastest: a & b** (`x<y>`), 1.11x
- plain <b>not bold</b>
  and its wrapped line

## Speed & more

| cell | speedup | share |
|---|---|---|
| torch g2 | 10.0x | 12.3% |
| torch g3 | 9.5x | - |
| <script>alert(1)</script> |  | 100.0% |

Text with **bold `code`** and a pipe \\| here.

## Plots

### Drawn

![Drawn plot](drawn.png)

### Missing

![Missing plot](missing.png)

![Outside](https://example.org/x.png)
"""


def test_converter_escapes_and_builds_the_subset(tmp_path):
    (tmp_path / "drawn.png").write_bytes(PIXEL)
    (tmp_path / "report.md").write_text(MD)
    out = write_html(tmp_path / "report.md")
    assert out == tmp_path / "report.html"
    doc = out.read_text()
    assert "<title>Report &lt;of&gt; &quot;things&quot;</title>" in doc
    assert '<h1 id="report-of-things">Report &lt;of&gt; &quot;things&quot;' in doc
    assert "<li><strong>Fastest: a &amp; b</strong> (<code>x&lt;y&gt;</code>), 1.11x</li>" in doc
    assert "<li>plain &lt;b&gt;not bold&lt;/b&gt; and its wrapped line</li>" in doc
    assert "<script>alert" not in doc and "&lt;script&gt;alert(1)&lt;/script&gt;" in doc
    body = re.search(r"<tbody>(.*?)</tbody>", doc, re.S).group(1)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", body)]
    assert rows == [["torch g2", "10.0x", "12.3%"], ["torch g3", "9.5x", "-"],
                    ["&lt;script&gt;alert(1)&lt;/script&gt;", "", "100.0%"]]
    assert [re.sub("<.*?>", "", h) for h in re.findall(r"<th .*?</th>", doc)] == ["cell", "speedup", "share"]
    assert '<div class="table-wrap"' in doc and '<table class="sortable">' in doc
    assert "<p>Text with <strong>bold <code>code</code></strong> and a pipe \\| here.</p>" in doc
    # the drawn image inlined, byte for byte; the missing and the remote ones are visible notes
    assert f'<img src="data:image/png;base64,{base64.b64encode(PIXEL).decode()}" alt="Drawn plot">' in doc
    assert doc.count("<img ") == 1 and doc.count('class="missing"') == 2
    assert "Image not available: Missing plot: <code>missing.png</code>" in doc
    assert "<code>https://example.org/x.png</code>" in doc and not EXTERNAL.search(doc)
    # the sidebar: the ## headings with the ### under them, each anchor an id of the page
    nav = re.search(r"<nav.*?</nav>", doc, re.S).group(0)
    assert re.findall(r'href="#([^"]+)">([^<]*)<', nav) == [("speed-more", "Speed &amp; more"), ("plots", "Plots"),
                                                           ("drawn", "Drawn"), ("missing", "Missing")]
    assert all(f'id="{a}"' in doc for a in re.findall(r'href="#([^"]+)"', doc))


def test_converter_keeps_repeated_headings_apart_and_reads_nothing_outside_the_folder(tmp_path):
    (tmp_path / "secret.png").write_bytes(PIXEL)
    inner = tmp_path / "report"
    inner.mkdir()
    doc = page("## Notes\n\n## Notes\n\n![up](../secret.png)\n\n| a |\n| --- |\n| 1 | 2 |\n", inner)
    assert 'id="notes"' in doc and 'id="notes-2"' in doc
    assert "<img" not in doc and "<code>../secret.png</code>" in doc
    assert "<tr><td>1</td><td>2</td></tr>" in doc and doc.count("<th ") == 2  # a short header row padded


# ---------------------------------------------------------------- in a real browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        pytest.fail(f"report.html is tested in Debian's headless Chromium, and {' and '.join(missing)} "
                    f"{'is' if len(missing) == 1 else 'are'} missing: run `{INSTALL}` (as root; scripts/setup.sh does)",
                    pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver's path given: selenium runs no selenium-manager and downloads nothing
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory, tiny_pair):
    """A report of a real run: the torch runtime on the tiny pair, two prompt categories, gamma 2 and 3."""
    from spec_harness.harness.prompts import load_prompts
    from spec_harness.harness.run_config import RunConfig
    from spec_harness.harness.runner import Runner
    from spec_harness.reports import write_report

    out = tmp_path_factory.mktemp("html") / "run"
    prompts = load_prompts("factual")[:2] + load_prompts("code")[:2]
    rows = Runner(RunConfig(["torch"], [tiny_pair], prompts, gammas=[2, 3], max_new_tokens=[12], warmup=0, out=out)).run()
    assert rows and not any(r["error"] for r in rows)
    md = write_report([out])
    return md, write_html(md)


def _errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _column(driver, table, col: int) -> list[str]:
    return driver.execute_script("return Array.from(arguments[0].tBodies[0].rows, r => r.cells[arguments[1]].textContent)",
                                 table, col)


NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?", re.I)


def _numeric_columns(driver) -> list:
    """(table, column) of the columns of 3 rows or more that hold at least two different numbers and
    nothing but numbers, "-" and empty cells; those with a "-" first."""
    from selenium.webdriver.common.by import By

    found = []
    for table in driver.find_elements(By.CSS_SELECTOR, "table.sortable"):
        for col in range(len(table.find_elements(By.CSS_SELECTOR, "thead th"))):
            values = _column(driver, table, col)
            nums = [v for v in values if v.strip() not in ("", "-")]
            if len(values) >= 3 and all(NUMBER.match(v) for v in nums) and len(set(nums)) >= 2:
                found.append((len(nums) == len(values), table, col))
    return [(t, c) for _, t, c in sorted(found, key=lambda x: x[0])]


def _sorted_as_numbers(values: list[str], reverse: bool = False) -> list[str]:
    """Expected order: by the leading number, "-" and empty cells last either way."""
    blank = [v for v in values if v.strip() in ("", "-")]
    nums = [v for v in values if v.strip() not in ("", "-")]
    return sorted(nums, key=lambda v: float(NUMBER.match(v).group(0)), reverse=reverse) + blank


@pytest.mark.slow  # about 7 s: the run, Chromium's start and the page
def test_report_html_in_chromium(browser, tiny_report):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    md, html_file = tiny_report
    doc = html_file.read_text()
    assert not EXTERNAL.search(doc) and "url(" not in doc
    browser.get(html_file.as_uri())
    assert browser.title == "Speculative decoding report"
    assert _errors(browser) == []

    # every picture report.md names is drawn from its data: URI
    images = browser.execute_script(
        "return Array.from(document.images, i => [i.alt, i.complete && i.naturalWidth > 0, i.src.slice(0, 22)])")
    named = re.findall(r"!\[([^\]]*)\]\(([^)]+)\)", md.read_text())
    assert named and sorted(a for a, _ in named) == sorted(a for a, _, _ in images)
    assert all(ok and src == "data:image/png;base64," for _, ok, src in images), images

    # nothing on the page points outside it
    refs = browser.execute_script(
        "return Array.from(document.querySelectorAll('[src],[href]'), e => e.getAttribute('src') || e.getAttribute('href'))")
    assert refs and all(r.startswith(("#", "data:")) for r in refs), [r for r in refs if not r.startswith(("#", "data:"))]

    # the sidebar lists every ## section, and each link reaches its heading
    nav = browser.execute_script(
        "return Array.from(document.querySelectorAll('nav#sections a'), a => [a.getAttribute('href'), a.textContent])")
    sections = [line[3:] for line in md.read_text().splitlines() if line.startswith("## ")]
    assert sections and set(sections) <= {text for _, text in nav}
    for href, _ in nav:
        assert href.startswith("#") and browser.execute_script("return !!document.getElementById(arguments[0])", href[1:]), href
    last = browser.find_elements(By.CSS_SELECTOR, "nav#sections > ul > li > a")[-1]
    target = last.get_attribute("hash")[1:]
    last.click()
    WebDriverWait(browser, 5).until(lambda d: d.execute_script(
        "var r = document.getElementById(arguments[0]).getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight",
        target))
    assert browser.execute_script("return location.hash") == "#" + target

    # a click on a numeric header sorts its table by those numbers, the rows moving whole; again, the other way
    columns = _numeric_columns(browser)
    assert columns, "no table with 3 rows and a numeric column"
    for table, col in columns[:3]:
        heads = len(table.find_elements(By.CSS_SELECTOR, "thead th"))
        rows_before = sorted(zip(*(_column(browser, table, i) for i in range(heads))))
        button = table.find_elements(By.CSS_SELECTOR, "thead th button")[col]
        values = _column(browser, table, col)
        button.click()
        assert _column(browser, table, col) == _sorted_as_numbers(values), (button.text, values)
        button.click()
        assert _column(browser, table, col) == _sorted_as_numbers(values, reverse=True), (button.text, values)
        assert table.find_elements(By.CSS_SELECTOR, "thead th")[col].get_attribute("aria-sort") == "descending"
        assert sorted(zip(*(_column(browser, table, i) for i in range(heads)))) == rows_before
    assert _errors(browser) == []


def test_sort_order_of_numbers_suffixes_and_blanks_in_chromium(browser, tmp_path):
    """Numbers by value whatever their suffix ("9.5x" before "10.0x"), text after them, "-" and empty last."""
    from selenium.webdriver.common.by import By

    values = ["10.0x", "-", "9.5x", "", "1e-05", "0.53 / 0.61", "100%", "12.3%", "n/a", "-2.5"]
    md = "# t\n\n## s\n\n| v | i |\n|---|---|\n" + "".join(f"| {v} | {i} |\n" for i, v in enumerate(values))
    (tmp_path / "report.md").write_text(md)
    browser.get(write_html(tmp_path / "report.md").as_uri())
    table = browser.find_element(By.CSS_SELECTOR, "table.sortable")
    button = table.find_element(By.CSS_SELECTOR, "thead th button")
    button.click()
    assert _column(browser, table, 0) == ["-2.5", "1e-05", "0.53 / 0.61", "9.5x", "10.0x", "12.3%", "100%", "n/a", "-", ""]
    button.click()
    assert _column(browser, table, 0) == ["100%", "12.3%", "10.0x", "9.5x", "0.53 / 0.61", "1e-05", "-2.5", "n/a", "-", ""]
    assert _errors(browser) == []



def test_report_with_thirds_and_turns_in_chromium(browser, tmp_path):
    """A report whose rows have long outputs and two turns (tests/test_report_turns.py): both sections
    on the page with no console error, in the sidebar, and their tables sorting by number."""
    from selenium.webdriver.common.by import By

    from spec_harness.reports import write_report
    from tests import synthetic
    from tests.test_report_turns import two_turns

    md = write_report([synthetic.write_run(tmp_path / "run", two_turns())])
    browser.get((md.parent / "report.html").as_uri())
    assert _errors(browser) == []
    nav = browser.execute_script("return Array.from(document.querySelectorAll('nav#sections a'), a => a.getAttribute('href'))")
    for anchor in ("#acceptance-along-the-output", "#acceptance-and-speedup-per-turn"):
        assert anchor in nav
        table = browser.execute_script(
            "var e = document.getElementById(arguments[0]); while (e && !(e.querySelector && e.querySelector('table'))) "
            "e = e.nextElementSibling; return e && e.querySelector('table')", anchor[1:])
        heads = [h.text for h in table.find_elements(By.CSS_SELECTOR, "thead th")]
        col = heads.index("alpha_hat")
        values = _column(browser, table, col)
        table.find_elements(By.CSS_SELECTOR, "thead th button")[col].click()
        assert _column(browser, table, col) == _sorted_as_numbers(values) and len(set(values)) > 1
    assert _errors(browser) == []
