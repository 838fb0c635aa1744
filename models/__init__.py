"""Models: pair presets, tiny deterministic pairs for tests, tokenizer compatibility checks.

What it does not do: run models (runtimes/) or measure anything (harness/).
"""
