"""--input-len: input length as an axis. Each prompt is built to exactly N tokens of the pair's
tokenizer (chat template included) from real text, never random tokens:

- truncate: a prompt longer than N keeps the start of its own text;
- pad: a shorter one is preceded by the texts of the set's other prompts, in the set's order from
  the one after it (wrapping around), then the built-in prompts' (harness/prompt_sets), the
  earliest cut at its start, so that the prompt's own question stays the last thing the model reads.

Text that cannot fill N tokens without repeating itself is refused, as is a length that
the pair's context (with --max-new-tokens) cannot hold; both before any model loads. The rule is
run.json's config["input_len_rule"]. Every runtime gets the same text; its own tokenizer's count
is each row's `prompt_tokens`.
What it does not own: the prompts (harness/prompts.py), a runtime's context (the runner checks
the loaded runtime again, run_config.check_fits) or the report by input length (reports/).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from spec_harness.core.errors import HarnessError
from spec_harness.harness.prompts import Prompt

RULE = ("truncate: a longer prompt keeps the start of its own text; pad: a shorter one is preceded by the set's "
        "other prompts, in order from the next one, then the built-in prompts, the earliest cut at its start")
SEPARATOR = "\n\n"
EXACT_TRIES = 16  # characters tried on either side of the binary search's cut for an exact count

Encode = Callable[[str], list[int]]  # a prompt text -> the pair's ids, chat template included


def parse(spec: Optional[str]) -> list[int]:
    """'512,1k,2k' -> [512, 1024, 2048] (k = 1024); None or '' -> [] (the prompts as given)."""
    out = []
    for part in (s.strip().lower() for s in (spec or "").split(",") if s.strip()):
        try:
            n = int(float(part[:-1]) * 1024) if part.endswith("k") else int(part)
        except ValueError:
            raise HarnessError(f"--input-len {spec}: {part!r} is not a token count (e.g. 512,1k,2k)") from None
        if n < 16:
            raise HarnessError(f"--input-len {spec}: {n} tokens is too short to hold a prompt (16 at least)")
        out.append(n)
    return sorted(set(out))


def label(n: int) -> str:
    """1024 -> '1k', 512 -> '512'."""
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def build(prompts: list[Prompt], lengths: list[int], encode: Encode, more: list[str] = ()) -> list[Prompt]:
    """Every one-turn prompt at every length, shortest first; `encode` counts the pair's tokens,
    `more` is text padding may use after the set's own (the built-in prompts)."""
    if any(p.turn > 1 for p in prompts):
        raise HarnessError("--input-len builds one-turn prompts; these prompts hold conversations: leave out "
                           "--input-len, or pass a set of one-turn questions")
    out = []
    for n in lengths:
        for i, p in enumerate(prompts):
            own = [q.text for q in prompts[i + 1:] + prompts[:i]]
            others = own + [t for t in dict.fromkeys(more) if t not in own and t != p.text]
            out.append(replace(p, text=_to_length(p.text, others, n, encode), input_len=n))
    return out


def _to_length(text: str, others: list[str], n: int, encode: Encode) -> str:
    if len(encode(text)) >= n:
        return _exact(lambda k: text[:k], len(text), n, encode, growing=True)
    filler = SEPARATOR.join(others)
    if len(encode(filler + SEPARATOR + text)) < n:
        held = len(encode(filler + SEPARATOR + text))
        raise HarnessError(f"--input-len {label(n)}: the prompts hold {held} tokens of text, too few to reach "
                           f"{n} without repeating them; pass a larger set (a public set or a prompt file)")
    return _exact(lambda j: filler[j:] + SEPARATOR + text, len(filler), n, encode, growing=False)


def _exact(make: Callable[[int], str], size: int, n: int, encode: Encode, growing: bool) -> str:
    """make(k) for the k in [0, size] whose text is n tokens (the closest cut at most n where none
    is exact): the token count grows with k when `growing`, else shrinks."""
    fits = lambda k: len(encode(make(k))) <= n  # noqa: E731
    lo, hi = 0, size
    while lo < hi:  # growing: the largest k that fits; shrinking: the smallest
        if growing:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        else:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
    near = sorted(range(max(0, lo - EXACT_TRIES), min(size, lo + EXACT_TRIES) + 1), key=lambda k: abs(k - lo))
    return make(next((k for k in near if len(encode(make(k))) == n), lo))


def check_context(lengths: list[int], max_new_tokens: int, context: Optional[int], pair: str) -> None:
    """The longest length and --max-new-tokens within the pair's context (when known); else one line."""
    if lengths and context and lengths[-1] + max_new_tokens > context:
        raise HarnessError(f"--input-len {label(lengths[-1])}: {lengths[-1]} tokens + --max-new-tokens {max_new_tokens} "
                           f"exceed the {context}-token context of {pair}; choose shorter lengths")
