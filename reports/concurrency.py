"""Speculation under load (`--concurrency`): per runtime (and drafting), gamma and concurrency N,
what the clients saw, the speedup of speculation in aggregate throughput and in per-request
latency, the measured crossover N (where speculation stops paying), and the batched cost
model's prediction beside it.

- aggregate output tokens/s: a cell's tokens over its wall (N > 1: the client's clock from the
  first request sent to the last answer; N = 1: one request after another, the rows' walls);
- per request: decode tokens/s (tokens after the first over the time after the first), time to
  first token (the client's; at N = 1 the runtime's prefill), latency (the request's wall);
- speedups against the baseline cell of the same runtime, settings and N: aggregate throughput
  and median latency;
- crossover: the N where the aggregate speedup falls below 1, interpolated linearly between the
  last N at or above it and the first below;
- predicted: Leviathan's formula with the costs of the batch (costed_speedup of
  core/theory.py with o = 0) at the cell's alpha_hat and drafting share (the share of its decode
  rounds that drafted: prompt lookup drafts only where the context repeats, and a round without
  a draft is a plain step): v(N) = a pass of N sequences x (gamma + 1) tokens over a pass
  of N x 1, c(N) = the drafter's N x 1 pass over the target's (0 for prompt lookup, which runs no
  model). Priced by the runtime's own engine where it measured them (run.json's
  batched_costs[pair]["by_runtime"]: vLLM, whose float32 steps are timed on its own servers by
  harness/under_load.py's price_batches), else by llama.cpp in-process on the pair's GGUF files
  (`batched_costs`, the llama.cpp runtimes' batches; a runtime with other weights priced so is
  said to be). `verify_regime` says whether that verify batch still costs about a one-token
  step (memory bound) or grows with its tokens (compute bound).
- the models' acceptance: each cell's rows checked against what its models predict for its rule
  (core/acceptance.py), pooled: load must not change acceptance (greedy, a request at N accepts as
  alone), so a cell outside its interval at some N is flagged there with the measured alpha_hat.

What it does not do: measure (runtimes/closed_loop.py, harness/runner.py), or the other sections.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from spec_harness.core import drafters, metrics, theory
from spec_harness.core.acceptance import pooled

MEMORY_BOUND_V = 1.5  # a verify batch below this many one-token passes is still "memory bound"


def _n(r: dict) -> int:
    return r.get("concurrency") or 1


@dataclass(frozen=True)
class CellKey:
    """What rows of one cell under load share: the runtime and settings, the mode, the gamma of a
    speculative cell and the load level N."""

    pair: str
    runtime: str
    temperature: Optional[float]
    top_p: Optional[float]
    top_k: Optional[int]
    max_new_tokens: Optional[int]
    mode: str
    gamma: Optional[int]
    n: int

    @classmethod
    def of(cls, r: dict) -> CellKey:
        spec = r["mode"] == "speculative"
        return cls(r["pair"], r["runtime"], r.get("temperature"), r.get("top_p"), r.get("top_k"), r.get("max_new_tokens"),
                   r["mode"], r.get("gamma") if spec else None, _n(r))

    def baseline(self, n: Optional[int] = None) -> CellKey:
        """The baseline cell of the same runtime and settings, at N (this cell's by default)."""
        return replace(self, mode="baseline", gamma=None, n=self.n if n is None else n)


def cells(rows: list[dict], batched: Optional[dict] = None, every_run: bool = False) -> list[dict]:
    """One record per (runtime, settings, mode, gamma, N) of the runs that measured more than one
    concurrency (of every run with `every_run`); speculative records carry their speedups,
    crossover and prediction."""
    ok = [r for r in rows if not r.get("error") and not r.get("synthetic")
          and r.get("request_rate") is None]  # closed loops only: an open-loop load is reports/open_loop.py's
    if not every_run and len({_n(r) for r in ok}) < 2 and not any(_n(r) > 1 for r in ok):
        return []
    groups: dict[CellKey, list[dict]] = {}
    for r in ok:
        groups.setdefault(CellKey.of(r), []).append(r)
    out = {k: _record(k, rs) for k, rs in groups.items()}
    for k, rec in out.items():
        if rec["mode"] != "speculative":
            continue
        base = out.get(k.baseline())
        if base:
            rec["speedup_aggregate"] = _ratio(rec["aggregate_tps"], base["aggregate_tps"])
            rec["speedup_latency"] = _ratio(base["latency_median_s"], rec["latency_median_s"])
        rec.update(_predicted(rec, (batched or {}).get(rec["pair"]), _head_round(groups, k)))
    records = sorted(out.values(), key=lambda c: (c["pair"], c["runtime"], c["mode"] != "baseline", c["gamma"] or 0, c["concurrency"]))
    for rec in records:
        if rec["mode"] == "speculative":
            same = [c for c in records if c["mode"] == "speculative" and c["runtime"] == rec["runtime"]
                    and c["gamma"] == rec["gamma"] and c["pair"] == rec["pair"]]
            rec["crossover"] = crossover([(c["concurrency"], c.get("speedup_aggregate")) for c in same])
            rec["crossover_predicted"] = crossover([(c["concurrency"], c.get("predicted_speedup")) for c in same])
    return records


def _cost(rec: dict) -> str:
    """What a record's drafter costs (core/drafters: the draft model's steps, nothing, its own round)."""
    return drafters.of(rec.get("drafter")).cost


def _head_round(groups: dict, key: CellKey) -> Optional[float]:
    """An EAGLE-3 head's round at N = 1 in its baseline's target steps (draft passes, the verify
    batch with the layer inputs the head reads, and the loop: metrics.step_costs' cost per round),
    measured on the same runtime and settings; None for other drafters or without N = 1 rows."""
    spec1, base1 = groups.get(replace(key, n=1)), groups.get(key.baseline(1))
    if not spec1 or not base1 or _cost(spec1[0]) != drafters.OWN_ROUND:
        return None
    return metrics.step_costs(metrics.pooled(spec1), metrics.pooled(base1))["cost_per_round"]


def _record(key: CellKey, rs: list[dict]) -> dict:
    runtime, mode, n = key.runtime, key.mode, key.n
    tokens = sum(r["new_tokens"] for r in rs)
    if n > 1:  # the cells' own clock
        walls = {r.get("cell") or "": ((r.get("extra") or {}).get("cell") or {}).get("wall_s") for r in rs}
        wall = sum(w for w in walls.values() if w) or None
        lat = [r["request_end_s"] - r["request_start_s"] for r in rs if r.get("request_end_s") is not None]
        ttft = [r.get("ttft_s") for r in rs]
    else:
        wall = sum(r["wall_s"] for r in rs)
        lat = [r["wall_s"] for r in rs]
        ttft = [r.get("prefill_s") for r in rs]
    decode = [(r["new_tokens"] - 1) / (w - (t or 0.0)) for r, w, t in zip(rs, lat, ttft)
              if r["new_tokens"] > 1 and t is not None and w > (t or 0.0)]
    rounds = [rd for r in rs for rd in (r.get("rounds") or [])]
    return {"pair": key.pair, "runtime": runtime, "mode": mode, "gamma": key.gamma, "concurrency": n,
            "temperature": key.temperature, "top_p": key.top_p, "top_k": key.top_k, "max_new_tokens": key.max_new_tokens,
            "requests": len(rs), "tokens": tokens,
            "aggregate_tps": tokens / wall if wall else None,
            "decode_tps_median": metrics.quantile(decode, 0.5), "decode_tps_p90": metrics.quantile(decode, 0.9),
            "ttft_median_s": metrics.quantile(ttft, 0.5), "ttft_p90_s": metrics.quantile(ttft, 0.9),
            "latency_median_s": metrics.quantile(lat, 0.5),
            "alpha_hat": metrics.alpha_hat(rounds) if mode == "speculative" else None,
            "drafting_share": _drafting_share(rs) if mode == "speculative" else None,
            "drafter": rs[0].get("drafter") if mode == "speculative" else None, "dtype": rs[0].get("dtype"),
            "runtime_name": rs[0].get("runtime_name") or runtime,
            "acceptance_check": pooled([r.get("expected_acceptance") for r in rs]) if mode == "speculative" else None,
            "speedup_aggregate": None, "speedup_latency": None}


def _drafting_share(rs: list[dict]) -> Optional[float]:
    """The share of a cell's decode rounds that drafted (a request's first round is its prompt's
    token, sampled before any draft): about 1 for a draft model, what matched for prompt lookup."""
    later = [rd for r in rs for rd in (r.get("rounds") or [])[1:]]
    return sum(1 for rd in later if rd["drafted"] > 0) / len(later) if later else None


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def _prices(rec: dict, costs: Optional[dict], n: Optional[int] = None) -> tuple[Optional[dict], Optional[dict], Optional[str]]:
    """The cell's batch prices at N (its own by default) -> (the target's seconds per k tokens, the
    draft model's, whose), keyed by k (run.json keeps k and N as text): the runtime's own engine's
    when it measured them (by_runtime), else llama.cpp's. Prompt lookup runs no model and an EAGLE-3
    head is priced by its own round (_head_round): they need the target's prices only."""
    n = str(n or rec["concurrency"])
    name = rec.get("runtime_name") or rec["runtime"]
    own = ((costs or {}).get("by_runtime") or {}).get(name) or {}
    target_only = _cost(rec) != drafters.DRAFT_MODEL
    for source, whose in ((own, name), (costs or {}, "llama.cpp")):
        t, d = (source.get("target") or {}).get(n), ((source.get("draft") or {}).get(n))
        if t and (d or target_only):
            return _by_k(t), _by_k(d or {}), whose
    return None, None, None


def _by_k(prices: dict) -> dict[int, float]:
    """run.json's {"k": seconds} as {k: seconds}."""
    return {int(k): s for k, s in prices.items()}


def _predicted(rec: dict, costs: Optional[dict], head_round: Optional[float] = None) -> dict:
    """The batched cost model at this cell's N, gamma and alpha_hat (module docstring). An EAGLE-3
    head's round is its round measured at N = 1 (`head_round`, in target steps) grown as the
    target's verify batch grows from N = 1 to N: the head's passes and the layer inputs it reads
    are part of the verify batch it runs with, which no batched price of the target alone holds."""
    a, g = rec["alpha_hat"], rec["gamma"]
    t, d, whose = _prices(rec, costs)
    k = (g or 0) + 1  # the verify pass's tokens per sequence
    cost = _cost(rec)
    none = {"predicted_speedup": None, "v_batched": None, "c_batched": None, "verify_regime": None, "priced_by": None}
    if a is None or not g or not t or 1 not in t or k not in t or (1 not in d and cost == drafters.DRAFT_MODEL):
        return none
    v = t[k] / t[1]
    share = rec.get("drafting_share")
    share = 1.0 if share is None else share
    regime = "memory bound" if v < MEMORY_BOUND_V else "compute bound"
    if cost == drafters.OWN_ROUND:
        t1 = _prices(rec, costs, 1)[0]
        if head_round is None or not t1 or k not in t1 or 1 not in t1:
            return none
        grown = head_round * v / (t1[k] / t1[1])
        return {"predicted_speedup": theory.costed_speedup(a, g, theory.RoundCosts(0.0, grown, 0.0, 0.0), share),
                "v_batched": v, "c_batched": None, "verify_regime": regime,
                "priced_by": f"its round at N = 1 ({head_round:.2f} steps), grown as {whose}'s verify batch"}
    c = 0.0 if cost == drafters.NOTHING else d[1] / t[1]  # a lookup runs no model
    return {"predicted_speedup": theory.costed_speedup(a, g, theory.RoundCosts(c, v, 0.0, 0.0), share), "v_batched": v,
            "c_batched": c, "verify_regime": regime, "priced_by": whose}


def at_load(rows: list[dict], costs: Optional[dict], runtime: str, gamma: Optional[int], n: int) -> Optional[dict]:
    """What an open-loop load's queueing model (reports/open_loop.py) takes from the batched cost
    model: `runtime`'s baseline and speculative (gamma) records measured one request at a time,
    the model's speedup at N = 1 and at N = n (alpha_hat and the drafting share at N = 1), and how
    much the target's one-token pass grows from 1 to n sequences; None without N = 1 rows or prices."""
    ok = [r for r in rows if not r.get("error") and not r.get("synthetic") and r["runtime"] == runtime
          and metrics.one_at_a_time(r)]
    groups: dict[CellKey, list[dict]] = {}
    for r in ok:
        groups.setdefault(CellKey.of(r), []).append(r)
    spec_key = next((k for k in groups if k.mode == "speculative" and k.gamma == gamma), None)
    if spec_key is None or spec_key.baseline() not in groups:
        return None
    spec, base = _record(spec_key, groups[spec_key]), _record(spec_key.baseline(), groups[spec_key.baseline()])
    head = _head_round(groups, spec_key)
    p1 = _predicted(spec, costs, head)["predicted_speedup"]
    pn = _predicted({**spec, "concurrency": n}, costs, head)["predicted_speedup"]
    t1, tn = _prices(spec, costs, 1)[0], _prices(spec, costs, n)[0]  # the target's passes, priced as the speculative cell is
    if p1 is None or pn is None or not t1 or not tn or 1 not in t1 or 1 not in tn:
        return None
    return {"base": base, "spec": spec, "speedup_1": p1, "speedup_n": pn, "step_growth": tn[1] / t1[1]}


def regime_lines(records: list[dict]) -> list[str]:
    """`harness explain` under load: per speculative cell, its verify batch's cost and regime."""
    out = []
    for c in records:
        if c["mode"] != "speculative" or c.get("v_batched") is None:
            continue
        out.append(f"{c['runtime']} gamma {c['gamma']} at N = {c['concurrency']}: a verify batch of {c['concurrency']} x "
                   f"{c['gamma'] + 1} tokens costs {c['v_batched']:.2f} batched one-token passes ({c['verify_regime']}); "
                   + (f"the draft's pass {c['c_batched']:.2f} of the target's; " if c.get("c_batched") is not None
                      else f"priced by {c['priced_by']}; ")
                   + (f"drafts in {c['drafting_share']:.0%} of rounds; " if c.get("drafting_share") is not None else "")
                   + f"predicted speedup "
                   f"{c['predicted_speedup']:.2f}, measured " + (f"{c['speedup_aggregate']:.2f}" if c["speedup_aggregate"] else "-"))
    return (["", "Under load (reports/concurrency.py):"] + [f"- {line}" for line in out]) if out else []


def _models(c: dict) -> str:
    """What the cell's models predict for its acceptance (core/acceptance.py), flagged where it is outside."""
    chk = c.get("acceptance_check")
    if not chk:
        return "-"
    span = f"{chk['alpha_lo']:.2f}-{chk['alpha_hi']:.2f}"
    return span if chk["verdict"] == "within" else f"**{span}: measured {chk['alpha']:.2f}, not the models**"


def crossover(points: list[tuple[int, Optional[float]]]) -> Optional[float]:
    """The N where a speedup falls below 1 (linear between the last N >= 1 and the first < 1; the
    first N when it is below 1 already); None when it never does."""
    pts = sorted((n, s) for n, s in points if s is not None)
    for i, (n, s) in enumerate(pts):
        if s < 1.0:
            if i == 0:
                return float(n)
            n0, s0 = pts[i - 1]
            return n0 + (s0 - 1.0) / (s0 - s) * (n - n0)
    return None


def markdown(records: list[dict], png: Optional[str]) -> list[str]:
    """The report's section "Under load"."""
    if not records:
        return []
    lines = ["## Under load: speculation at 1..N concurrent requests", "",
             "Aggregate output tokens/s of each cell (N streams, closed loop), per request decode tokens/s and time to "
             "first token (median / p90), and the speedup of speculation in aggregate throughput and in median "
             "latency; predicted: Leviathan's formula with this machine's batched pass costs (v: N x (gamma+1) tokens "
             "over N x 1, c: the draft's N x 1 over the target's), in the share of rounds that drafted (the others "
             "plain steps).", "",
             "| runtime | gamma | N | tok/s in all | decode tok/s | TTFT s | alpha_hat | the models' alpha |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    f = lambda x, spec=".2f": "-" if x is None else format(x, spec)  # noqa: E731
    shown = [c for c in records if not (c["mode"] == "baseline" and " [" in c["runtime"])]  # a drafting view's copy of its runtime's baseline
    for c in shown:
        lines.append(f"| {c['runtime']} | {c['gamma'] or '-'} | {c['concurrency']} | {f(c['aggregate_tps'], '.1f')} | "
                     f"{f(c['decode_tps_median'], '.1f')} / {f(c['decode_tps_p90'], '.1f')} | "
                     f"{f(c['ttft_median_s'], '.3f')} / {f(c['ttft_p90_s'], '.3f')} | {f(c['alpha_hat'])} | {_models(c)} |")
    lines += ["", "| runtime | gamma | N | drafting rounds | speedup (throughput) | speedup (latency) | predicted | v | verify batch |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in (c for c in shown if c["mode"] == "speculative"):
        lines.append(f"| {c['runtime']} | {c['gamma']} | {c['concurrency']} | {f(c.get('drafting_share'), '.0%')} | "
                     f"{f(c['speedup_aggregate'])} | {f(c['speedup_latency'])} | {f(c.get('predicted_speedup'))} | "
                     f"{f(c.get('v_batched'))} | {c.get('verify_regime') or '-'} |")
    seen = set()
    lines.append("")
    for c in records:
        key = (c["runtime"], c["gamma"])
        if c["mode"] != "speculative" or key in seen:
            continue
        seen.add(key)
        same = [x for x in records if x["mode"] == "speculative" and (x["runtime"], x["gamma"]) == key]
        least = min(x["concurrency"] for x in same)
        got, pred = c.get("crossover"), c.get("crossover_predicted")

        def where(n: Optional[float], what: str) -> str:
            if n is None:
                return f"{what} pays at every N measured"
            if n == least:
                return f"{what} does not pay at any N measured (below 1 from N = {least})"
            return f"{what} stops paying at N = {n:.1f}"

        foreign = c.get("dtype") in ("float32", "float16", "bfloat16") and c.get("priced_by") == "llama.cpp"
        lines.append(f"- {c['runtime']}, gamma {c['gamma']}: " + where(got, "speculation (throughput)")
                     + ("; predicted: " + where(pred, "it") + (f" (priced by llama.cpp's batches of the GGUF files, not this "
                                                             f"engine's {c['dtype']} ones)" if foreign
                                                             else " (priced by llama.cpp's batches of the GGUF files)"
                                                             if c.get("priced_by") == "llama.cpp"
                                                             else f" (priced by {c['priced_by']}'s own batches)")
                        if c.get("predicted_speedup") is not None else ""))
    if png:
        lines += ["", f"![speedup against concurrency]({png})"]
    return lines + [""]


def plot(records: list[dict], path) -> Optional[object]:
    """Speedup (throughput, solid; latency, dashed) against N per runtime and gamma; the crossover
    marked; the prediction dotted."""
    spec = [c for c in records if c["mode"] == "speculative" and c.get("speedup_aggregate") is not None]
    if not spec:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for (runtime, gamma) in dict.fromkeys((c["runtime"], c["gamma"]) for c in spec):
        cs = sorted((c for c in spec if c["runtime"] == runtime and c["gamma"] == gamma), key=lambda c: c["concurrency"])
        ns = [c["concurrency"] for c in cs]
        line, = ax.plot(ns, [c["speedup_aggregate"] for c in cs], "o-", label=f"{runtime} g{gamma}: throughput")
        ax.plot(ns, [c["speedup_latency"] for c in cs], "s--", color=line.get_color(), alpha=0.7, label="latency")
        if any(c.get("predicted_speedup") is not None for c in cs):
            ax.plot(ns, [c.get("predicted_speedup") for c in cs], ":", color=line.get_color(), label="predicted")
        if cs[0].get("crossover") is not None:
            ax.axvline(cs[0]["crossover"], color=line.get_color(), lw=0.8, ls="-.")
            ax.annotate(f"N = {cs[0]['crossover']:.1f}", (cs[0]["crossover"], 1.0), color=line.get_color(), fontsize=8,
                        xytext=(3, 6), textcoords="offset points")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent requests N")
    ax.set_ylabel("speedup of speculation")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
