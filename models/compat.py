"""Tokenizer compatibility: a draft must speak the target's vocabulary.

Same token -> id map and the same special tokens (bos, eos, pad, unk); a padded embedding matrix
(more rows than the tokenizer has ids) is fine and handled by the runtimes, which compare over the
tokenizer's ids. A mismatch is one line naming how many ids differ, which ones (as id ranges), and
the first few with both sides' tokens. The runtimes call check_tokenizers while loading, before
anything is measured.

Also here: the tokenizer fingerprint of `harness models info` (sha256 of the id-ordered vocabulary
and the special token ids), from a transformers tokenizer or a GGUF file's vocabulary.
What it does not do: load models, or compare GGUF vocabularies inside llama.cpp (the llama.cpp
runtimes do that through the library's own vocabulary).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable, Optional

from spec_harness.core.errors import HarnessError

SPECIAL_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")
GGUF_SPECIAL_KEYS = {"bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id",
                     "pad_token_id": "padding_token_id", "unk_token_id": "unknown_token_id"}
GGUF_UNUSED = 5  # gguf.TokenType.UNUSED: the rows of a padded embedding
FAMILY_HINT = "choose a draft of the target's model family"


def _specials(tok) -> dict:
    return {k: getattr(tok, k, None) for k in SPECIAL_KEYS}


def id_ranges(ids: list[int], limit: int = 4) -> str:
    """Sorted ids -> '3-10, 17, 40-41' (at most `limit` ranges, then '...')."""
    ranges: list[list[int]] = []
    for i in ids:
        if ranges and i == ranges[-1][1] + 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    text = [str(a) if a == b else f"{a}-{b}" for a, b in ranges[:limit]]
    return ", ".join(text) + (", ..." if len(ranges) > limit else "")


def vocab_difference(target_vocab: dict[str, int], draft_vocab: dict[str, int], limit: int = 3) -> list[str]:
    """Human-readable differences between two token -> id maps (at most `limit`)."""
    diffs = []
    t_by_id = {i: t for t, i in target_vocab.items()}
    d_by_id = {i: t for t, i in draft_vocab.items()}
    for i in sorted(set(t_by_id) | set(d_by_id)):
        if t_by_id.get(i) != d_by_id.get(i):
            diffs.append(f"id {i}: target {t_by_id.get(i)!r} vs draft {d_by_id.get(i)!r}")
            if len(diffs) >= limit:
                break
    return diffs


def explain_vocab_difference(target_vocab: dict[str, int], draft_vocab: dict[str, int]) -> Optional[str]:
    """None when the two token -> id maps are equal; else which ids differ, in one line."""
    if target_vocab == draft_vocab:
        return None
    t_by_id = {i: t for t, i in target_vocab.items()}
    d_by_id = {i: t for t, i in draft_vocab.items()}
    both = sorted(i for i in set(t_by_id) & set(d_by_id) if t_by_id[i] != d_by_id[i])
    only_t = sorted(set(t_by_id) - set(d_by_id))
    only_d = sorted(set(d_by_id) - set(t_by_id))
    parts = [f"{len(draft_vocab)} vs {len(target_vocab)} ids (draft vs target)"]
    if both:
        parts.append(f"{len(both)} ids map to other tokens: {id_ranges(both)}")
    for ids, side in ((only_t, "target"), (only_d, "draft")):
        if ids:
            parts.append(f"{len(ids)} ids only in the {side}: {id_ranges(ids)}")
    return "; ".join(parts) + "; e.g. " + "; ".join(vocab_difference(target_vocab, draft_vocab))


def _token(vocab_by_id: dict[int, str], i) -> str:
    return f"{i} {vocab_by_id[i]!r}" if i in vocab_by_id else str(i)


def explain_special_difference(target_specials: dict, draft_specials: dict, target_vocab: dict[str, int]) -> Optional[str]:
    """None when the special token ids agree; else 'eos_token_id: target 2 '</s>' vs draft 0 '<unk>''."""
    by_id = {i: t for t, i in target_vocab.items()}
    diffs = [
        f"{k}: target {_token(by_id, target_specials[k])} vs draft {_token(by_id, draft_specials[k])}"
        for k in SPECIAL_KEYS if target_specials.get(k) != draft_specials.get(k)
    ]
    return ", ".join(diffs) or None


def check_tokenizers(target_tok, draft_tok) -> None:
    """Raise HarnessError explaining which ids differ when the tokenizers do not match."""
    tv, dv = target_tok.get_vocab(), draft_tok.get_vocab()
    why = explain_vocab_difference(tv, dv)
    if why:
        raise HarnessError(f"draft and target tokenizers differ ({why}): {FAMILY_HINT}")
    why = explain_special_difference(_specials(target_tok), _specials(draft_tok), tv)
    if why:
        raise HarnessError(f"draft and target special tokens differ ({why}): {FAMILY_HINT}")


# ---------------------------------------------------------------- fingerprints


def fingerprint(vocab: dict[str, int], specials: dict) -> str:
    """sha256 of the id-ordered vocabulary and the special token ids: equal for tokenizers that
    check_tokenizers accepts, different (with overwhelming probability) otherwise."""
    blob = json.dumps(
        {"vocab": sorted((i, t) for t, i in vocab.items()), "special": {k: specials.get(k) for k in SPECIAL_KEYS}},
        ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def hf_tokenizer_vocab(tok) -> tuple[dict[str, int], dict]:
    return tok.get_vocab(), _specials(tok)


def gguf_tokenizer_vocab(reader) -> tuple[dict[str, int], dict]:
    """(token -> id, special ids) from a GGUF file's tokenizer.ggml.* keys, given a path or an open
    gguf.GGUFReader; trailing unused tokens (a padded embedding's rows) are dropped."""
    from spec_harness.models.shape import gguf_value, open_gguf

    if isinstance(reader, (str, Path)):
        reader = open_gguf(reader)

    def value(key: str):
        return gguf_value(reader, key)

    tokens: list[str] = value("tokenizer.ggml.tokens") or []
    types: Iterable[int] = value("tokenizer.ggml.token_type") or []
    n = len(tokens)
    types = list(types)
    while n and len(types) >= n and types[n - 1] == GGUF_UNUSED:
        n -= 1
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens[:n]):
        vocab.setdefault(t, i)
    specials = {k: value(f"tokenizer.ggml.{g}") for k, g in GGUF_SPECIAL_KEYS.items()}
    return vocab, specials
