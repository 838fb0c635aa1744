"""Shared fixtures: the tiny deterministic pairs (built once per machine, cached) and a loaded
torch runtime over them. Everything runs on CPU with no network."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_configure(config):
    from tests.procs import tag_session

    tag_session()  # the servers this process starts are told from other workers' (tests/procs.py)
    # Tiny models gain nothing from threads, and on a loaded 2-core machine OpenMP spin-waiting
    # makes multi-threaded matmuls many times slower. Benchmarks set their own thread counts.
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_pair():
    from spec_harness.models.tiny import ensure_pair
    from spec_harness.core.config import PairSpec

    t, d = ensure_pair("tiny")
    return PairSpec("tiny", str(t), str(d))


@pytest.fixture(scope="session")
def tiny_gguf(tiny_pair):
    """The tiny pair with its f32 GGUF export, for the llama.cpp runtimes."""
    from spec_harness.core.config import PairSpec
    from spec_harness.models.gguf_writer import ensure_tiny_gguf

    t, d = ensure_tiny_gguf("tiny", "f32")
    return PairSpec("tiny", tiny_pair.target, tiny_pair.draft, str(t), str(d))


@pytest.fixture(scope="session")
def tiny_self(tiny_gguf):
    """The tiny target as its own draft (every draft is accepted)."""
    from spec_harness.core.config import PairSpec

    return PairSpec("tiny+self", tiny_gguf.target, tiny_gguf.target, tiny_gguf.target_gguf, tiny_gguf.target_gguf)


@pytest.fixture(scope="session")
def llama_rt(tiny_gguf):
    """Our llama.cpp loop (runtimes/llamacpp.py) on the tiny f32 GGUF pair: one thread, 512 positions."""
    from spec_harness.core.config import RuntimeSettings
    from spec_harness.runtimes.llamacpp import LlamaCppRuntime

    rt = LlamaCppRuntime(RuntimeSettings(n_threads=1, n_ctx=512))
    rt.load(tiny_gguf)
    yield rt
    rt.close()


@pytest.fixture(scope="session")
def torch_rt(tiny_pair):
    from spec_harness.core.config import RuntimeSettings
    from spec_harness.runtimes.pytorch import TorchRuntime

    rt = TorchRuntime(RuntimeSettings(device="cpu"))
    rt.load(tiny_pair)
    return rt
