"""Built-in prompt sets by category, and user prompt files (JSONL with id, category, prompt).

Categories span the content effect the first seed found (structured text drafts well, open-ended
text does not): factual summaries, open-ended opinion, code, rewriting/translation, math
reasoning, and extractive/repetitive text where drafting should shine. Written for this project.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core.errors import HarnessError


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    text: str


_PASSAGE = (
    "The water cycle moves water between the oceans, the air and the land. Heat from the sun "
    "evaporates water from seas and lakes; the vapour rises, cools and condenses into clouds; "
    "the clouds release rain or snow; and rivers and groundwater carry the water back to the sea."
)

BUILTIN: dict[str, list[str]] = {
    "factual": [
        "Summarize how photosynthesis works in plants, step by step, covering light absorption, "
        "the light-dependent reactions, the Calvin cycle and the role of chlorophyll.",
        "Explain how a refrigerator keeps food cold. Describe the compressor, the condenser, the "
        "expansion valve and the evaporator in order.",
        "Give a structured overview of the human circulatory system: the heart's four chambers, "
        "arteries, veins, capillaries, and how oxygen reaches the cells.",
        "Summarize the main causes and effects of the Industrial Revolution in Britain in a short "
        "list of key points.",
        "Describe how vaccines train the immune system, covering antigens, antibodies, memory "
        "cells and why booster doses are sometimes needed.",
    ],
    "open-ended": [
        "What do you think makes a city a good place to live? Share your opinion and reasons.",
        "Is it better to be a specialist or a generalist in one's career? Argue for your view.",
        "Write a short reflection on why people enjoy stories that make them sad.",
        "If you could redesign the school day from scratch, what would you change and why?",
        "Some say technology makes us lonelier. Do you agree? Discuss freely.",
    ],
    "code": [
        "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
        "Write a Python function that checks whether a string is a palindrome, ignoring case and spaces.",
        "Write a SQL query that returns the five customers with the highest total order amount from "
        "tables customers(id, name) and orders(id, customer_id, amount).",
        "Write a JavaScript function that removes duplicate values from an array and keeps their order.",
        "Write a Python class Stack with push, pop, peek and is_empty methods.",
    ],
    "rewrite": [
        "Translate into French: 'The library opens at nine in the morning and closes at six in the evening.'",
        "Rewrite this sentence in formal English: 'hey, can u send me the report asap, thx'.",
        "Translate into Spanish: 'My brother lives in a small house near the river with two cats.'",
        "Rewrite in the passive voice: 'The committee approved the new budget after a long debate.'",
        "Paraphrase in simpler words: 'The municipality intends to ameliorate public transportation.'",
    ],
    "math": [
        "A train travels 180 km in 2 hours and then 120 km in 1.5 hours. What is its average speed? "
        "Reason step by step.",
        "Solve for x: 3x + 7 = 25. Show each step.",
        "A shop sells pens at 3 for 2 dollars. How much do 18 pens cost? Explain your reasoning.",
        "What is the sum of the integers from 1 to 100? Explain the method.",
        "A rectangle has a perimeter of 30 cm and a length of 9 cm. What is its area? Work it out step by step.",
    ],
    "extractive": [
        f"Repeat the following passage exactly, word for word:\n\n{_PASSAGE}",
        f"Copy this text and then copy it again:\n\n{_PASSAGE}",
        "List the days of the week, then list them again in the same order, then once more.",
        "Count from 1 to 40, separated by commas.",
        f"Quote the first two sentences of this passage verbatim:\n\n{_PASSAGE}",
    ],
}

CATEGORIES = tuple(BUILTIN)
DEFAULT_PROMPTS = "factual"  # what `harness run` measures when --prompts is not given


def builtin(category: str) -> list[Prompt]:
    return [Prompt(f"{category}-{i + 1}", category, t) for i, t in enumerate(BUILTIN[category])]


def load_prompts(spec: str) -> list[Prompt]:
    """'factual,code', 'all', or a path to a JSONL file of {id, category, prompt} objects."""
    p = Path(spec)
    if spec.endswith(".jsonl") or p.is_file():
        return _load_jsonl(p)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if names == ["all"]:
        names = list(CATEGORIES)
    bad = [n for n in names if n not in BUILTIN]
    if bad or not names:
        raise HarnessError(
            f"unknown prompt set {', '.join(bad) or spec!r}; choose from: {', '.join(CATEGORIES)}, all, or a .jsonl file"
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
