"""A conversation's later turns, asked as MT-Bench asks them: turn k's input is the chat template
over the user's earlier turns and this runtime's own answers to them, then turn k.

The answers are the runtime's baseline rows of the same sampling, length and repeat (under load,
where a cell repeats more often, repeat 0's): the baseline and every speculative setting of turn k
read the same input, so their rows compare side by side, and a greedy run stays lossless turn by
turn (the speculative answer to turn 1 is the baseline's when the check passes).
What it does not own: the order of the cells (turn 1 before turn 2: harness/prompts.py lists a
question's turns in order, and the runner measures every cell's baseline before or beside its
speculative settings) or the chat template (the runtime's encode, models/chat.py).
"""

from __future__ import annotations

from dataclasses import replace

from spec_harness.models.chat import Message


class CannotAsk(Exception):
    """A later turn that cannot be asked: an earlier turn has no answer, or the conversation
    outgrows the context. Its row is an error row; the run goes on."""


def messages(cell, bases: dict) -> list[Message]:
    """Turn k of `cell`'s conversation (a run_config.Cell) as chat messages: each earlier user turn
    and the runtime's answer to it (`bases`: each cell's baseline row), then turn k."""
    out: list[Message] = []
    for k in range(1, cell.prompt.turn):
        earlier = replace(cell, prompt=cell.prompt.earlier(k))
        row = bases.get(earlier) or bases.get(replace(earlier, repeat=0))
        if not row or row.get("error") or row.get("text") is None:
            raise CannotAsk(f"turn {k} of {cell.prompt.id} has no answer from this runtime (its baseline "
                            f"{'failed: ' + row['error'] if row and row.get('error') else 'was not measured'})")
        out += [{"role": "user", "content": earlier.prompt.text}, {"role": "assistant", "content": row["text"]}]
    return out + [{"role": "user", "content": cell.prompt.text}]
