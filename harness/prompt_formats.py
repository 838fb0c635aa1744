"""Prompt files as the public sets publish them: each record read as one question of one or more
user turns, by its fields.

Formats (`FORMATS`), recognised record by record:
- ours: `{id, category, prompt}`, `prompt` a string (one turn);
- MT-Bench / Spec-Bench: `{question_id, category, turns: [...]}` (Spec-Bench's question.jsonl is
  MT-Bench's format; HuggingFaceH4's copy of MT-Bench names the list `prompt`);
- SPEED-Bench: its rows, `{question_id, category, sub_category, turns, ...}`, in JSONL or in the
  Parquet files its dataset publishes;
- ShareGPT: `{id, conversations: [{from: human|gpt, value}, ...]}` as `vllm bench serve
  --dataset-name sharegpt` reads it (a JSON array or JSONL); the user's turns are kept, the
  recorded answers dropped (each runtime answers for itself);
- chat messages: `{messages: [{role: user|assistant, content}, ...]}`, the same way.

Files: `.jsonl` (a record per line), `.json` (an array of records, or one object holding one),
`.parquet` (rows; read with pandas and pyarrow). A record in none of the formats stops the load
with one line naming its line (or item) and the formats accepted, before any work.
What it does not own: the built-in sets, public set names or turning questions into prompts
(harness/prompts.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from spec_harness.core.errors import HarnessError

FORMATS = ("{id, category, prompt} (ours)", "{question_id, category, turns} (MT-Bench, Spec-Bench, SPEED-Bench)",
           "{id, conversations: [{from, value}]} (ShareGPT)", "{messages: [{role, content}]} (chat)")
USER_ROLES = ("human", "user")  # who asks, in ShareGPT's `from` and chat's `role`


@dataclass(frozen=True)
class Question:
    """One record: an id, a category and the user's turns, in order."""

    id: str
    category: str
    turns: tuple[str, ...]


def read_questions(path: Path) -> list[Question]:
    """Every record of a prompt file as a Question; one HarnessError line for a file that is not one."""
    if not path.is_file():
        raise HarnessError(f"prompt file not found: {path}")
    out = [q for where, rec in _records(path) if (q := _question(rec, where, path)) is not None]
    if not out:
        raise HarnessError(f"prompt file {path} holds no prompts")
    return out


def _records(path: Path) -> Iterator[tuple[str, object]]:
    """(where, record) of each record: "N" (a JSONL file's line), "item N" (a JSON array's), "row N" (Parquet)."""
    if path.suffix == ".parquet":
        yield from _parquet(path)
        return
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json" or text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise HarnessError(f"{path}:{e.lineno}: not JSON ({e.msg}); {_accepted()}") from None
        yield from ((f"item {n}", rec) for n, rec in enumerate(_items(data), 1))
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield f"{n}", json.loads(line)
            except json.JSONDecodeError:
                raise HarnessError(f"{path}:{n}: not a JSON object; {_accepted()}") from None


def _items(data: object) -> list:
    """A JSON file's records: its array, the first array of an object that wraps one, or itself."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and not _is_record(data):
        return next((v for v in data.values() if isinstance(v, list)), [data])
    return [data]


def _parquet(path: Path) -> Iterator[tuple[str, object]]:
    try:
        import pandas as pd

        frame = pd.read_parquet(path)
    except ImportError as e:
        raise HarnessError(f"{path}: reading Parquet needs pyarrow ({e}): pip install pyarrow") from None
    except Exception as e:  # noqa: BLE001 - a damaged or foreign file
        raise HarnessError(f"{path}: not a Parquet file pandas can read ({type(e).__name__}): {_accepted()}") from None
    for n, rec in enumerate(frame.to_dict("records"), 1):
        yield f"row {n}", {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in rec.items()}  # numpy -> Python


def _is_record(obj: dict) -> bool:
    return any(k in obj for k in ("prompt", "turns", "conversations", "messages"))


def _question(rec: object, where: str, path: Path) -> Optional[Question]:
    """A record as a Question (None: a conversation without a user turn, e.g. ShareGPT's empty ones)."""
    turns = _turns(rec) if isinstance(rec, dict) else None
    if turns is None:
        at = f"{path}:{where}" if where.isdigit() else f"{path} {where}"
        raise HarnessError(f"{at}: not a prompt in a known format; {_accepted()}")
    if not turns:
        return None
    qid = rec.get("question_id", rec.get("id", rec.get("prompt_id")))
    category = rec.get("category") or ("sharegpt" if "conversations" in rec else "custom")
    return Question(str(qid if qid is not None else f"{path.stem}-{where.split()[-1]}"), str(category), turns)


def _turns(rec: dict) -> Optional[tuple[str, ...]]:
    """The user's turns of a record in one of the formats, None in none."""
    for key in ("turns", "prompt"):
        v = rec.get(key)
        if isinstance(v, str):
            return (v,)
        if isinstance(v, list) and v and all(isinstance(t, str) for t in v):
            return tuple(v)
    for key, who, what in (("conversations", "from", "value"), ("messages", "role", "content")):
        v = rec.get(key)
        if isinstance(v, list) and all(isinstance(m, dict) and who in m and what in m for m in v):
            return tuple(str(m[what]) for m in v if m[who] in USER_ROLES)
    return None


def _accepted() -> str:
    return "expected one of: " + "; ".join(FORMATS) + " (.jsonl, .json or .parquet)"
