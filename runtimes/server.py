"""The servers of a server runtime (llama-server, vLLM), one per setting, and what such a runtime shares.

`ServerPool` keeps a runtime's servers by `ServerSetting` (a baseline or a speculative one), at most
`max_live` alive, the least recently used stopped, every one but the one in use paused (SIGSTOP),
a dead one started again, and counts the starts of each setting; `ServerRuntime` is what a runtime
over it shares: when the runner measures a setting (`start_setting`), that setting's server runs,
the next setting's may be starting beside it before the measuring begins, and no other is left;
`keep_live(settings)` keeps their servers live at once where memory holds them, for a runner that takes several
settings in turn prompt by prompt (RunConfig.interleave); `start_early` launches the first setting's servers while other runtimes load (the runner holds
them paused whenever anything is measured); under load, `load_capacity` is the tokens each of N
sequences can hold, and `most_sequences` a bound on N known before any load (the run's settings
are refused with it before anything starts). `server_rounds`: the round records of a server that
reports per-round counts and no times.
What it does not own: a server's process (runtimes/process.py: its start, port, log, requests,
pausing and stopping), which binary or flags (the runtime), or what the responses mean.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from spec_harness.core import drafters
from spec_harness.core.config import DrafterSpec, DraftPolicy, GenerationSettings, RuntimeSettings
from spec_harness.core.records import RoundRecord
from spec_harness.runtimes.process import HOST, ServerError, ServerProcess


def server_rounds(steps: list[tuple[int, int]], n_out: int) -> list[RoundRecord]:
    """Round records from a server's (drafted, accepted) per verification, in order: the first token
    (sampled from the prompt), one round per verification, then the steps it ran without a draft;
    emitted counts are cut from the end so they add up to the n_out tokens it returned (an end of
    generation or the length limit inside a round). No times: the servers report none per round."""
    rounds = [RoundRecord(0, 0, 1, None, None, None, None, None)]
    rounds += [RoundRecord(n, a, a + 1, None, None, None, None, None) for n, a in steps]
    left = n_out - sum(r.emitted for r in rounds)
    rounds += [RoundRecord(0, 0, 1, None, None, None, None, None) for _ in range(max(0, left))]
    for r in reversed(rounds):
        if left >= 0:
            break
        cut = min(r.emitted, -left)
        r.emitted -= cut
        left += cut
    return [r for r in rounds if r.emitted or r.drafted]


@dataclass(frozen=True)
class ServerSetting:
    """What a server is started for, and the key of its ServerPool: the baseline (no drafter) or a
    draft policy, the most drafts per round, the drafter and the forced rates; and the client
    streams it serves at once. The servers take these only when they start."""

    policy: Optional[DraftPolicy] = None  # None: the baseline
    gamma_max: Optional[int] = None
    drafter: Optional[DrafterSpec] = None  # None: the baseline
    forced: Optional[tuple[float, ...]] = None
    concurrency: int = 1

    @classmethod
    def baseline(cls, concurrency: int = 1) -> ServerSetting:
        """The baseline's server, serving `concurrency` streams at once."""
        return cls(concurrency=concurrency)

    @classmethod
    def of(cls, gen: GenerationSettings) -> ServerSetting:
        """A speculative generation's server."""
        return cls(gen.draft_policy, gen.gamma_max, gen.drafter, gen.forced, gen.concurrency)

    @property
    def is_baseline(self) -> bool:
        return self.drafter is None

    @property
    def name(self) -> str:
        """The setting in its server log's name: baseline, fixed-gamma4, confidence0.5-gamma6-ngram1-3, ..."""
        n = self.concurrency
        if self.is_baseline:
            return "baseline" + (f"-np{n}" if n > 1 else "")
        drafter, path = str(self.drafter), getattr(self.drafter, "path", None)
        if path:  # a head by its folder's name, not its whole path
            head = Path(path)
            drafter = f"{self.drafter.name}-" + (head.name if head.name != "head" else head.parent.name)
        parts = [str(self.policy)] + ([f"gamma{self.gamma_max}"] if self.gamma_max else []) \
            + ([drafter] if self.drafter != drafters.default() else []) \
            + ([f"forced{'_'.join(f'{a:g}' for a in self.forced)}"] if self.forced else []) + ([f"np{n}"] if n > 1 else [])
        return re.sub(r"[^\w.+-]+", "-", "-".join(parts).replace(":", "").replace(",", "-"))


