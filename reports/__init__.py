"""Reports: tables (markdown, CSV, JSON) and PNG plots from results.jsonl (`harness report`).

runs.py finds and reads results, tables.py groups rows into cells and computes nothing itself
(core.metrics and core.theory do), ceiling.py finds c_flops for the pairs (models/shape.py),
plots.py draws, explain.py decomposes each speedup into factors (`harness explain`), roofline.py
sets each step against this machine's limits, markdown.py writes each section's words and tables,
sections.py lays the sections out, figures.py the figures of each run folder, build.py writes the
files. It stands on core/ and models/; it runs no model.
"""

from spec_harness.reports.build import write_report

__all__ = ["write_report"]
