"""A run as a timeline: results rows -> trace.json in the Chrome trace-event format ("JSON Object
Format": {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}), which Perfetto
(ui.perfetto.dev: Open trace file) opens, and catapult's trace viewer (chrome://tracing where a
Chrome still has it).

Tracks: a process per runtime as run.json names it ("torch [kernels]", "llama-server"; with the
pair beside it when the rows hold several pairs), in it a thread per mode and drafting, named as
reports/runs.py's by_drafting names the rows' runtime: "torch [kernels] baseline", "torch
[kernels] speculative" (fixed gamma, the draft model), "torch [kernels, eagle3] speculative";
under load (--concurrency N > 1) one thread per lane of each, "... N=4 lane 2". The gammas,
samplings and lengths of one drafting share its track (the runner measures them one after the
other; the span's name and args say which). No two spans of one thread overlap: a span that would
(a clock stepped back) goes to a lane of its own.

Spans (complete events, ph "X", integer microseconds):

- a generation, [started_at, started_at + wall_s], the harness's clock (the row's `started_at`,
  time.time() just before the runner called the runtime; its wall is the runtime's own). Inside
  it, tiling its wall exactly: `prefill`, then `round i` (i from 1, the order of the row's
  `rounds`, args round/drafted/accepted/emitted/wall_s), then `outside rounds` (the loop's time
  between and after rounds: wall minus prefill minus the rounds' walls, all of it laid last).
  Inside a round, tiling its wall: its `draft`, `verify`, `sampling`, `unaccounted` totals laid
  end to end in loop order. They are totals, not events: a round drafts (a draft pass and a
  sampling choice per token), verifies in one pass, then samples the acceptance test; the rows
  keep only each phase's sum per round, so the sub-spans show how the round's time divides, not
  when each piece ran. A phase a runtime cannot see (null) is left out and the rest of the round
  is `not visible`.
- a generation whose rounds carry no wall (llama-server, vLLM: counted, not timed) shows its
  pooled phases instead: `prefill`, then `draft (pooled)`, `verify (pooled)`, `sampling
  (pooled)`, `unaccounted (pooled)` (those not null), then `not visible` for the rest of the
  wall; their args say they are the generation's totals, not chronological, with the runtime's
  phase note; the rounds' counts are in the generation's args.
- a request under load (concurrency > 1): [started_at, + wall_s] (the client's request start and
  end, runtimes/closed_loop.py), with `prefill (ttft)`, the client's time to first token, and `after
  first token` inside it; its pooled phases and round counts are args.
- an error or skipped row: no span; an instant event (ph "i") named by its error line, at its
  started_at when a generation was asked for, else where the row before it in the file ended.

Integer microseconds: every boundary inside a generation is round(start + offset) of one float
offset, the cumulative sum of the parts before it (each part clipped to its parent's end, said in
its args when that happens), so children tile their parent to the microsecond and never leave it.

Rows written before `started_at` existed (resumed runs, old folders) have no start: their
generations are laid end to end in file order, GAP_S apart, before the first timed one (a cell
under load as one block, its requests at their request_start_s); otherData says how many.

What it does not own: the rows (core/results.py), the runtime labels' rule (reports/runs.py's
by_drafting, reused per row), measuring anything, or where the command line writes the file
(harness/cli.py calls write_trace).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Union

from spec_harness.core.results import RESULTS, rate_text, read_results
from spec_harness.reports.runs import by_drafting, results_files

TRACE = "trace.json"
GAP_S = 0.001  # between generations laid end to end for want of started_at
US = 1e6
EPS_S = 0.5e-6  # a remainder below half a microsecond is rounding: the last part takes it
LOOP_ORDER = ("draft", "verify", "sampling", "unaccounted")  # a round's phase totals, laid in this order
POOLED_ORDER = LOOP_ORDER  # a generation's pooled phases after its prefill
LAYOUT_NOTE = ("phase sub-spans are the round's totals per phase laid end to end in loop order "
               "(draft, verify, sampling, unaccounted); in the round they interleave")
POOLED_NOTE = "the generation's total for this phase (the runtime's own numbers), not chronological"


def trace(rows: list[dict]) -> dict:
    """The trace-event JSON object (a dict) of results rows, in file order."""
    items = [_item(r, i) for i, r in enumerate(rows)]
    items = [it for it in items if it is not None]
    untimed = _place(items)
    spans = [it for it in items if it["kind"] != "instant"]
    origin = min((it["start"] for it in items), default=0.0)
    pids, tids = _tracks(items, spans, origin)
    events = _metadata(pids, tids)
    for it in items:
        events += _events(it, origin, pids, tids)
    timed = [it for it in spans if it["row"].get("started_at") is not None]
    other = {
        "made_by": "reports/trace.py from results.jsonl rows",
        "clock": "the harness's: a row's started_at (unix epoch seconds, taken just before the runner called the runtime) "
                 "plus its wall_s; ts 0 is the earliest event",
        "origin_epoch_s": origin if timed else None,
        "origin_utc": datetime.fromtimestamp(origin, timezone.utc).isoformat(timespec="milliseconds") if timed else None,
        "generations": len(spans),
        "rows_without_spans": len(items) - len(spans),
        "phases": LAYOUT_NOTE + "; generations whose rounds carry no times show their pooled phases (" + POOLED_NOTE + ")",
        "tracks": "a process per runtime, a thread per mode and drafting (by_drafting's names), a lane per request at once under load",
    }
    if untimed:
        other["untimed_generations"] = untimed
        other["untimed_layout"] = (f"{untimed} generations have no started_at (written before the field existed): laid end to end "
                                   f"in file order, {GAP_S * 1e3:g} ms apart, before the timed ones; their places in time are not measured")
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write_trace(source: Union[Path, str, list], path: Optional[Path] = None) -> Path:
    """trace.json of a run folder (a folder holding results.jsonl, or a sweep folder: every
    results.jsonl below it, report folders excluded), of several folders, or of rows as
    results.jsonl holds them. `path` defaults to FOLDER/trace.json for one folder. -> the path."""
    if isinstance(source, (str, Path)):
        folders = [Path(source)]
    elif source and all(isinstance(x, (str, Path)) for x in source):
        folders = [Path(x) for x in source]
    else:
        folders = []
    if folders:
        rows = [r for f in folders for res in results_files(f) for r in read_results(res)]
        if path is None:
            path = (folders[0].parent if folders[0].name == RESULTS else folders[0]) / TRACE
    else:
        rows = list(source)
        if path is None:
            raise ValueError("write_trace of rows needs a path")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(trace(rows), separators=(",", ":"), ensure_ascii=False, allow_nan=False))
    tmp.replace(path)
    return path


# ---------------------------------------------------------------- one row -> an item to place


def _num(x) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _labels(row: dict) -> tuple[str, str]:
    """(process, drafting label) of a row: by_drafting's names. Rows a report already viewed
    (runtime_name set, or a forward already in the runtime's name) keep theirs."""
    if "runtime_name" in row or "[" in str(row.get("runtime")):
        return row.get("runtime_name") or row["runtime"], row["runtime"]
    view = by_drafting([dict(row)])[0]
    return view.get("runtime_name") or view["runtime"], view["runtime"]


def _item(row: dict, index: int) -> Optional[dict]:
    if row.get("mode") == "baseline" and row.get("runtime_name"):
        return None  # a report view's copy of a baseline row (by_drafting): the row itself is elsewhere
    process, label = _labels(row)
    n = row.get("concurrency") or 1
    pair = row.get("pair_label") or row.get("pair")
    rate = row.get("request_rate")
    track = f"{label} {row.get('mode')}" + (f" {rate_text(rate)} req/s" if rate is not None else f" N={n}" if n > 1 else "")
    it = {"row": row, "index": index, "process": process, "pair": pair, "track": track, "load": n > 1,
          "start": _num(row.get("started_at"))}
    wall = _num(row.get("wall_s"))
    if row.get("error") or wall is None:
        it["kind"] = "instant"
        return it
    under_load = n > 1 and _num(row.get("request_start_s")) is not None
    it["kind"] = "request" if under_load else "generation"
    it["wall"] = max(wall, 0.0)
    return it


def _place(items: list[dict]) -> int:
    """Give every item a start (seconds): timed ones have theirs; generations without started_at
    go end to end in file order before the first timed one (a cell under load as one block);
    instants without one sit where the item before them in the file ended. -> how many
    generations had no start."""
    untimed = [it for it in items if it["kind"] != "instant" and it["start"] is None]
    timed = [it["start"] for it in items if it["start"] is not None]
    cursor, cell, cell_start = 0.0, None, 0.0  # cursor: the next free place
    for it in untimed:
        r = it["row"]
        if it["kind"] == "request":
            if r.get("cell") is None or r.get("cell") != cell:
                cell, cell_start = r.get("cell"), cursor
            it["start"] = cell_start + _num(r["request_start_s"])
        else:
            cell, it["start"] = None, cursor
        cursor = max(cursor, it["start"] + it["wall"] + GAP_S)
    if untimed and timed:
        shift = min(timed) - cursor
        for it in untimed:
            it["start"] += shift
    before = None  # where the item before in the file ended
    for i, it in enumerate(items):
        if it["start"] is None:
            it["start"] = before if before is not None else _next_start(items, i)
        before = it["start"] + it.get("wall", 0.0)
    return len(untimed)


def _next_start(items: list[dict], i: int) -> float:
    return next((x["start"] for x in items[i + 1:] if x["start"] is not None), 0.0)


# ---------------------------------------------------------------- tracks


def _us(seconds: float) -> int:
    return int(round(seconds * US))


def _tracks(items: list[dict], spans: list[dict], origin: float) -> tuple[dict, dict]:
    """pid per (process, pair), tid per (track, lane): spans are given lanes so that none overlaps
    another on its thread (in integer microseconds). -> ({process key: (pid, name)},
    {(process key, track, lane): (tid, name)})."""
    pairs = {it["pair"] for it in items}
    pids: dict = {}
    for it in items:
        key = (it["process"], it["pair"])
        if key not in pids:
            pids[key] = (len(pids) + 1, it["process"] + (f" · {it['pair']}" if len(pairs) > 1 else ""))
        it["pkey"] = key
    ends: dict[tuple, list[int]] = {}  # (process key, track) -> each lane's last end
    for it in sorted(spans, key=lambda x: (_us(x["start"] - origin), x["index"])):
        ts = _us(it["start"] - origin)
        lanes = ends.setdefault((it["pkey"], it["track"]), [])
        lane = next((i for i, e in enumerate(lanes) if e <= ts), len(lanes))
        if lane == len(lanes):
            lanes.append(0)
        lanes[lane] = _us(it["start"] - origin + it["wall"])
        it["lane"] = lane
    for it in items:
        it.setdefault("lane", 0)
    first = {}  # track -> where it first appears in the file (the run's order of draftings)
    for it in items:
        first.setdefault(it["track"], it["index"])
    keys = sorted({(it["pkey"], it["track"], it["lane"]) for it in items},
                  key=lambda k: (pids[k[0]][0], *_track_order(k[1]), first[k[1]], k[2]))
    tids: dict = {}
    for k in keys:
        pkey, track, lane = k
        load = " N=" in track
        name = track + (f" lane {lane + 1}" if load or lane else "")
        tids[k] = (len([x for x in tids if x[0] == pkey]) + 1, name)
    return pids, tids


def _track_order(track: str) -> tuple:
    """One request at a time before each N; in each, the baseline before the speculative tracks."""
    n = int(track.rsplit(" N=", 1)[1]) if " N=" in track else 1
    return n, " speculative" in track


def _metadata(pids: dict, tids: dict) -> list[dict]:
    ev = []
    for pid, name in pids.values():
        ev.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
        ev.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    for (pkey, _, _), (tid, name) in tids.items():
        pid = pids[pkey][0]
        ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        ev.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return ev


# ---------------------------------------------------------------- spans


def _tile(parts: list[tuple], total: float, rest: Optional[str]) -> list[tuple]:
    """Lay parts (name, seconds or None, args) end to end within [0, total]: -> (name, begin,
    end, args) offsets. None parts are left out; a part that would pass `total` is clipped (said
    in its args); what is left at the end is `rest` (or the last part's, when under EPS_S or
    `rest` is None)."""
    out, x = [], 0.0
    for name, v, args in parts:
        if v is None:
            continue
        want = max(float(v), 0.0)
        end = min(x + want, total)
        if end - x < want - EPS_S:
            args = {**args, "clipped_s": want - (end - x)}
        out.append([name, x, end, args])
        x = end
    if total - x > EPS_S and rest is not None:
        out.append([rest, x, total, {}])
    elif out:
        out[-1][2] = total
    return [tuple(o) for o in out]


def _span(name: str, cat: str, begin_us: int, end_us: int, pid: int, tid: int, args: dict) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "ts": begin_us, "dur": end_us - begin_us, "pid": pid, "tid": tid,
            "args": args}


