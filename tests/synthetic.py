"""Synthetic results folders for report tests: rows made by the runner's own generation_row from known
round records (no model runs), so every table number can be checked by hand.

Per prompt, a baseline is 10 one-token target steps (verify 10 ms, sampling 1 ms, unaccounted
1 ms) after a 20 ms prefill. A speculative round drafts gamma tokens at `draft_ms` (2 ms) each, verifies in
15 ms, samples 2 ms, loses 5 ms to orchestration; prefill 25 ms. `scale` multiplies every time
(a uniformly slower runtime).
"""

from __future__ import annotations

import json
from pathlib import Path

from spec_harness.core.config import GenerationSettings, PairSpec, SamplingParams
from spec_harness.core.records import Generation, Phases, RoundRecord
from spec_harness.harness.prompts import Prompt
from spec_harness.harness.rows import generation_row

FACTUAL = Prompt("f1", "factual", "x")
OPEN = Prompt("o1", "open-ended", "y")
# (drafted, accepted, emitted) per round
SPEC_ROUNDS = {
    ("f1", 4): [(4, 4, 5), (4, 1, 2), (4, 2, 3)],
    ("o1", 4): [(4, 0, 1)] * 10,
    ("f1", 2): [(2, 2, 3), (2, 2, 3), (2, 1, 2), (2, 1, 2)],
    ("o1", 2): [(2, 0, 1)] * 10,
}


class FakeRuntime:
    def describe(self):
        return {"device": "cpu", "dtype": "float32"}

    def decode(self, ids):
        return ""

    def verify_rule(self, gen):
        return "greedy-match" if gen.sampling.greedy else "leviathan"


def _generation(rounds: list[RoundRecord], prefill: float) -> Generation:
    tot = {k: sum(getattr(r, k) for r in rounds) for k in ("draft_s", "verify_s", "sampling_s", "unaccounted_s", "wall_s")}
    phases = Phases(prefill_s=prefill, **{**tot, "wall_s": tot["wall_s"] + prefill})
    n = sum(r.emitted for r in rounds)
    return Generation(token_ids=list(range(n)), phases=phases, rounds=rounds)


def baseline(scale: float = 1.0, n: int = 10) -> Generation:
    x = scale
    return _generation([RoundRecord(0, 0, 1, 0.0, 0.010 * x, 0.001 * x, 0.001 * x, 0.012 * x) for _ in range(n)], 0.020 * x)


def speculative(spec: list[tuple[int, int, int]], scale: float = 1.0, draft_ms: float = 2.0,
                verify_ms: float = 15.0) -> Generation:
    x, rounds = scale, []
    for d, a, e in spec:
        draft, verify = draft_ms / 1000 * x * d, verify_ms / 1000 * x
        rounds.append(RoundRecord(d, a, e, draft, verify, 0.002 * x, 0.005 * x, draft + verify + 0.007 * x))
    return _generation(rounds, 0.025 * x)


def rows_for(runtime: str, gammas=(4,), scale: float = 1.0, pair: str = "qwen-like", draft_ms: float = 2.0,
             verify_ms: float = 15.0, rounds: dict = None) -> list[dict]:
    """Baseline and speculative rows of both prompts at each gamma; `rounds` replaces SPEC_ROUNDS."""
    rows = []
    for g in gammas:
        gen = GenerationSettings(SamplingParams(0.0), g, 10, 0)
        spec = PairSpec(pair)
        for p in (FACTUAL, OPEN):
            b = generation_row(spec, FakeRuntime(), runtime, "baseline", p, 0, gen, baseline(scale))
            made = speculative((rounds or SPEC_ROUNDS)[(p.id, g)], scale, draft_ms, verify_ms)
            s = generation_row(spec, FakeRuntime(), runtime, "speculative", p, 0, gen, made, baseline=b)
            rows += [b, s]
    return rows


def qwen_configs(root: Path) -> tuple[Path, Path]:
    """Config-only folders with the shapes of Qwen2.5-3B and -0.5B (c_flops 0.1601)."""
    from transformers import Qwen2Config

    shapes = {"3b": (2048, 11008, 36, 16), "0.5b": (896, 4864, 24, 14)}
    out = []
    for name, (h, i, n, heads) in shapes.items():
        d = root / f"qwen-{name}"
        Qwen2Config(hidden_size=h, intermediate_size=i, num_hidden_layers=n, num_attention_heads=heads,
                    num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True).save_pretrained(d)
        out.append(d)
    return out[0], out[1]


def write_run(folder: Path, rows: list[dict], target=None, draft=None, name: str = "qwen-like", info: dict = None) -> Path:
    """results.jsonl and a run.json naming the pair; `info` adds run.json fields (machine_limits, roofline)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "results.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    pair = {"name": name, "target": target and str(target), "draft": draft and str(draft), "target_gguf": None, "draft_gguf": None}
    (folder / "run.json").write_text(json.dumps({"config": {"pair": pair}, **(info or {})}))
    return folder
