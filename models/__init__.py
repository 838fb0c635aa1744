"""Model files and what is known of them: presets, the Hub cache and downloads, loading
transformers models (GGUF conversion included), a model's shape and FLOPs, tokenizer and GGUF
vocabulary checks, the one GGUF writer, the tiny deterministic test pairs, the embedded default
draft and how it was distilled, and teacher-forced agreement of a pair.

It stands on core/ only. What it does not do: run a speculative loop or time anything
(runtimes/), or parse flags (harness/). See docs/DESIGN.md.
"""
