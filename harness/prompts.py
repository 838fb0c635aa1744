"""Built-in prompt sets by category, and user prompt files (JSONL with id, category, prompt).

The first six categories span the content effect the first seed found (structured text drafts
well, open-ended text does not): factual summaries, open-ended opinion, code, rewriting/translation,
math reasoning, and extractive/repetitive text where drafting should shine.

The next six follow Spec-Bench's task categories (Xia et al. 2024: multi-turn conversation,
translation, summarization, question answering, math reasoning, retrieval-augmented generation):
`conversation` (one user message holding an earlier exchange and a follow-up that reuses it),
`translation`, `summarization`, `qa`, `math-reasoning` and `rag`. `summarization` (passages of
about 300 words) and `rag` (three numbered documents, or a 40-line function to edit) carry long
inputs whose phrases the answer copies, where prompt-lookup drafting should shine. The texts are
data, one JSONL file per category in harness/prompt_sets ({id, category, prompt}), read by the loader that reads a
user's --prompts file. The set
`spec-bench` names these six, `all` every category. Every prompt is written for this project
(none is taken from Spec-Bench, MT-bench or another dataset); each is under 700 SmolLM2 tokens
(550 with the chat template). The long ones (1,600 to 2,100 bytes) exceed the 1,024-position context
of the byte-level tiny test pairs, where the runner refuses them before generating.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from spec_harness.core.errors import HarnessError


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    text: str


CATEGORIES = ("factual", "open-ended", "code", "rewrite", "math", "extractive",  # the first seed's content effect
              "conversation", "translation", "summarization", "qa", "math-reasoning", "rag")  # Spec-Bench's tasks
SPEC_BENCH = ("conversation", "translation", "summarization", "qa", "math-reasoning", "rag")
SETS = {"all": CATEGORIES, "spec-bench": SPEC_BENCH}  # names that expand to several categories
DEFAULT_PROMPTS = "factual"  # what `harness run` measures when --prompts is not given
PROMPT_SETS = Path(__file__).with_name("prompt_sets")  # one JSONL file per category, read as a user's file is


def builtin(category: str) -> list[Prompt]:
    return _load_jsonl(PROMPT_SETS / f"{category}.jsonl")


def load_prompts(spec: str) -> list[Prompt]:
    """'factual,code', 'spec-bench', 'all', or a path to a JSONL file of {id, category, prompt} objects.

    Set names (SETS) expand to their categories; a category named twice is measured once."""
    p = Path(spec)
    if spec.endswith(".jsonl") or p.is_file():
        return _load_jsonl(p)
    given = [s.strip() for s in spec.split(",") if s.strip()]
    names = list(dict.fromkeys(c for n in given for c in SETS.get(n, (n,))))
    bad = [n for n in names if n not in CATEGORIES]
    if bad or not names:
        raise HarnessError(
            f"unknown prompt set {', '.join(bad) or spec!r}; choose from: {', '.join(CATEGORIES)}, "
            f"{', '.join(SETS)}, or a .jsonl file"
        )
    return [pr for n in names for pr in builtin(n)]


def _load_jsonl(path: Path) -> list[Prompt]:
    if not path.is_file():
        raise HarnessError(f"prompt file not found: {path}")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            text = obj["prompt"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise HarnessError(f"{path}:{n}: expected a JSON object with a \"prompt\" field (and optional id, category)") from None
        out.append(Prompt(str(obj.get("id", f"{path.stem}-{n}")), str(obj.get("category", "custom")), str(text)))
    if not out:
        raise HarnessError(f"prompt file {path} holds no prompts")
    return out
