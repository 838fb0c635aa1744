"""trace.json (reports/trace.py): a real run of the toy runtime through the runner gives a valid
Chrome trace whose spans tile each generation's wall; a server's rows (rounds without times,
phases it cannot see) give pooled spans that tile too; requests under load sit on lanes; rows
without started_at still give a valid trace."""

from __future__ import annotations

import json
import time
from collections import defaultdict

import pytest

from spec_harness import runtimes
from spec_harness.core.config import GenerationSettings, SamplingParams
from spec_harness.core.records import Generation, Phases, RoundRecord
from spec_harness.core.results import make_row, read_results
from spec_harness.harness.prompts import load_prompts
from spec_harness.harness.run_config import RunConfig
from spec_harness.harness.runner import Runner
from spec_harness.models.presets import resolve_pair
from spec_harness.reports.trace import GAP_S, TRACE, trace, write_trace

REQUIRED = {"X": ("name", "cat", "ph", "ts", "dur", "pid", "tid", "args"), "i": ("name", "ph", "ts", "pid", "tid", "s"),
            "M": ("name", "ph", "pid", "tid", "args")}
TOP = ("generation", "request")


def check(doc: dict) -> dict:
    """The format's rules and ours; -> {(pid, tid): [top-level spans, each with "children"]}."""
    doc = json.loads(json.dumps(doc, allow_nan=False))  # plain JSON
    assert set(doc) >= {"traceEvents", "displayTimeUnit"} and doc["displayTimeUnit"] == "ms"
    events = doc["traceEvents"]
    named_p, named_t = set(), set()
    spans = defaultdict(list)
    for e in events:
        assert e["ph"] in REQUIRED, e
        assert all(k in e for k in REQUIRED[e["ph"]]), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index"), e
            if e["name"] == "process_name":
                named_p.add(e["pid"])
            if e["name"] == "thread_name":
                named_t.add((e["pid"], e["tid"]))
            continue
        assert isinstance(e["ts"], int) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert isinstance(e["dur"], int) and e["dur"] >= 0, e
            spans[(e["pid"], e["tid"])].append(e)
        else:
            assert e["s"] in ("t", "p", "g")
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] != "M"}
    assert used <= named_t and {p for p, _ in used} <= named_p, "every track is named by a metadata event"
    out = {}
    for track, es in spans.items():
        tops = sorted((e for e in es if e["cat"] in TOP), key=lambda e: e["ts"])
        for a, b in zip(tops, tops[1:]):
            assert a["ts"] + a["dur"] <= b["ts"], f"spans overlap on one track: {a['name']} / {b['name']}"
        for t in tops:
            t["children"] = []
        for e in es:
            if e["cat"] in TOP:
                continue
            parent = [t for t in tops if t["ts"] <= e["ts"] and e["ts"] + e["dur"] <= t["ts"] + t["dur"]]
            assert parent, f"{e['name']} lies outside every generation of its track"
            # a zero-length span on a boundary may touch two: it belongs to the one it starts in
            parent = [t for t in parent if e["ts"] < t["ts"] + t["dur"]] or parent
            parent[0]["children"].append(e)
        for t in tops:
            tile(t, [c for c in t["children"] if not _inside_round(c, t["children"])])
            for rd in (c for c in t["children"] if c["cat"] == "round"):
                tile(rd, [c for c in t["children"] if c["cat"] == "phase" and c is not rd and _within(c, rd) and c["dur"]])
                assert {"round", "drafted", "accepted", "emitted"} <= set(rd["args"])
        out[track] = tops
    return out


def _within(c: dict, p: dict) -> bool:
    return p["ts"] <= c["ts"] and c["ts"] + c["dur"] <= p["ts"] + p["dur"]


def _inside_round(c: dict, siblings: list[dict]) -> bool:
    return c["cat"] == "phase" and c["dur"] > 0 and any(s["cat"] == "round" and s["dur"] > 0 and _within(c, s) for s in siblings)