class ServerPool(OrderedDict):
    """Running servers by ServerSetting, least recently used first; only the one in use runs, the
    others are paused."""

    def __init__(self, max_live: int):
        super().__init__()
        self.max_live, self.started = max_live, 0
        self.starts: dict[str, int] = {}  # ServerSetting.name -> how many times a server was started for it
        self.unready: set = set()  # settings whose server was launched and not yet waited for and warmed up

    def get_or_start(self, setting: ServerSetting, launch: Callable[[ServerSetting], ServerProcess],
                     ready: Callable[[ServerProcess], None], together: tuple[ServerSetting, ...] = ()) -> ServerProcess:
        """The live server for `setting`, resumed, every other one paused; else one from `launch(setting)`
        (a launched ServerProcess: `self.started` counts the starts), held here before `ready(srv)`
        (its wait and warm-up) so that close() stops it if that fails. The settings in `together`
        that have no live server are launched with it, so that their starts overlap (a vLLM engine
        start is mostly single-threaded imports); one of them that fails to start is dropped here
        and fails again, with its reason, when its turn comes."""
        self.launch([setting, *together], launch)
        waiting = [k for k in dict.fromkeys([setting, *together]) if k in self.unready]
        for k in waiting:  # all of them starting side by side while the first is waited for
            self[k].resume()
        for k in waiting:
            try:
                ready(self[k])
                self.unready.discard(k)
            except Exception:
                self.unready.discard(k)
                if k == setting:
                    raise
                self.pop(k).stop()
        srv = self[setting]
        self.move_to_end(setting)
        for k, other in self.items():
            if k != setting:
                other.pause()
        srv.resume()
        return srv

    def launch(self, settings, launch: Callable[[ServerSetting], ServerProcess]) -> None:
        """Launch a server for each setting in `settings` that has none alive (at most max_live, the
        least recently used stopped for room), without waiting for any: get_or_start waits for
        and warms up each when its setting is asked for."""
        for k in settings:
            srv = self.get(k)
            if srv is not None and not srv.alive():
                srv.stop()
                del self[k]
                self.unready.discard(k)
        new = [k for k in dict.fromkeys(settings) if k not in self][:self.max_live]
        for k in [k for k in self if k not in settings][:max(0, len(self) + len(new) - self.max_live)]:  # least recent first
            self.pop(k).stop()
            self.unready.discard(k)
        for k in new:
            self.started += 1
            self.starts[k.name] = self.starts.get(k.name, 0) + 1
            self[k] = launch(k)
            self.unready.add(k)

    def pause_all(self) -> None:
        for srv in self.values():
            srv.pause()

    def resume_all(self) -> None:
        for srv in self.values():
            srv.resume()

    def keep_only(self, keep) -> None:
        """Stop every server whose setting is not in `keep`."""
        for other in [k for k in self if k not in keep]:
            self.pop(other).stop()
            self.unready.discard(other)

    def close(self) -> None:
        for srv in self.values():
            srv.stop()
        self.clear()
        self.unready.clear()


