"""`harness bench`'s speculation figures: 2 (self-draft), 4 (unaccounted share), 7 (our loop against
llama-server's), 8 (calibration's gap), 10 (the EAGLE-3 head beside the draft model);
harness/bench.py says what each measures."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional

from spec_harness import runtimes
from spec_harness.core import drafters, theory, timing
from spec_harness.core.config import PairSpec
from spec_harness.core.drafters.eagle3 import Eagle3Spec
from spec_harness.harness.bench_common import CALIBRATION_GRID, HEAD_GOALS, PROMPT, Figure, alternate
from spec_harness.harness.bench_speed import matrices_ms


class SpecFigures:
    """Figures of speculative runs (a mixin of harness/bench.py's Bench)."""

    def fig2_self_draft(self, names: list[str]) -> Figure:
        detail = {}
        for name in names:
            rt = self.runtime(name)
            if rt is None:
                continue
            ids = self._ids(rt)
            walls = {"baseline": [], "speculative": []}

            def run(mode):
                g = rt.generate_speculative(ids, self.gen) if mode == "speculative" else rt.generate_baseline(ids, self.gen)
                walls[mode].append(g)
                return g.phases.wall_s

            med = alternate({"baseline": lambda: run("baseline"), "speculative": lambda: run("speculative")}, self.repeats)
            d = {"speedup": med["baseline"] / med["speculative"]}
            # the ceilings model decode only; the speculative run also pays the draft's prefill
            decode = {m: statistics.median(g.phases.wall_s - (g.phases.prefill_s or 0.0) for g in gs[1:])
                      for m, gs in walls.items()}  # gs[0] is the warm-up
            d["decode_speedup"] = decode["baseline"] / decode["speculative"]
            d.update(self_draft_costs([r.to_dict() for g in walls["speculative"] for r in g.rounds],
                                      [r.to_dict() for g in walls["baseline"] for r in g.rounds], self.gamma, d["speedup"])
                     or pooled_self_draft_costs(walls["speculative"][1:], walls["baseline"][1:], self.gamma, d["speedup"]))
            d.update(run_shares(walls["speculative"][1:], walls["baseline"][1:]))
            detail[name] = d
        lean = self.runtime("torch").target.lean if "torch" in detail else None
        if lean is not None:
            detail["torch"]["matrices_ms"] = matrices_ms(lean.weights, [1, self.gamma + 1], self.repeats)
        torch_speedup = detail.get("torch", {}).get("speedup")
        return Figure(2, f"self-draft speedup at gamma {self.gamma} (theory 1.00x)", torch_speedup,
                      "torch >= 0.95; llamacpp >= 0.95 x (g+1)/(g+v)", detail)

    def fig4_unaccounted(self, names: list[str], pair: PairSpec) -> Figure:
        detail = {}
        for name in names:
            rt = self.runtime_for(name, pair)
            if rt is None:
                continue
            ids = rt.encode(PROMPT)
            shares = []
            rt.generate_speculative(ids, self.gen)  # warm-up
            for _ in range(self.repeats):
                g = rt.generate_speculative(ids, self.gen)
                if g.phases.unaccounted_s is not None:
                    shares.append(g.phases.unaccounted_s / g.phases.wall_s)
            detail[name] = statistics.median(shares) if shares else None
            rt.close()
        return Figure(4, f"unaccounted share of wall, speculative, pair {pair.name}", detail.get("torch"),
                      "<= 5 % for torch and llamacpp", detail)

    def fig7_loop_vs_server(self, pair: PairSpec) -> Figure:
        detail, got = {}, {}
        loaded = []
        for name in ("llamacpp", "llama-server"):
            rt = self.runtime_for(name, pair)
            if rt is None:
                continue
            loaded.append(rt)
            got[name] = self.decode_tps(rt, speculative=True)
        if len(got) == 2:
            med = alternate(got, self.repeats)
            detail = {"tokens_per_s": med, "gamma": self.gamma, "pair": pair.name}
        for rt in loaded:
            rt.close()
        value = detail["tokens_per_s"]["llamacpp"] / detail["tokens_per_s"]["llama-server"] if detail else None
        return Figure(7, f"llamacpp speculative / llama-server speculative (decode tokens/s), pair {pair.name}", value,
                      ">= 1.0", detail)

    def fig8_calibration(self, pair: PairSpec, names=("torch", "llamacpp")) -> Figure:
        """The calibration's goal: measured within 10 % of the cost model at every alpha."""
        import tempfile

        from spec_harness.harness.prompts import DEFAULT_PROMPTS, load_prompts
        from spec_harness.harness.run_config import RunConfig
        from spec_harness.harness.runner import run
        from spec_harness.reports import calibration
        from spec_harness.reports.ceiling import CFlops
        from spec_harness.reports.runs import load

        gammas, alphas = CALIBRATION_GRID
        with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as out:
            cfg = RunConfig([n for n in names if n in runtimes.names()], [pair], load_prompts(DEFAULT_PROMPTS),
                            gammas=gammas, max_new_tokens=[self.tokens], ignore_eos=True, forced=[(a,) for a in alphas],
                            runtime=self.settings, out=Path(out))
            run(cfg)
            es = calibration.entries(load([Path(out)], forced=True).rows, CFlops())
        cells = {f"{e['runtime']} gamma {e['gamma']}": round(e["off_model"], 3) for e in es if e["off_model"] is not None}
        worst = max(cells.values(), default=None)
        detail = {"off_model": cells, "within_goal": sum(v <= calibration.GOAL for v in cells.values()), "cells": len(cells),
                  "costs": {f"{e['runtime']} gamma {e['gamma']}": {k: round(e[k], 3) for k in ("c", "v", "o", "o_base")}
                            for e in es}, "pair": pair.name, "gammas": gammas, "alphas": alphas}
        return Figure(8, f"calibration: largest |measured / cost model - 1| over gamma x alpha ({', '.join(names)}), "
                         f"pair {pair.name}", worst, f"<= {calibration.GOAL:.2f} in every cell", detail)


    def fig10_eagle3_head(self) -> Figure:
        """The default pair's EAGLE-3 head beside its draft model in each runtime that runs both
        (one `harness run` in a process of its own, greedy, the default prompts)."""
        import tempfile

        from spec_harness.core import metrics
        from spec_harness.reports.runs import load as load_rows

        head, model = str(Eagle3Spec()), str(drafters.default())  # the pair's own head; its draft model
        with tempfile.TemporaryDirectory(prefix="bench-eagle3-") as tmp:
            out = Path(tmp) / "run"
            heads = runtimes.able("drafters", Eagle3Spec)  # the runtimes that run an EAGLE-3 head
            r = subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", "run", "--runtime", ",".join(heads),
                                "--drafter", f"{model},{head}", "--out", str(out)], capture_output=True, text=True)
            if not (out / "results.jsonl").exists():
                return Figure(10, "EAGLE-3 head: alpha_hat in torch", None, "", {},
                              note=(r.stderr.strip().splitlines() or ["the run failed"])[-1])
            rows = [x for x in load_rows([out]).rows if not x.get("error")]
        detail: dict = {}
        for name in heads:
            for drafter in (model, head):
                spec = [x for x in rows if x["runtime"].split(" [")[0] == name and x["mode"] == "speculative"
                        and str(x.get("drafter")) == drafter]
                if not spec:
                    continue
                rounds = [rd for x in spec for rd in x["rounds"]]
                speedups = [x["speedup"] for x in spec if x.get("speedup")]
                detail.setdefault(name, {})[drafter] = {
                    "alpha_hat": metrics.alpha_hat(rounds), "tau": metrics.mean_accepted_len(rounds),
                    "speedup": statistics.median(speedups) if speedups else None}
        heads = [d[head]["alpha_hat"] for n, d in detail.items() if head in d and n != "llamacpp"
                 and d[head]["alpha_hat"] is not None]
        detail["alpha_spread_torch_server_vllm"] = max(heads) - min(heads) if len(heads) > 1 else None
        value = (detail.get("torch") or {}).get(head, {}).get("alpha_hat")
        g = HEAD_GOALS
        return Figure(10, "EAGLE-3 head beside the draft model: the head's alpha_hat in torch", value,
                      f">= {g['alpha_hat']} (tau >= {g['tau']} at gamma 4, torch >= {g['torch_speedup']}x, the head ahead "
                      f"of the draft everywhere, alpha_hat within {g['alpha_spread']} over torch, llama-server, vllm)", detail)