def tile(parent: dict, children: list[dict]) -> None:
    """Children end to end from the parent's start to its end: no gap, no overlap."""
    children = sorted(children, key=lambda c: (c["ts"], c["dur"]))
    if not children and parent["dur"] == 0:  # a round shorter than half a microsecond
        return
    assert children, f"{parent['name']} has no spans inside it"
    assert children[0]["ts"] == parent["ts"] and children[-1]["ts"] + children[-1]["dur"] == parent["ts"] + parent["dur"]
    for a, b in zip(children, children[1:]):
        assert a["ts"] + a["dur"] == b["ts"], f"in {parent['name']}: {a['name']} and {b['name']} do not meet"
    assert sum(c["dur"] for c in children) == parent["dur"]


def names(doc: dict, name: str) -> dict:
    """pid or (pid, tid) -> the name its metadata event gives."""
    return {(e["pid"], e["tid"]) if name == "thread_name" else e["pid"]: e["args"]["name"]
            for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == name}


@pytest.fixture()
def toy_run(monkeypatch, tmp_path):
    """A real run: the toy runtime (tests/toy_runtime.py) through the runner, the draft model and
    prompt lookup, greedy and sampled."""
    monkeypatch.setitem(runtimes.REGISTRY, "toy", "tests.toy_runtime:ToyRuntime")
    cfg = RunConfig(["toy"], [resolve_pair("tiny")], load_prompts("code")[:2], gammas=[3],
                    samplings=[SamplingParams(), SamplingParams(0.9)], max_new_tokens=[16], drafters=["model", "ngram"], warmup=0, out=tmp_path / "run")
    before = time.time()
    rows = Runner(cfg).run()
    return cfg.out, rows, before, time.time()


def test_a_toy_run_gives_a_trace_whose_spans_tile_every_generation(toy_run):
    out, rows, before, after = toy_run
    assert rows and not any(r["error"] for r in rows)
    starts = [r["started_at"] for r in rows]
    assert all(before <= s <= after for s in starts) and starts == sorted(starts), "started_at: the runner's clock, in order"
    path = write_trace(out)
    assert path == out / TRACE
    doc = json.loads(path.read_text())
    tracks = check(doc)
    threads = names(doc, "thread_name")
    assert set(names(doc, "process_name").values()) == {"toy"}
    assert set(threads.values()) == {"toy baseline", "toy speculative", "toy [ngram] speculative"}
    gens = [g for tops in tracks.values() for g in tops]
    assert len(gens) == len(rows)
    by_start = {round(r["started_at"], 6): r for r in rows}
    for (pid, tid), tops in tracks.items():
        for g in tops:
            r = by_start[round(g["args"]["started_at"], 6)]
            assert threads[(pid, tid)].endswith(r["mode"])
            assert abs(g["dur"] - r["wall_s"] * 1e6) <= 1
            rounds = sorted((c for c in g["children"] if c["cat"] == "round"), key=lambda c: c["ts"])
            assert [(c["args"]["round"], c["args"]["drafted"], c["args"]["accepted"], c["args"]["emitted"]) for c in rounds] == \
                [(i, x["drafted"], x["accepted"], x["emitted"]) for i, x in enumerate(r["rounds"], 1)]
            kids = sorted(g["children"], key=lambda c: (c["ts"], c["dur"]))
            assert kids[0]["name"] == "prefill" or r["prefill_s"] < 1e-6
            assert {c["name"] for c in kids if c["cat"] == "phase" and not any(_within(c, x) for x in rounds)} <= \
                {"prefill", "outside rounds"}
            if r["mode"] == "speculative" and r["drafter"] == "model":
                assert {"draft", "verify", "sampling"} <= {c["name"] for c in g["children"]}
    # laid on the harness's clock: the gaps between generations are the run's own
    first = min(g["ts"] for g in gens)
    assert first == 0 and doc["otherData"]["origin_epoch_s"] == pytest.approx(min(starts))
    assert "untimed_generations" not in doc["otherData"]


