"""Tokenizer compatibility: a draft must speak the target's vocabulary.

Same token -> id map and the same special tokens; a padded embedding matrix (more rows than the
tokenizer has ids) is fine and handled by the runtimes, which compare over the tokenizer's ids.
"""

from __future__ import annotations

from harness.errors import HarnessError


def _specials(tok) -> dict:
    return {k: getattr(tok, k, None) for k in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")}


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


def check_tokenizers(target_tok, draft_tok) -> None:
    """Raise HarnessError naming the first differing ids when the tokenizers do not match."""
    tv, dv = target_tok.get_vocab(), draft_tok.get_vocab()
    if tv != dv:
        n = sum(1 for t in set(tv) | set(dv) if tv.get(t) != dv.get(t))
        ex = "; ".join(vocab_difference(tv, dv))
        raise HarnessError(
            f"draft and target tokenizers differ ({n} tokens, {len(dv)} vs {len(tv)} ids; {ex}): "
            "choose a draft of the target's model family"
        )
    ts, ds = _specials(target_tok), _specials(draft_tok)
    if ts != ds:
        diff = ", ".join(f"{k} {ts[k]} vs {ds[k]}" for k in ts if ts[k] != ds[k])
        raise HarnessError(f"draft and target special tokens differ ({diff}): choose a draft of the target's model family")
