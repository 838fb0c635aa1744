"""Reports: tables (markdown, CSV, JSON) and PNG plots from results.jsonl (`harness report`).

load.py finds and reads results, tables.py groups rows into cells and computes nothing itself
(harness.metrics and harness.theory do), ceiling.py finds c_flops for the pairs, plots.py draws,
explain.py decomposes each speedup into factors (`harness explain`), markdown.py writes the headline
and tables, build.py writes the files.
"""

from reports.build import write_report

__all__ = ["write_report"]
