"""Every in-process runtime that runs the tiny pair books a generation's work to its phases
(tests/phases.py), baseline and speculative, greedy and sampled."""

from __future__ import annotations

import pytest

from spec_harness import runtimes
from spec_harness.core.config import GenerationSettings, RuntimeSettings, SamplingParams
from tests.extras import installed
from tests.phases import check_phases

IN_PROCESS = [n for n in runtimes.names() if not getattr(runtimes.get(n), "serves_concurrently", False) and installed(n)]


@pytest.mark.parametrize("name", IN_PROCESS)
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_phases_hold_what_was_done_in_them(name, temperature, tiny_gguf):
    rt = runtimes.get(name)(RuntimeSettings(n_threads=1, n_ctx=512))
    rt.load(tiny_gguf)
    try:
        ids = rt.encode("The quick brown fox")
        gen = GenerationSettings(SamplingParams(temperature=temperature, top_k=50, top_p=0.9), gamma=3, max_new_tokens=20,
                                 ignore_eos=True)
        check_phases(lambda: rt.generate_baseline(ids, gen), speculative=False)
        check_phases(lambda: rt.generate_speculative(ids, gen), speculative=True)
    finally:
        rt.close()