def test_rows_without_started_at_are_laid_end_to_end(toy_run):
    out, rows, _, _ = toy_run
    old = [{k: v for k, v in r.items() if k != "started_at"} for r in read_results(out / "results.jsonl")]
    doc = trace(old)
    tracks = check(doc)
    gens = sorted((g for tops in tracks.values() for g in tops), key=lambda g: g["ts"])
    assert len(gens) == len(rows) and doc["otherData"]["untimed_generations"] == len(rows)
    assert [g["args"]["prompt_id"] for g in gens] == [r["prompt_id"] for r in old], "file order"
    assert all("placed" in g["args"] for g in gens)
    # a resumed run: old rows before the new ones, on the same tracks, nothing overlapping
    mixed = old[: len(old) // 2] + rows[len(old) // 2:]
    doc = trace(mixed)
    tracks = check(doc)
    gens = [g for tops in tracks.values() for g in tops]
    untimed = [g for g in gens if "placed" in g["args"]]
    assert len(untimed) == doc["otherData"]["untimed_generations"] == len(old) // 2
    gap = min(g["ts"] for g in gens if "placed" not in g["args"]) - max(g["ts"] + g["dur"] for g in untimed)
    assert 0 < gap <= GAP_S * 1e6 + 1, "just before the first timed generation"


GEN = GenerationSettings(SamplingParams(), 4, 8)
IDENTITY = {"runtime": "llama-server", "pair": "tiny", "prompt_id": "p", "category": "c", "repeat": 0}
SERVER_NOTES = {"sampling_s": "inside the server's decode", "unaccounted_s": "the client's wall minus the server's time"}


def server_row(mode: str, wall: float, prefill: float, draft, verify: float, concurrency: int = 1, started_at=None, **load) -> dict:
    """A row as llama-server writes it: sampling null, rounds counted but not timed."""
    rounds = [RoundRecord(0, 0, 1, None, None, None, None, None), RoundRecord(4, 3, 4, None, None, None, None, None),
              RoundRecord(4, 2, 3, None, None, None, None, None)]
    phases = Phases(wall_s=wall, prefill_s=prefill, draft_s=draft, verify_s=verify, sampling_s=None,
                    unaccounted_s=wall - prefill - (draft or 0.0) - verify)
    g = Generation(list(range(8)), phases, rounds, notes=SERVER_NOTES)
    gen = GenerationSettings(SamplingParams(), 4, 8, concurrency=concurrency)
    row = make_row({**IDENTITY, "mode": mode}, gen, "cpu", "q8_0", g, text="x", started_at=started_at)
    row.update(load)
    return row


def test_a_servers_pooled_phases_tile_its_wall():
    t = 1_700_000_000.123456
    rows = [server_row("baseline", 0.2503337, 0.0211111, 0.0, 0.2011112, started_at=t),
            server_row("speculative", 0.1500001, 0.0200003, 0.0333337, 0.0911119, started_at=t + 0.3)]
    rows[1]["draft_s"] = None  # a phase the server cannot see
    doc = trace(rows)
    tracks = check(doc)
    gens = sorted((g for tops in tracks.values() for g in tops), key=lambda g: g["ts"])
    assert [g["args"]["mode"] for g in gens] == ["baseline", "speculative"]
    assert gens[1]["ts"] - gens[0]["ts"] == 300000, "on the harness's clock"
    for g in gens:
        kids = [c["name"] for c in sorted(g["children"], key=lambda c: c["ts"])]
        assert not any(c["cat"] == "round" for c in g["children"]), "rounds without times are not laid out"
        assert kids[0] == "prefill" and "verify (pooled)" in kids and "sampling (pooled)" not in kids
        assert "pooled" in g["args"]["phases"] and g["args"]["rounds drafted/accepted/emitted"] == "0/0/1 4/3/4 4/2/3"
        pooled = [c for c in g["children"] if "(pooled)" in c["name"]]
        assert all("not chronological" in c["args"]["pooled"] for c in pooled)
    assert [c["name"] for c in sorted(gens[1]["children"], key=lambda c: c["ts"])] == \
        ["prefill", "verify (pooled)", "unaccounted (pooled)", "not visible"]  # the draft's 33 ms the server did not split
    hidden = next(c for c in gens[1]["children"] if c["name"] == "not visible")
    assert abs(hidden["dur"] - 33334) <= 1
    unacc = next(c for c in gens[0]["children"] if c["name"] == "unaccounted (pooled)")
    assert unacc["args"]["note"] == SERVER_NOTES["unaccounted_s"]


def test_requests_under_load_sit_on_lanes_with_their_ttft():
    t = 1_700_000_000.0
    reqs = [(0.0, 0.30, 0.05), (0.0, 0.10, 0.04), (0.1, 0.25, 0.02), (0.25, 0.40, 0.03), (0.30, 0.41, None)]
    rows = []
    for i, (s, e, ttft) in enumerate(reqs):
        r = server_row("baseline", e - s, 0.01, 0.0, e - s - 0.02, concurrency=2, started_at=t + s, cell="c1",
                       request_start_s=s, request_end_s=e, ttft_s=ttft)
        r["prompt_id"] = f"p{i}"
        rows.append(r)
    skipped = make_row({**IDENTITY, "runtime": "torch", "mode": "baseline"}, GenerationSettings(SamplingParams(), 4, 8, concurrency=2),
                       "cpu", "float32", None, error="skipped: torch runs one sequence at a time")
    doc = trace(rows + [skipped])
    tracks = check(doc)
    threads = names(doc, "thread_name")
    lanes = {threads[k]: sorted(g["args"]["prompt_id"] for g in v) for k, v in tracks.items()}
    assert lanes == {"llama-server baseline N=2 lane 1": ["p0", "p4"], "llama-server baseline N=2 lane 2": ["p1", "p2", "p3"]}
    for g in (g for v in tracks.values() for g in v):
        kids = {c["name"]: c["dur"] for c in g["children"]}
        ttft = g["args"]["ttft_s"]
        if ttft is None:
            assert kids == {"not visible": g["dur"]}
        else:
            assert kids["prefill (ttft)"] == round(ttft * 1e6) and set(kids) == {"prefill (ttft)", "after first token"}
    instants = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert [e["name"] for e in instants] == ["skipped: torch runs one sequence at a time"]
    assert instants[0]["ts"] == max(g["ts"] + g["dur"] for v in tracks.values() for g in v), "where the row before it ended"
    # without started_at: the cell as one block, its requests where the client saw them start
    old = trace([{k: v for k, v in r.items() if k != "started_at"} for r in rows])
    tracks = check(old)
    starts = sorted((g["ts"], g["args"]["prompt_id"]) for v in tracks.values() for g in v)
    assert starts == sorted((round(s * 1e6), f"p{i}") for i, (s, _, _) in enumerate(reqs))


def test_rounding_never_lets_a_phase_leave_its_round():
    """Phases of odd lengths, many rounds: boundaries rounded once, from cumulative sums."""
    rounds = [RoundRecord(3, i % 4, 1 + i % 4, draft_s=1.3e-6 * (i % 3), verify_s=0.7e-6 + 1e-7 * i, sampling_s=0.4e-6,
                          unaccounted_s=0.33e-6, wall_s=1.3e-6 * (i % 3) + 0.7e-6 + 1e-7 * i + 0.4e-6 + 0.33e-6)
              for i in range(40)]
    wall = 2.5e-6 + sum(r.wall_s for r in rounds) + 3.3e-6
    g = Generation(list(range(40)), Phases(wall, 2.5e-6, 0.0, 0.0, 0.0, 0.0), rounds)
    row = make_row({**IDENTITY, "runtime": "torch", "mode": "speculative"}, GEN, "cpu", "float32", g, started_at=12.3456789)
    tracks = check(trace([row]))
    (g,) = [g for v in tracks.values() for g in v]
    assert sum(c["cat"] == "round" for c in g["children"]) == 40
    assert max(c["ts"] + c["dur"] for c in g["children"]) == g["ts"] + g["dur"]
    assert any(c["name"] == "outside rounds" for c in g["children"])
