"""The ground floor: the vocabulary every other package of the harness speaks.

It owns the settings (sampling, generation, runtime, the draft/target pair) and their defaults,
the user-facing errors, the phase timer and the round/generation records, the sampling and
acceptance rule, the metrics, the theory formulas, the results schema (field names, writing and
reading rows, run.json) and what is known of the machine (CPU name, physical cores).

It imports no other package of this project (models/, runtimes/, reports/, harness/ all stand on
it; tests/test_layers.py checks the rule). What it does not own: model files (models/), running
models (runtimes/), tables and plots (reports/), the command line and the run loop (harness/).
See docs/DESIGN.md.
"""
