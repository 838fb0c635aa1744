"""The front end: the `harness` command line (cli.py and its subcommand modules), the run loop over
runtimes, pairs, settings, prompts and repeats (runner.py, for `run` and `sweep`; run_config.py what
it measures, under_load.py its cells under load, rows.py its rows and console lines), the summary
table it prints, the built-in prompt sets, and `harness bench`.

It stands on every other package and is imported by none of them. What it does not do: define
settings, metrics or the results schema (core/), know model files (models/), run a model
(runtimes/) or build reports (reports/). See docs/DESIGN.md.
"""

__version__ = "0.1.0"
