"""`--drafter eagle3[:PATH]`: an EAGLE-3 head proposes tokens from the target's hidden states (the
pair's own head, or the head folder PATH); its cost is its own round beside the target's.

What it does not own: the head's files and checks (models/eagle3.py), its loading and drafting
(runtimes/eagle3.py), the servers' own heads (each server runtime's file).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from spec_harness.core.drafters import OWN_ROUND, DrafterSpec


@dataclass(frozen=True)
class Eagle3Spec(DrafterSpec):
    name = "eagle3"
    syntax = "eagle3[:PATH]"
    help = "an EAGLE-3 head reading the target's hidden states: the pair's own, or the head folder PATH"
    title = "EAGLE-3 drafting"
    cost = OWN_ROUND
    loop = "spec_harness.runtimes.eagle3:build"
    loop_check = "spec_harness.runtimes.eagle3:why_not"
    check = "spec_harness.models.eagle3:check_drafter"

    path: Optional[str] = None  # the head's folder (None: the pair's own head)

    @classmethod
    def from_args(cls, args: str) -> Eagle3Spec:
        return cls(args or None)

    def args(self) -> str:
        return self.path or ""

    def label(self) -> str:
        """eagle3, or eagle3:NAME by the head's folder (its parent's too where the folder is `head`)."""
        if not self.path:
            return self.name
        p = Path(self.path)
        return f"{self.name}:{p.parent.name + '/' if p.name in ('head', '') else ''}{p.name}"

    def folder(self, pair_head: Optional[str]) -> Optional[str]:
        """The head's folder: PATH, else the pair's own head."""
        return self.path or pair_head

    def folder_in(self, refs: dict) -> Optional[str]:
        """The head's folder for a pair as run.json names it (PairSpec's fields)."""
        return self.folder(refs.get("eagle3"))

    def available(self, pair) -> bool:
        return self.folder(pair.eagle3) is not None
