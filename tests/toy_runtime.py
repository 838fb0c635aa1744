"""The smallest complete runtime over the shared loop (docs/DESIGN.md shows it): a bigram model
over bytes whose "KV cache" is the list of tokens it has seen. One adapter, one runtime class, one
registry line (the tests add it with runtimes.register); the loop does drafting, verification,
rollback, timing, rounds and target_entropy."""

from __future__ import annotations

import torch

from spec_harness.models import chat
from spec_harness.runtimes.base import LoopRuntime
from spec_harness.runtimes.loop import Model

EOS = 256


class Bigram(Model):
    """Next-token logits = the row of a fixed table for the last token seen."""

    def __init__(self, table: torch.Tensor):  # [V, V]
        self.table, self.vocab, self.seen = table, table.shape[1], []

    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        self.seen += ids
        return self.table[self.seen[-n_logits:]]  # [n_logits, V]

    def crop(self, length: int) -> None:
        del self.seen[length:]

    def reset(self) -> None:
        self.seen = []

    def __len__(self) -> int:
        return len(self.seen)


class ToyRuntime(LoopRuntime):
    name = "toy"
    context_length = 1 << 20

    def load(self, pair) -> None:
        g = torch.Generator().manual_seed(0)
        table = 3 * torch.randn(EOS + 1, EOS + 1, generator=g)
        self.target = Bigram(table)
        self.draft = Bigram(table + torch.randn(EOS + 1, EOS + 1, generator=g))  # agrees often, not always
        self.eos_id = EOS

    def encode(self, prompt) -> list[int]:
        return list(chat.plain(prompt).encode())

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < EOS).decode(errors="replace")


class Probe(ToyRuntime):
    """The toy runtime, calling `watch()` at each generation and keeping what it returns in `seen`
    (a test sets both: e.g. the states of other runtimes' processes while this one measures)."""

    name = "probe"
    watch = staticmethod(lambda: None)
    seen: list = []

    def generate_baseline(self, prompt_ids, gen):
        self.seen.append(self.watch())
        return super().generate_baseline(prompt_ids, gen)

    def generate_speculative(self, prompt_ids, gen):
        self.seen.append(self.watch())
        return super().generate_speculative(prompt_ids, gen)


class Recording(ToyRuntime):
    """The toy runtime, keeping every input it is asked to continue (tests/test_conversation.py)."""

    name = "recording"
    inputs: list[list[int]] = []

    def generate_baseline(self, prompt_ids, gen):
        self.inputs.append(list(prompt_ids))
        return super().generate_baseline(prompt_ids, gen)

    def generate_speculative(self, prompt_ids, gen):
        self.inputs.append(list(prompt_ids))
        return super().generate_speculative(prompt_ids, gen)


class FailsOnGhi(Recording):
    """The recording toy, failing every baseline of an input that ends in "ghi"."""

    def generate_baseline(self, prompt_ids, gen):
        if bytes(prompt_ids).endswith(b"ghi"):
            raise RuntimeError("out of memory (for the test)")
        return super().generate_baseline(prompt_ids, gen)
