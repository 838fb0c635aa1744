"""`--drafter model`: the pair's draft model proposes each token from its own distribution q.

What it does not own: the draft model's loading (runtimes/) or its files (models/).
"""

from __future__ import annotations

from dataclasses import dataclass

from spec_harness.core.drafters import DRAFT_MODEL, DrafterSpec


@dataclass(frozen=True)
class DraftModelSpec(DrafterSpec):
    name = "model"
    syntax = "model"
    help = "the pair's draft model"
    title = "draft model"
    cost = DRAFT_MODEL
    loop = "spec_harness.runtimes.loop:draft_model"