def self_draft_costs(spec_rounds: list[dict], base_rounds: list[dict], gamma: int, speedup: float) -> dict:
    """Where a self-draft run's time goes, in target one-token steps (empty when the runtime's
    rounds do not time their phases): v, the (gamma+1)-token verify; c, a draft token (1 in
    theory; above it when a fully accepted round makes the next round's first draft pass two
    tokens long); the verify-cost ceiling (g+1)/(g+v) the issue's goal uses, and the ceiling
    with the draft's measured cost too, (g+1)/(g c + v)."""
    from spec_harness.core import metrics

    return ceilings(metrics.verify_cost_ratio(spec_rounds, base_rounds), metrics.c_measured(spec_rounds, base_rounds),
                    gamma, speedup)


def ceilings(v: Optional[float], c: Optional[float], gamma: int, speedup: float) -> dict:
    """v, the verify-cost ceiling (g+1)/(g+v) and the speedup's share of it; with c also the
    ceiling with the draft's cost, (g+1)/(g c + v). Empty without v."""
    if not v:
        return {}
    # a self-draft accepts everything (alpha 1) and drafts with the target itself (c 1 in theory)
    d = {"v": v, "ceiling": theory.costed_speedup(1.0, gamma, theory.RoundCosts(1.0, v))}
    d["of_ceiling"] = speedup / d["ceiling"]
    if c:
        d["c"] = c
        d["ceiling_with_draft_cost"] = theory.costed_speedup(1.0, gamma, theory.RoundCosts(c, v))
    return d