def _gen_args(r: dict, it: dict) -> dict:
    keys = ("runtime", "mode", "pair", "prompt_id", "turn", "repeat", "gamma", "draft_policy", "drafter", "temperature", "top_p",
            "top_k", "max_new_tokens", "seed", "concurrency", "torch_forward", "wall_s", "prefill_s", "draft_s",
            "verify_s", "sampling_s", "unaccounted_s", "new_tokens", "tokens_per_s", "n_rounds", "n_drafted", "n_accepted",
            "acceptance_rate", "speedup", "greedy_match", "started_at", "synthetic")
    args = {k: r.get(k) for k in keys if r.get(k) is not None}
    if r.get("started_at") is None:
        args["placed"] = "file order (the row has no started_at): not its measured time"
    return args


def _name(r: dict, what: str) -> str:
    gamma = f" gamma {r['gamma']}" if r.get("mode") == "speculative" and r.get("gamma") is not None else ""
    temp = f" T {r['temperature']:g}" if _num(r.get("temperature")) else ""
    return f"{what} {r.get('prompt_id')} rep {r.get('repeat')}{gamma}{temp}"


def _rounds_counts(r: dict) -> str:
    return " ".join(f"{x.get('drafted')}/{x.get('accepted')}/{x.get('emitted')}" for x in r.get("rounds") or [])


