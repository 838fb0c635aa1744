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

--prompts also takes a prompt file in any format harness/prompt_formats.py reads (the public sets
as published: MT-Bench, Spec-Bench, SPEED-Bench, ShareGPT) and the name of a public set fetched into
the cache (harness/public_sets.py); `SPEC:N` keeps the first N questions of each category. A
question of several turns becomes one Prompt per turn, in order: turn k holds the user's earlier
turns (`history`), and the runner asks it with the runtime's own earlier answers
(harness/conversation.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from spec_harness.core.config import PROMPT_FILE_MAX_NEW_TOKENS, GenerationSettings, default_of
from spec_harness.core.errors import HarnessError
from spec_harness.harness import public_sets
from spec_harness.harness.prompt_formats import Question, read_questions


@dataclass(frozen=True)
class Prompt:
    """One user turn to answer: turn `turn` (1-based) of question `id`, after the user's `history`."""

    id: str
    category: str
    text: str
    turn: int = 1
    history: tuple[str, ...] = ()  # the user's earlier turns of its conversation, in order
    input_len: Optional[int] = None  # the tokens --input-len built it to (harness/input_len.py); None: as given

    @property
    def key(self) -> str:
        """Unique in a run: the id, the turn after the first, the input length where one was built."""
        turn = f"#{self.turn}" if self.turn > 1 else ""
        return f"{self.id}{turn}" + (f"@{self.input_len}" if self.input_len else "")

    def earlier(self, turn: int) -> Prompt:
        """The prompt of an earlier turn of the same conversation."""
        return Prompt(self.id, self.category, self.history[turn - 1], turn, self.history[:turn - 1])


CATEGORIES = ("factual", "open-ended", "code", "rewrite", "math", "extractive",  # the first seed's content effect
              "conversation", "translation", "summarization", "qa", "math-reasoning", "rag")  # Spec-Bench's tasks
SPEC_BENCH = ("conversation", "translation", "summarization", "qa", "math-reasoning", "rag")
SETS = {"all": CATEGORIES, "spec-bench": SPEC_BENCH}  # names that expand to several categories
DEFAULT_PROMPTS = "factual"  # what `harness run` measures when --prompts is not given
PROMPT_SETS = Path(__file__).with_name("prompt_sets")  # one JSONL file per category, read as a user's file is


def builtin(category: str) -> list[Prompt]:
    return turns_of(read_questions(PROMPT_SETS / f"{category}.jsonl"))


def load_prompts(spec: str) -> list[Prompt]:
    """'factual,code', 'spec-bench', 'all', a prompt file (harness/prompt_formats.py) or a public
    set's name (harness/public_sets.py), each optionally ':N' (the first N questions of each category).

    Set names (SETS) expand to their categories; a category named twice is measured once."""
    spec, per_category = _limit(spec)
    p = Path(spec)
    if p.suffix in (".jsonl", ".json", ".parquet") or p.is_file():
        return turns_of(read_questions(p), per_category)
    if spec in public_sets.SETS:
        return turns_of([q for f in public_sets.cached(spec) for q in read_questions(f)], per_category)
    given = [s.strip() for s in spec.split(",") if s.strip()]
    names = list(dict.fromkeys(c for n in given for c in SETS.get(n, (n,))))
    bad = [n for n in names if n not in CATEGORIES]
    if bad or not names:
        raise HarnessError(
            f"unknown prompt set {', '.join(bad) or spec!r}; choose from: {', '.join(CATEGORIES)}, "
            f"{', '.join(SETS)}, a public set ({', '.join(public_sets.SETS)}; `harness prompts list`) "
            "or a prompt file (.jsonl, .json, .parquet)"
        )
    return turns_of([q for n in names for q in read_questions(PROMPT_SETS / f"{n}.jsonl")], per_category)


def default_length(spec: str) -> int:
    """--max-new-tokens when none is given: the generation default for the built-in sets, longer
    for a prompt file or a public set (core/config.py says why)."""
    head, _ = _limit(spec)
    builtin_only = all(n.strip() in CATEGORIES or n.strip() in SETS for n in head.split(",") if n.strip())
    return default_of(GenerationSettings, "max_new_tokens") if builtin_only else PROMPT_FILE_MAX_NEW_TOKENS


def turns_of(questions: list[Question], per_category: Optional[int] = None) -> list[Prompt]:
    """Each question's turns as Prompts, a question's turns in order; with `per_category`, the
    first that many questions of each category."""
    seen: dict[str, int] = {}
    out = []
    for q in questions:
        seen[q.category] = seen.get(q.category, 0) + 1
        if per_category is None or seen[q.category] <= per_category:
            out += [Prompt(q.id, q.category, text, k, q.turns[:k - 1]) for k, text in enumerate(q.turns, 1)]
    twice = next((k for k, n in Counter(p.key for p in out).items() if n > 1), None)
    if twice is not None:
        raise HarnessError(f"prompt id {twice.split('#')[0]} appears twice in --prompts: give each question its own id")
    return out


def _limit(spec: str) -> tuple[str, Optional[int]]:
    """'SPEC:N' -> (SPEC, N); 'SPEC' -> (SPEC, None)."""
    head, sep, tail = spec.rpartition(":")
    if not sep or not tail.isdigit():
        return spec, None
    if int(tail) < 1:
        raise HarnessError(f"--prompts {spec}: the number of questions per category must be at least 1")
    return head, int(tail)