class ServerRuntime:
    """Mixin of a runtime whose servers are a ServerPool (`self.servers`), one server per setting,
    launched by the runtime's `_launch(setting)` and waited for and warmed up by its `_ready(srv)`.
    The runner measures one setting at a time (`start_setting`): that setting's server runs, the
    servers of the next `starts_together - 1` settings are started with it and paused until their
    turn, and the servers of settings already measured are stopped."""

    one_setting_at_a_time = True
    starts_early = True
    serves_concurrently = True  # --concurrency N > 1: closed-loop cells (generate_load)
    servers: ServerPool
    load_path = "/completion"  # the streaming endpoint of generate_load

    def generate_load(self, prompts: list[list[int]], gens: list, speculative: bool) -> tuple:
        """One cell under load (runtimes/closed_loop.py): request i sends prompts[i] with gens[i] (all of
        one setting and concurrency N), N streams at once, or each at its arrival time when the
        gens carry `arrivals` (runtimes/open_loop.py; N is then the server's slots) -> (Cell,
        [Generation, or an error line, per request]). The server's counters around the cell must
        add up to the requests' own."""
        from spec_harness.runtimes import closed_loop, open_loop

        n, a = gens[0].concurrency, gens[0].arrivals
        srv = self._server(ServerSetting.of(gens[0]) if speculative else ServerSetting.baseline(n))
        mark, before = srv.log_mark(), self.load_counters(srv)
        bodies = [self.load_body(ids, g) for ids, g in zip(prompts, gens)]
        if a is None:
            cell = closed_loop.run_cell(HOST, srv.port, self.load_path, bodies, n, self.load_chunk)
        else:  # the same schedule for every setting: seeded by the run's seed (the first request's)
            times = open_loop.arrival_times(len(bodies), a.rate, a.burstiness, gens[0].seed)
            cell = open_loop.run_open_cell(HOST, srv.port, self.load_path, bodies, times, self.load_chunk, a.max_in_flight)
        if not srv.alive():
            raise ServerError(f"{srv.name} died during a cell under load: {srv.reason()}")
        return cell, self.load_generations(srv, cell, gens, speculative, srv.log_text(since=mark), before,
                                           self.load_counters(srv))

    def load_counters(self, srv: ServerProcess) -> dict:
        """The server's cumulative speculative counters (its /metrics), read around a cell."""
        return {}

    def load_body(self, ids: list[int], gen) -> dict:
        raise NotImplementedError

    def load_chunk(self, event: dict) -> tuple[list[int], Optional[dict]]:
        raise NotImplementedError

    def load_generations(self, srv, cell, gens, speculative: bool, log: str, before: dict, after: dict) -> list:
        raise NotImplementedError

    def load_capacity(self, concurrency: int) -> int:
        """Tokens (prompt and answer) each of `concurrency` sequences can hold at once."""
        return self.context_length // concurrency

    @classmethod
    def most_sequences(cls, settings: RuntimeSettings, tokens: int) -> Optional[int]:
        """Before any load: the most sequences of `tokens` tokens each the runtime could hold at
        once with these settings, a bound load_capacity never exceeds (None: none known before
        loading). Here the context (--n-ctx, else at most RuntimeSettings.N_CTX_CAP) shared by the
        sequences, as load_capacity shares it."""
        return (settings.n_ctx or RuntimeSettings.N_CTX_CAP) // tokens

    def _server(self, setting: ServerSetting, together: tuple[ServerSetting, ...] = ()) -> ServerProcess:
        """The running server for a setting, started and warmed up if needed."""
        return self.servers.get_or_start(setting, self._launch, self._ready, together)

    def _together(self, upcoming: Sequence[ServerSetting]) -> tuple[ServerSetting, ...]:
        """The upcoming settings whose servers start with the one asked for."""
        return tuple(upcoming)[:max(self.starts_together - 1, 0)]

    def start_setting(self, setting: ServerSetting, upcoming: Sequence[ServerSetting] = ()) -> None:
        """The server of `setting` running, the next starts_together - 1 of `upcoming` starting
        beside it, and every server of a setting neither now nor upcoming (measured already) stopped."""
        later = self._together(upcoming)
        self.servers.keep_only({setting, *upcoming})
        self._server(setting, later)

    def start_early(self, setting: ServerSetting, upcoming: Sequence[ServerSetting] = ()) -> None:
        """Launch the servers start_setting(setting, upcoming) would, and return at once: the runner
        lets them start while other runtimes load and pauses them (hold) while anything is measured."""
        self.servers.launch([setting, *self._together(upcoming)], self._launch)

    def keep_live(self, settings: Sequence[ServerSetting]) -> bool:
        """Whether the servers of `settings` fit here at once (the servers of other settings stopped
        first, _room_for the ones not running); if so the pool keeps that many live, so that the
        runner can take one setting after another prompt by prompt (RunConfig.interleave)."""
        if len(settings) <= self.servers.max_live:
            return True
        self.servers.keep_only(set(settings))
        if not self._room_for(sum(1 for k in settings if k not in self.servers)):
            return False
        self.servers.max_live = len(settings)
        return True

    def _room_for(self, n: int) -> bool:
        """Whether this machine's free memory holds n of this runtime's servers at once."""
        return False

    def hold(self) -> None:
        """Pause every server (SIGSTOP to its group), starting or idle: another runtime measures."""
        self.servers.pause_all()

    def release(self) -> None:
        self.servers.resume_all()