def _events(it: dict, origin: float, pids: dict, tids: dict) -> list[dict]:
    r = it["row"]
    pid = pids[it["pkey"]][0]
    tid = tids[(it["pkey"], it["track"], it["lane"])][0]
    t0 = it["start"] - origin
    if it["kind"] == "instant":
        line = str(r.get("error") or "no wall_s")
        return [{"name": line if len(line) <= 120 else line[:117] + "...", "cat": "skipped" if line.startswith("skipped") else "error",
                 "ph": "i", "s": "t", "ts": _us(t0), "pid": pid, "tid": tid,
                 "args": {"error": line, **{k: r.get(k) for k in ("runtime", "mode", "prompt_id", "turn", "repeat", "gamma", "drafter",
                                                                 "concurrency", "started_at") if r.get(k) is not None}}}]
    wall = it["wall"]

    def at(x: float) -> int:
        return _us(t0 + x)

    args = _gen_args(r, it)
    if it["kind"] == "request":
        args.update({k: r.get(k) for k in ("cell", "request_start_s", "request_end_s", "ttft_s", "itl_median_s", "itl_p90_s")})
        args["phases"] = "the pooled phases above are the server's numbers; the spans are the client's ttft and the rest"
        if r.get("rounds"):
            args["rounds drafted/accepted/emitted"] = _rounds_counts(r)
        ev = [_span(_name(r, "request"), "request", at(0), at(wall), pid, tid, args)]
        ttft = _num(r.get("ttft_s"))
        parts = [("prefill (ttft)", ttft, {"ttft_s": ttft, "clock": "the client's time to first token"})]
        if ttft is not None:
            parts.append(("after first token", wall - ttft, {}))
        for name, b, e, a in _tile(parts, wall, "not visible"):
            ev.append(_span(name, "phase", at(b), at(e), pid, tid, a))
        return ev
    rounds = r.get("rounds") or []
    timed = bool(rounds) and all(_num(x.get("wall_s")) is not None for x in rounds)
    args["phases"] = ("timed per round: " + LAYOUT_NOTE) if timed else ("pooled: " + POOLED_NOTE)
    if not timed and rounds:
        args["rounds drafted/accepted/emitted"] = _rounds_counts(r)
    ev = [_span(_name(r, "generation"), "generation", at(0), at(wall), pid, tid, args)]
    notes = r.get("phase_notes") or {}
    prefill = ("prefill", _num(r.get("prefill_s")), {"prefill_s": r.get("prefill_s")})
    if timed:
        parts = [prefill] + [(f"round {i}", _num(x["wall_s"]), {"round": i, "drafted": x.get("drafted"),
                                                                "accepted": x.get("accepted"), "emitted": x.get("emitted"),
                                                                "wall_s": x.get("wall_s"), "phases": LAYOUT_NOTE})
                             for i, x in enumerate(rounds, 1)]
        outside = "outside rounds"
    else:
        parts = [prefill] + [(f"{p} (pooled)", _num(r.get(f"{p}_s")),
                              {f"{p}_s": r.get(f"{p}_s"), "pooled": POOLED_NOTE, **({"note": notes[f"{p}_s"]} if f"{p}_s" in notes else {})})
                             for p in POOLED_ORDER]
        outside = "not visible"
    for name, b, e, a in _tile(parts, wall, outside):
        is_round = name.startswith("round ")
        if at(e) > at(b) or is_round:  # a phase that rounds to nothing is left out; every round is shown
            ev.append(_span(name, "round" if is_round else "phase", at(b), at(e), pid, tid, a))
        if not is_round:
            continue
        x = rounds[a["round"] - 1]
        sub = [(p, _num(x.get(f"{p}_s")), {"round": a["round"], f"{p}_s": x.get(f"{p}_s")}) for p in LOOP_ORDER]
        ev += _inner(_tile(sub, e - b, "not visible"), b, e, at, pid, tid)
    return ev


def _inner(parts: list[tuple], b: float, e: float, at, pid: int, tid: int) -> list[dict]:
    """A round's phase spans from their offsets in it: its first and last boundaries are the
    round's own, the others clamped inside it, so nothing leaves the round after rounding."""
    lo, hi = at(b), at(e)

    def us(o: float) -> int:
        return lo if o <= 0 else hi if o >= e - b else min(max(at(b + o), lo), hi)

    return [_span(name, "phase", us(pb), us(pe), pid, tid, args) for name, pb, pe, args in parts if us(pe) > us(pb)]
