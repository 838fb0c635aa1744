"""What a speculative row should have accepted, from the models themselves: the check that a
runtime's acceptance is the models' and its rule's, not a bug (core/acceptance.py holds the rule
arithmetic and the interval).

For a row, its prompt ids and generated ids are run through the pair in torch (float32,
transformers' forward, teacher-forced): the target, and the draft model, the EAGLE-3 head (its
training-time test, which drafts as drafting does, from the round's first position) or prompt
lookup's own proposals. Each round's tested positions are known from the row's rounds and each
one's context is the generated sequence up to it, so each test's acceptance probability follows
from the row's rule. The runner calls `Checker.check` after each speculative generation, outside
its measurement, and keeps the record in the row (`expected_acceptance`); a row or a pooled cell
outside its interval is not the models' doing, and reports/verdict.py, the report and explain say so.

What it does not do: measure anything, or check rows of forced acceptance (their rate is the
forced one), prompt lookup of a library whose proposals ours does not reproduce (said in the row),
or rows without rounds. Beside the tally it keeps the draft model's top-1 probability at each tested
position (`confidence`: [round start, position, p, p among its top DRAFT_TOP_K]: what our loop and
transformers compare with P, and what llama.cpp does), from which harness tune replays confidence stopping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from spec_harness.core import sampling
from spec_harness.core.acceptance import RULES, Likelihood, Tally, acceptance, tested_positions
from spec_harness.core import drafters
from spec_harness.core.config import PairSpec, SamplingParams
from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.core.drafters.model import DraftModelSpec
from spec_harness.core.drafters.ngram import NgramSpec


DRAFT_TOP_K = 10  # llama.cpp's speculative draft sampler keeps the top 10 (common/speculative.cpp)


@dataclass
class Checker:
    """The pair in torch, loaded once, teacher-forcing rows; caches per sequence."""

    pair: PairSpec
    models: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)

    def _model(self, role: str):
        from spec_harness.models.loading import load_hf_model

        if role not in self.models:
            ref = self.pair.target if role == "target" else self.pair.draft
            self.models[role] = load_hf_model(ref, role, torch.float32, "cpu")
        return self.models[role]

    def _head(self, folder: str):
        from spec_harness.models.eagle3 import load_head

        key = ("head", folder)
        if key not in self.models:
            t = self._model("target")
            self.models[key] = load_head(folder, t.get_input_embeddings().weight.detach().float(), t.config)
        return self.models[key]

    @torch.inference_mode()
    def _logits(self, role: str, seq: tuple, ats: list[int]) -> torch.Tensor:
        """[len(ats), V] logits of a model at positions `ats` of the sequence: its body once per
        sequence (the target's keep the hidden states an EAGLE-3 head reads: self.cache[("hidden",
        seq)]), its output layer only where a draft was tested (a fifth of a small model's work)."""
        key = (role, seq)
        if key not in self.cache:
            model = self._model(role)
            out = model.base_model(input_ids=torch.tensor([seq]), output_hidden_states=role == "target")
            self.cache[key] = out.last_hidden_state[0]  # [S, H]
            if role == "target":
                self.cache[("hidden", seq)] = out.hidden_states
        return self._model(role).get_output_embeddings()(self.cache[key][ats]).float()

    @torch.inference_mode()
    def _head_logits(self, folder: str, seq: tuple, steps: int) -> list[torch.Tensor]:
        """Per drafting step j: the head's logits over the target's vocabulary [S - 1, V] at head
        index h, predicting the target's distribution at h + j + 1 (models/eagle3_train.ttt_forward,
        the training-time test, which runs as drafting does)."""
        from spec_harness.models.eagle3_train import ttt_forward

        key = ("head", folder, seq, steps)
        if key not in self.cache:
            head = self._head(folder)
            self._logits("target", seq, [0])
            hs = self.cache[("hidden", seq)]
            feats = torch.stack([hs[i][0] for i in head.cfg.layer_ids], 1).half().float()  # [S, 3, Ht]
            b = {"tok": torch.tensor([seq]), "feats": feats.flatten(1)[None], "n": torch.tensor([len(seq)])}
            self.cache[key] = [(head, dl[0]) for dl, _ in ttt_forward(head, b, steps)]  # [S - 1, Vd] per step
        return self.cache[key]

    def check(self, row: dict, prompt: list[int], samples_drafts: bool = False, threads: Optional[int] = None) -> Optional[dict]:
        """The row's `expected_acceptance`: its tally against the models, or None where there is
        nothing to check (a baseline, an error, forced acceptance, no rounds, an unknown rule);
        torch on `threads` threads meanwhile (None: its own count)."""
        from spec_harness.core.limits import torch_threads

        with torch_threads(threads):
            return self._check(row, prompt, samples_drafts)

    def _check(self, row: dict, prompt: list[int], samples_drafts: bool) -> Optional[dict]:
        rule = row.get("verify_rule")
        if row.get("mode") != "speculative" or row.get("error") or rule not in RULES or not row.get("rounds") \
                or row.get("forced_rates") or not row.get("token_ids"):
            return None
        s = SamplingParams(row.get("temperature") or 0.0, row.get("top_p") or 1.0, row.get("top_k") or 0)
        ids = list(row["token_ids"])
        seq = tuple(prompt + ids)
        L = len(prompt)
        drafter = drafters.of(row.get("drafter"))  # the row's text, as the results schema keeps it
        model, lookup = isinstance(drafter, DraftModelSpec), isinstance(drafter, NgramSpec)
        positions = [x for x in tested_positions(row["rounds"], len(ids)) if L + x[0] + x[2] >= 2]
        if not positions:
            return None
        if model:
            source = "the draft model"
        elif isinstance(drafter, Eagle3Spec):
            steps = max(i for _, _, i, _ in positions)
            head = self._head_logits(drafter.folder(self.pair.eagle3), seq, steps)
            source = "the EAGLE-3 head"
        elif lookup:
            source = "prompt lookup"
        else:  # a kind this check has no reference for
            return {"rule": rule, "source": type(drafter).title, "verdict": "unchecked",
                    "why": f"no reference model for {type(drafter).title} here"}
        ats = [L + c + i - 2 for c, _, i, _ in positions]  # the logits rows that predict the tested drafts
        p_rows = self._logits("target", seq, ats)  # [n, V]
        q_rows = self._logits("draft", seq, ats) if model else None
        t, top1 = Tally(), []
        for j, (c, d, i, ok) in enumerate(positions):
            p_raw = p_rows[j]
            if lookup:
                from spec_harness.runtimes.ngram import lookup as proposals

                proposal = proposals(list(seq[:L + c]), drafter.max_ngram, d)
                if len(proposal) < i or (ok and proposal[i - 1] != seq[L + c + i - 1]):
                    return {"rule": rule, "source": source, "verdict": "unchecked",
                            "why": "this runtime's prompt lookup proposes otherwise than ours"}
                q_raw = None
                x = proposal[i - 1]
            else:
                if model:
                    q_raw = q_rows[j]
                else:
                    h, dl = head[i - 1]
                    q_raw = h.target_logits(dl[L + c - 2].float())
                x = int(q_raw.argmax())
                if model:
                    top1.append([c, i, round(_top1(q_raw, s), 4), round(_top1(q_raw, s, DRAFT_TOP_K), 4)])
            a, tie = acceptance(rule, p_raw, q_raw, x, s, samples_drafts)
            t.add(a, ok, tie)
        return {**t.record(rule, source), **({"confidence": top1} if top1 else {})}

    def output(self, row: dict, prompt: list[int], threads: Optional[int] = None) -> Optional[dict]:
        """The row's `output_check` where it sampled (temperature > 0, baseline or speculative): its
        tokens' log probability under the target against the target's own samples (Likelihood);
        None where there is nothing to check."""
        from spec_harness.core.limits import torch_threads

        if not row.get("temperature") or row.get("error") or not row.get("token_ids") or row.get("forced_rates"):
            return None
        s = SamplingParams(row["temperature"], row.get("top_p") or 1.0, row.get("top_k") or 0)
        ids = list(row["token_ids"])
        seq = tuple(prompt + ids)
        L = len(prompt)
        if L < 1:
            return None
        with torch_threads(threads), torch.inference_mode():
            logits = self._logits("target", seq, list(range(L - 1, L - 1 + len(ids))))  # [n, V]
            p = sampling.probs_from_logits(logits, s)  # [n, V]
            logp = torch.log_softmax(logits / s.temperature, -1)  # [n, V]
            t = Likelihood()
            for j, x in enumerate(ids):
                t.add(logp[j], p[j], x)
        return t.record()



def _top1(q_raw: torch.Tensor, s: SamplingParams, top_k: int = 0) -> float:
    """The draft's top-1 probability at a position, as confidence stopping reads it: our DraftModel
    and transformers the softmax of its logits when greedy, its sampling distribution q otherwise;
    llama.cpp (top_k DRAFT_TOP_K) the softmax over the draft sampler's top-k candidates."""
    if top_k:
        return float(torch.softmax(torch.topk(q_raw.float(), top_k).values, -1)[0])
    if s.greedy:
        return float(torch.softmax(q_raw.float(), -1).max())
    return float(sampling.probs_from_logits(q_raw[None], s)[0].max())