def run_shares(spec: list, base: list) -> dict:
    """Of Generations of one setting: decode tokens/s of both modes, the speculative run's phase
    shares of wall and acceptance (medians), whether its ids equal the baseline's, and, where
    llama.cpp's counters are there, its view of "unaccounted" and our decode time beside its own."""
    med = statistics.median

    def tok_s(gs) -> float:
        return med(len(g.token_ids) / (g.phases.wall_s - (g.phases.prefill_s or 0.0)) for g in gs)

    out = {"tok_s": {"baseline": tok_s(base), "speculative": tok_s(spec)}, "shares": {}}
    for p in timing.PHASE_FIELDS:
        vals = [getattr(g.phases, p) for g in spec]
        out["shares"][p] = None if any(v is None for v in vals) else med(v / g.phases.wall_s for v, g in zip(vals, spec))
    rounds = [r for g in spec for r in g.rounds if r.drafted]
    out["accept"] = sum(r.accepted for r in rounds) / sum(r.drafted for r in rounds) if rounds else None
    out["greedy_match"] = all(g.token_ids == base[0].token_ids for g in spec)
    perf = [g.extra.get("llama_perf", {}).get("target") for g in spec]
    if all(perf):
        out["llama_unaccounted"] = med(1 - (p["p_eval_ms"] + p["eval_ms"]) * 1e-3 / g.phases.wall_s for p, g in zip(perf, spec))
    checks = [g.extra.get("decode_ms") for g in spec]
    if all(checks):
        out["decode_ms"] = {role: {k: med(c[role][k] for c in checks) for k in ("ours_ms", "llama_ms")} for role in checks[0]}
    return out


def pooled_self_draft_costs(spec: list, base: list, gamma: int, speedup: float) -> dict:
    """self_draft_costs from pooled phases, for a runtime that times no round (llama-server): v and c
    from core.metrics.step_costs; empty when its phases do not show draft and verify."""
    from spec_harness.core import metrics

    def rows(gs):
        return [{**g.phases.to_dict(), "new_tokens": len(g.token_ids), "n_rounds": len(g.rounds),
                 "n_drafted": sum(r.drafted for r in g.rounds)} for g in gs]

    costs = metrics.step_costs(metrics.pooled(rows(spec)), metrics.pooled(rows(base)))
    d = ceilings(costs["v"], costs["c"], gamma, speedup)
    return {**d, "pooled": True} if d else d
