"""c_flops for the pairs named in run.json, per drafter (draft model, prompt lookup, EAGLE-3 head),
looked up once per pair, with a note when it cannot be.

The target and draft of a pair are tried as Hugging Face configs (folder or id) first, then as
GGUF files; a pair whose configs are not available locally (or offline) gets no c_flops and one
note saying why. What it does not do: any formula (core/theory.py) or reading model files (models/shape.py).
"""

from __future__ import annotations

from typing import Optional, Union

from spec_harness.core import drafters, theory
from spec_harness.core.drafters import DrafterSpec
from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.core.errors import HarnessError
from spec_harness.models import shape


class CFlops:
    """Callable: pair refs (run.json's pair dict) -> c_flops or None; collects notes."""

    def __init__(self):
        self._cache: dict[tuple, Optional[float]] = {}
        self.notes: list[str] = []
        self.found: dict[str, float] = {}  # pair name -> c_flops, for the report's notes

    def __call__(self, refs: Optional[dict], drafter: Union[str, DrafterSpec, None] = None) -> Optional[float]:
        """The pair's c_flops for a drafter: the draft model's (model), 0 for prompt lookup (no
        model), an EAGLE-3 head's (fc, its layer and its draft-vocabulary head, models/eagle3.py)."""
        if not refs:
            return None
        d = drafters.of(drafter)  # a loaded row's drafter (text where a caller hands it)
        if d.cost == drafters.NOTHING:
            return 0.0
        if d.cost == drafters.OWN_ROUND and not isinstance(d, Eagle3Spec):
            return None  # a model of its own whose FLOPs this module does not know
        head = d.folder_in(refs) if isinstance(d, Eagle3Spec) else None
        key = tuple(refs.get(k) for k in ("target", "draft", "target_gguf", "draft_gguf")) + (d.cost, head)
        if key not in self._cache:
            self._cache[key] = self._head(refs, head) if isinstance(d, Eagle3Spec) else self._lookup(refs)
        return self._cache[key]

    def _head(self, refs: dict, head: Optional[str]) -> Optional[float]:
        from spec_harness.models.eagle3 import read_config

        name = refs.get("name", "?")
        try:
            if head is None:
                raise HarnessError("the pair has no EAGLE-3 head")
            cfg = read_config(head)
            target = next(shape.flops_for(t, "target") for t in (refs.get("target"), refs.get("target_gguf")) if t)
        except (HarnessError, StopIteration) as e:
            self.notes.append(f"c_flops omitted for pair {name} with its EAGLE-3 head: {e or 'no target named'}")
            return None
        c = 2 * cfg.matmul_params() / target.flops()
        self.found[f"{name} (EAGLE-3 head)"] = c
        return c

    def _lookup(self, refs: dict) -> Optional[float]:
        name = refs.get("name", "?")
        reason = "run.json names no target/draft pair"
        for t, d in ((refs.get("target"), refs.get("draft")), (refs.get("target_gguf"), refs.get("draft_gguf"))):
            if not (t and d):
                continue
            try:
                c = theory.c_flops(shape.flops_for(t, "target"), shape.flops_for(d, "draft"))
            except HarnessError as e:
                reason = str(e)
                continue
            self.found[name] = c
            return c
        self.notes.append(f"c_flops omitted for pair {name}: {reason}")
        return None
