"""A generation's results row as the runner writes it, and its lines on the console.

`Measuring`: one runtime and pair being measured, what each of their rows carries beside the
generation; `generation_row` lays one out (core/results.py's make_row with the runner's fields);
`progress_line` and `setting_line` are the console's line per generation (--verbose, errors) and
per setting, `skipped_line` what the run skips and why; `log` writes a line above the progress bar; `one_line` an exception as a row's error.
What it does not own: which generations run (harness/runner.py, harness/under_load.py) or the
results schema (core/results.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from spec_harness.core import drafters, metrics
from spec_harness.core.config import GenerationSettings, PairSpec, RuntimeSettings
from spec_harness.core.errors import HarnessError
from spec_harness.core.metrics import SUSPECTED_BUG
from spec_harness.core.records import Generation
from spec_harness.core.results import make_row
from spec_harness.harness import conversation
from spec_harness.harness.console import fit
from spec_harness.harness.prompts import Prompt

if TYPE_CHECKING:  # runtimes.base imports torch
    from spec_harness.runtimes.base import Runtime


def log(msg: str) -> None:
    from tqdm import tqdm

    tqdm.write(msg, file=sys.stderr)


def generation_row(pair: PairSpec, rt: Optional[Runtime], name: str, mode: str, prompt: Prompt, repeat: int,
                   gen: GenerationSettings, g: Optional[Generation], *, error: Optional[str] = None,
                   baseline: Optional[dict] = None, settings: RuntimeSettings = RuntimeSettings(),
                   label: Optional[str] = None, forward: Optional[str] = None,
                   started_at: Optional[float] = None, prompt_tokens: Optional[int] = None) -> dict:
    """core.results.make_row for one generation of runtime `rt` (None when it never loaded);
    `label` is the pair as a person names it (models.info.pair_label); `forward` the forward a
    runtime with a choice of them runs (torch: kernels or eager), None for the others;
    `started_at` when the runner asked for it (unix epoch seconds: the harness's clock, which
    reports/trace.py lays generations on), None for a row no generation was asked for;
    `prompt_tokens` the input's length in the runtime's tokens (chat template and, for a later
    turn, the conversation so far included)."""
    desc = rt.describe() if rt is not None else {}
    identity = {"runtime": name, "mode": mode, "pair": pair.name, "target_quant": pair.target_quant,
                "prompt_id": prompt.id, "turn": prompt.turn, "input_len": prompt.input_len,
                "category": prompt.category, "repeat": repeat}
    row = make_row(identity, gen, desc.get("device", settings.device), desc.get("dtype", settings.dtype), g,
                   text=rt.decode(g.token_ids) if g is not None else None, error=error, baseline=baseline,
                   verify_rule=rt.verify_rule(gen) if rt is not None else None, started_at=started_at)
    row["pair_label"] = label or pair.name
    row["torch_forward"] = forward
    row["prompt_tokens"] = prompt_tokens
    return row


def label_of(pair: PairSpec) -> str:
    """The pair as a person names it, from the files the llama.cpp runtimes load, else the HF ones;
    a target variant (--target-quant) ends in "@TYPE"."""
    from spec_harness.models.info import pair_label

    label = pair_label(pair.target_gguf or pair.target, pair.draft_gguf or pair.draft)
    return f"{label} @{pair.target_quant}" if pair.target_quant else label


def skipped_line(tag: str, what: str, why: str) -> str:
    """What a run skips and why, on the console: `[tag] what: skipped: why` (`[tag] skipped: why`
    where `what` is empty), in lines of at most the console's columns (reports/verdict.py's WIDTH):
    a long reason goes on indented continuation lines. "skipped:" stays beside the reason's first
    word (the row's error reads so), and a word longer than a line (a path) is kept whole."""
    glue = "\0"  # not whitespace to textwrap: "skipped:" and the reason's first word are one chunk
    head = f"[{tag}] {what}: skipped:" if what else f"[{tag}] skipped:"
    return fit(f"{head}{glue}{why}").replace(glue, " ")


def one_line(e: BaseException) -> str:
    msg = (str(e).strip().splitlines() or [""])[0]
    return msg if isinstance(e, HarnessError) else f"{type(e).__name__}: {msg}"


@dataclass
class Measuring:
    """One runtime and pair being measured: what each of their rows carries beside a generation,
    each cell's input (`ids`) and its baseline row (`bases`, the answers a later turn reads)."""

    name: str  # the runtime's registry name
    pair: PairSpec
    rt: Runtime
    tag: str  # the console's "[tag]"
    encoded: dict[str, list[int]]  # prompt id -> its token ids
    settings: RuntimeSettings  # the runtime's settings (its forward, where it has a choice)
    label: str  # the pair as a person names it
    forward: Optional[str]  # the forward of a runtime with a choice of them (torch), else None
    bases: dict = field(default_factory=dict)  # each cell (run_config.Cell) -> its baseline row
    later: dict = field(default_factory=dict)  # a later turn's cell -> its ids (the conversation so far)

    def ids(self, cell) -> list[int]:
        """The input of `cell`: its prompt's ids, or for a later turn the conversation with this
        runtime's own earlier answers (harness/conversation.py; CannotAsk where it cannot be asked)."""
        p = cell.prompt
        if p.turn == 1:
            return self.encoded[p.key]
        if cell not in self.later:
            ids = self.rt.encode(conversation.messages(cell, self.bases))
            if len(ids) + cell.max_new_tokens > self.rt.context_length:
                raise conversation.CannotAsk(
                    f"turn {p.turn} of {p.id} ({len(ids)} tokens with the answers before it) + --max-new-tokens "
                    f"{cell.max_new_tokens} exceeds the {self.rt.context_length}-token context")
            self.later[cell] = ids
        return self.later[cell]

    def row(self, mode: str, prompt: Prompt, repeat: int, gen: GenerationSettings, g: Optional[Generation],
            **kw) -> dict:
        """generation_row of one of its generations (`kw`: error, baseline, started_at)."""
        return generation_row(self.pair, self.rt, self.name, mode, prompt, repeat, gen, g, settings=self.settings,
                              label=self.label, forward=self.forward, **kw)


def _mismatch_flag(m: Optional[dict]) -> str:
    if not m or "verdict" not in m:
        return "  GREEDY MISMATCH"
    at = f"at token {m['position']} (top-2 margin {m['margin_one_token']:.3f}, passes differ by {m['max_abs_diff']:.3f})"
    return f"  SUSPECTED BUG: greedy output left the baseline {at}" if m["verdict"] == SUSPECTED_BUG else f"  near-tie flip {at}"


def _drafting(policy, gamma: Optional[int], drafter) -> str:
    """How a setting drafts, in a console line: `g4`, `confidence:0.5 g6`, `library-default`, then the drafter
    unless it is the draft model (`g4 eagle3`)."""
    drafting = f"g{gamma}" if policy.kind == "fixed" else f"{policy}" + (f" g{gamma}" if gamma else "")
    return drafting + ("" if drafter == drafters.default() else f" {drafter}")


SAME_SPEEDUP = 0.02  # a decode speedup within this of the end-to-end one is not printed beside it


def speedups(e2e: Optional[float], decode: Optional[float]) -> str:
    """`1.15x end to end`, and the decode speedup beside it where prefill makes them differ:
    `0.57x end to end (1.30x decode)`."""
    if e2e is None:
        return "- end to end"
    differs = decode is not None and abs(decode / e2e - 1) > SAME_SPEEDUP
    return f"{e2e:.2f}x end to end" + (f" ({decode:.2f}x decode)" if differs else "")


def setting_line(tag, policy, gamma, drafter, temperature, pairs: list[tuple[dict, dict]]) -> str:
    """One setting's generations pooled: `[torch] g4 eagle3 T0: 5 generations, decode 87.5 -> 100.3
    tok/s, 1.15x end to end, alpha_hat 0.53` (ratios of sums, as the report's; the decode speedup
    beside the end-to-end one where they differ); greedy mismatches counted."""
    base = [b for b, _ in pairs if b]
    spec = [s for _, s in pairs]
    drafting = _drafting(policy, gamma, drafter)
    b_tps = metrics.tokens_per_s(sum(r["new_tokens"] for r in base), sum(r["wall_s"] for r in base),
                                 sum(r["prefill_s"] or 0.0 for r in base)) if base else None
    s_tps = metrics.tokens_per_s(sum(r["new_tokens"] for r in spec), sum(r["wall_s"] for r in spec),
                                 sum(r["prefill_s"] or 0.0 for r in spec))
    speedup = metrics.speedup(sum(r["wall_s"] for r in base), sum(r["new_tokens"] for r in base),
                              sum(r["wall_s"] for r in spec), sum(r["new_tokens"] for r in spec)) if base else None
    decode = metrics.decode_speedup(metrics.pooled(base), metrics.pooled(spec)) if base else None
    alpha = metrics.alpha_hat([rd for r in spec for rd in (r.get("rounds") or [])])
    off = [s for s in spec if s["greedy_match"] is False]
    bugs = sum(1 for s in off if (s.get("mismatch") or {}).get("verdict") == SUSPECTED_BUG)
    flag = "" if not off else f"; {len(off)} greedy mismatch(es)" + (f", {bugs} SUSPECTED BUG" if bugs else "")
    f = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    return fit(f"[{tag}] {drafting} T{temperature:g}: {len(spec)} generations, decode {f(b_tps, '.1f')} -> "
               f"{f(s_tps, '.1f')} tok/s, {speedups(speedup, decode)}, alpha_hat {f(alpha, '.2f')}{flag}")


def progress_line(tag, p, gen, b, s) -> str:
    """One generation's line: `[torch] factual-1 g4 eagle3 T0 r0: decode 87.5 -> 100.3 tok/s, 1.15x end
    to end, alpha_hat 0.53` (the decode speedup beside it where they differ)."""
    drafting = _drafting(gen.draft_policy, gen.gamma_max, gen.drafter)
    drafting += f" forced alpha {','.join(f'{a:g}' for a in gen.forced)}" if gen.forced else ""
    where = f"[{tag}] {p.key} {drafting} T{gen.sampling.temperature:g} r{gen.seed}"
    if (b or {}).get("error") or s["error"]:
        return fit(f"{where}: error: {(b or {}).get('error') or s['error']}")
    flag = "" if s["greedy_match"] in (None, True) else _mismatch_flag(s.get("mismatch"))
    decode = s["tokens_per_s"] / b["tokens_per_s"] if b and b.get("tokens_per_s") and s["tokens_per_s"] else None
    base_tps = "-" if not b else f"{b['tokens_per_s']:.1f}"
    alpha = "-" if s["alpha_hat"] is None else f"{s['alpha_hat']:.2f}"
    return fit(f"{where}: decode {base_tps} -> {s['tokens_per_s']:.1f} tok/s, {speedups(s['speedup'], decode)}, "
               f"alpha_hat {alpha}{flag}")
