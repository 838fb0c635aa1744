"""A server process the harness starts, owns and stops (llama-server, vLLM's OpenAI server).

What it owns: a free port on 127.0.0.1, the real binary started with its log in a file, the wait
for its health endpoint, JSON requests to it, and stopping it: SIGTERM to its process group, then
SIGKILL, on `stop()` (the runtime's close, reached on success, on error and on Ctrl-C through the
caller's `finally`; harness/cli.py turns the harness's own SIGTERM into the same path), and on
Linux also when the harness dies without cleaning up (kill -9: PR_SET_PDEATHSIG, with SIGKILL:
llama-server loses a SIGTERM that arrives while it loads its models; and a watchdog process per
server that kills the server's whole group then, since the server's own children, vLLM's engine
and workers, outlive it otherwise).
`Forker`: a server started once that forks each server from itself (vLLM's API server imported
once: runtimes/vllm_serve.py --fork-server); a ServerProcess given one is such a fork, its pid
learnt from the forker, its exit code reported by it, paused, stopped and watched as any other.
`ServerPool` keeps a runtime's servers by `ServerSetting` (a baseline or a speculative one), at most
`max_live` alive, the least recently used stopped, every one but the one in use paused (SIGSTOP),
a dead one started again, and counts the starts of each setting; `ServerRuntime` is what a runtime
over it shares: when the runner measures a setting (`start_setting`), that setting's server runs,
the next setting's may be starting beside it before the measuring begins, and no other is left;
`start_early` launches the first setting's servers while other runtimes load (the runner holds
them paused whenever anything is measured); under load, `load_capacity` is the tokens each of N
sequences can hold, and `most_sequences` a bound on N known before any load (the run's settings
are refused with it before anything starts).
What it does not own: which binary or flags (the runtime), or what the responses mean, except
`server_rounds`: the round records of a server that reports per-round counts and no times.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from core.config import DrafterSpec, DraftPolicy, GenerationSettings, RuntimeSettings
from core.records import RoundRecord

HOST = "127.0.0.1"
READY_TIMEOUT_S = 300.0  # a large model's load from disk; the tiny pairs are ready in about a second
STOP_TIMEOUT_S = 3.0  # SIGTERM, then SIGKILL: an idle llama-server stops in well under a second, one still loading may ignore it
PORT_ATTEMPTS = 3
LOG_PREFIX = re.compile(r"^[\d.]+ [A-Z] ")  # llama.cpp's "0.00.004.863 E " (time, level)
LOG_ERROR = re.compile(r"^[\d.]+ E ")


class ServerError(RuntimeError):
    """The server could not start, or died: one line with its own reason (from its log)."""


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None  # resolved before any fork


HELD = {signal.SIGINT, signal.SIGTERM}
# Kills a server's whole process group once the harness that started it is gone (kill -9): the
# server itself has PR_SET_PDEATHSIG, but its own children (vLLM's engine and workers) do not.
WATCHDOG = """import os, signal, sys, time
harness, group = int(sys.argv[1]), int(sys.argv[2])
while os.getppid() == harness:
    time.sleep(0.2)
try:
    os.killpg(group, signal.SIGKILL)
except ProcessLookupError:
    pass
"""


def group_states(pgid: int) -> set[str]:
    """The state letters (R running, S sleeping, T stopped, ...) of a process group's processes."""
    states = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # ended while we looked
            if int(fields[2]) == pgid:
                states.add(fields[0])
    return states


def _wait_stopped(pgid: int, timeout_s: float = 1.0) -> None:
    """Return once a SIGSTOP has taken effect on every process of the group (state T), at most
    `timeout_s` later: the signal is delivered asynchronously, and a server busy when it was sent
    runs on for a moment, which would be a neighbour of the measurement that starts next."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and group_states(pgid) - {"T", "t", "Z", "X"}:
        time.sleep(0.002)


def _die_with_parent(parent: int) -> None:
    """Runs in the child between fork and exec: the kernel kills it when the harness dies (SIGKILL:
    nothing of a server is worth a graceful stop once its harness is gone, and a SIGTERM during model
    loading is lost). A harness that died before the request was made sends nothing: then the child
    goes at once. The signals the parent held over the fork are the server's to receive again."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)


def watchdog(group: int) -> subprocess.Popen:
    """A process that kills `group` once this harness is gone (WATCHDOG)."""
    return subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid()), str(group)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _end_watchdog(w: Optional[subprocess.Popen]) -> None:
    if w is not None:
        w.kill()
        w.wait()


def _spawn_group(argv: list[str], env: dict, **popen) -> subprocess.Popen:
    """argv in a session (process group) of its own that dies with this process (PR_SET_PDEATHSIG),
    with `env` over ours. Ctrl-C and SIGTERM wait until the fork is over: raised inside Python's
    fork hooks (which a preexec_fn runs) the KeyboardInterrupt would be ignored, and the harness
    would go on."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        return subprocess.Popen(argv, env={**os.environ, **env}, start_new_session=True,
                                preexec_fn=functools.partial(_die_with_parent, os.getpid()), **popen)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a signal that came meanwhile is raised here


def _killpg(proc, sig: int) -> None:
    """A signal to a server's process group (its pid's), or, for a fork not made yet, when it is."""
    if isinstance(proc, ForkedProcess):
        proc.killpg(sig)
    else:
        os.killpg(proc.pid, sig)


class ForkedProcess:
    """A server forked by a Forker, with Popen's pid, poll, wait and returncode: it is not the
    harness's child, so the forker reports its pid (once forked: until then None) and its exit
    code. The fork waits stopped until its pid is known here; then it gets the last SIGSTOP or
    SIGCONT sent to it meanwhile (SIGCONT: a server runs once launched) and a watchdog."""

    def __init__(self, forker: "Forker"):
        self._forker = forker
        self.pid: Optional[int] = None
        self.returncode: Optional[int] = None
        self._pending = signal.SIGCONT
        self._watchdog: Optional[subprocess.Popen] = None

    def forked(self, pid: int) -> None:  # the forker's reader thread
        with self._forker.lock:
            self.pid = pid
            if self._pending != signal.SIGKILL:
                self._watchdog = watchdog(pid)
            self._signal(self._pending)

    def exited(self, code: int) -> None:  # the forker's reader thread
        self.returncode = code

    def killpg(self, sig: int) -> None:
        """A SIGTERM or SIGKILL before the fork is made ends it when it is (it never runs)."""
        with self._forker.lock:
            if self.pid is not None:
                self._signal(sig)
            elif sig in (signal.SIGSTOP, signal.SIGCONT):
                self._pending = sig
            else:
                self._pending, self.returncode = signal.SIGKILL, -sig

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def poll(self) -> Optional[int]:
        if self.returncode is None and not self._forker.alive():
            self.returncode = -signal.SIGKILL  # the forker is gone, and its forks with it (PDEATHSIG)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("forked server", timeout)
            time.sleep(0.01)
        return self.returncode

    def close(self) -> None:
        _end_watchdog(self._watchdog)
        self._watchdog = None


class Forker:
    """A fork server (`argv`, e.g. runtimes/vllm_serve.py --fork-server): started once, in its own
    session, with `env`, its own output in `log_path`; it imports a server's code and then forks
    one server per `fork(argv, env, log)` (the protocol: that file's docstring). `pause()`/
    `resume()` hold it while it imports (it is idle after); `close()` ends it and every fork not
    yet stopped. `skip`: how many leading words of a ServerProcess's argv are the forker's own
    (its python and script), the rest being what each fork is given."""

    def __init__(self, argv: list[str], env: dict, log_path: Path, skip: int, name: str):
        import threading

        self.skip, self.name, self.log_path = skip, name, Path(log_path)
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self._forks: dict[int, ForkedProcess] = {}
        self._next = 0
        self.paused = False
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(argv)}\n".encode())
            log.flush()
            self.proc = _spawn_group(argv, env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self._watchdog = watchdog(self.proc.pid)
        self._reader = threading.Thread(target=self._read, name=f"{name}-forker", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("ready"):
                self.ready.set()
                continue
            fork = self._forks.get(msg["key"])
            if fork is None:
                continue
            if "pid" in msg:
                fork.forked(msg["pid"])
            if "code" in msg:
                fork.exited(msg["code"])
                self._forks.pop(msg["key"], None)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, argv: list[str], env: dict, log_path: Path) -> ForkedProcess:
        fork = ForkedProcess(self)
        with self.lock:
            key, self._next = self._next, self._next + 1
            self._forks[key] = fork
        try:
            self.proc.stdin.write((json.dumps({"key": key, "argv": argv, "env": env, "log": str(log_path)}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            fork.returncode = self.proc.poll() if self.proc.poll() is not None else -signal.SIGKILL
        return fork

    def pause(self) -> None:
        """SIGSTOP while it is still importing (after, it waits on its stdin and takes nothing)."""
        if self.alive() and not self.paused and not self.ready.is_set():
            os.killpg(self.proc.pid, signal.SIGSTOP)
            self.paused = True
            _wait_stopped(self.proc.pid)

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            if self.alive():
                os.killpg(self.proc.pid, signal.SIGCONT)

    def reason(self) -> str:
        lines = [ln.strip() for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error" in ln.lower()]
        return ((errors or lines or ["no output"])[-1])[:300] + f" (log: {self.log_path})"

    def close(self) -> None:
        """SIGKILL to its group (it holds nothing worth a graceful end, which would take seconds of
        interpreter teardown); forks not stopped before die with it (PDEATHSIG)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._reader.join(5)  # it reads to the end of the pipe
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        _end_watchdog(self._watchdog)


class ServerProcess:
    """One server: `start()` (free port, health), `request()`, `stop()`.

    argv is the command without host and port; a log line holding one of `bind_failure` tells a port
    taken between our check and the server's bind from other start failures (then another port is
    tried).
    """

    def __init__(self, argv: list[str], log_path: Path, name: str, env: Optional[dict] = None,
                 health: str = "/health", bind_failure: tuple[str, ...] = ("couldn't bind", "address already in use"),
                 forker: Optional["Forker"] = None):
        self.argv, self.log_path, self.name = list(argv), Path(log_path), name
        self.env, self.health, self.bind_failure, self.forker = env, health, bind_failure, forker
        self.proc: Optional[subprocess.Popen | ForkedProcess] = None
        self.info: dict = {}  # what the runtime read of this server (e.g. its settings from the log)
        self.port: Optional[int] = None
        self._log = None
        self._offset = 0
        self._watchdog: Optional[subprocess.Popen] = None
        self._port_given: Optional[int] = None
        self.paused = False

    # -- life cycle --------------------------------------------------------------------------

    def start(self, port: Optional[int] = None, timeout_s: float = READY_TIMEOUT_S) -> "ServerProcess":
        """Start and wait until healthy. `port` None: a free one (another if it is taken meanwhile);
        a given port that is in use is a ServerError naming it."""
        return self.launch(port).wait(timeout_s)

    def launch(self, port: Optional[int] = None) -> "ServerProcess":
        """The first half of start(): the process is started; wait() waits for it to be healthy.
        Servers launched one after the other and then waited for start side by side."""
        if port is not None and port_in_use(port):
            raise ServerError(f"port {port} on {HOST} is in use: pick another (or let the harness choose one)")
        self._port_given = port
        try:
            self._spawn(port or free_port())
        except BaseException:
            self.stop()
            raise
        return self

    def wait(self, timeout_s: float = READY_TIMEOUT_S) -> "ServerProcess":
        """The second half of start(): healthy, or a ServerError (and the process stopped); a port
        taken between our check and the server's bind is retried on another."""
        for attempt in range(PORT_ATTEMPTS):
            try:
                self._wait_ready(timeout_s)
                return self
            except ServerError:
                bound = self._bind_failed()
                self.stop()
                if not bound or self._port_given is not None or attempt == PORT_ATTEMPTS - 1:
                    raise
                self._spawn(free_port())
            except BaseException:  # Ctrl-C or SIGTERM while it starts: the caller holds no server to stop yet
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _spawn(self, port: int) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self._offset = self._log.tell()  # this start's part of the log
        self._log.write(f"$ {' '.join(self.argv)} --host {HOST} --port {port}\n".encode())
        self._log.flush()
        self.port = port
        if self.forker is not None:  # argv[0] and the forker's own arguments are the forker's
            self.proc = self.forker.fork(self.argv[self.forker.skip:] + ["--host", HOST, "--port", str(port)],
                                         self.env or {}, self.log_path)
            return
        self.proc = _spawn_group(self.argv + ["--host", HOST, "--port", str(port)], self.env or {}, stdout=self._log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._watchdog = watchdog(self.proc.pid)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                if code == -signal.SIGILL:
                    raise ServerError(f"{self.name} died of an illegal instruction: it was built for CPU features this "
                                      "machine does not enable; rebuild with the flags of docs/llamacpp-build.md")
                raise ServerError(f"{self.name} exited (code {code}) while starting: {self.reason()}")
            try:
                with urllib.request.urlopen(self.url(self.health), timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass  # not listening yet, or 503 while loading the model
            time.sleep(0.05)
        raise ServerError(f"{self.name} was not ready after {timeout_s:.0f} s; its log: {self.log_path}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP to the server's process group: an idle server that waits for its turn takes no
        CPU from the one being measured (an idle vLLM engine's loops take a few percent of a core)."""
        if self.alive() and not self.paused:
            _killpg(self.proc, signal.SIGSTOP)
            self.paused = True
            if self.proc.pid is not None:  # a fork not made yet waits stopped
                _wait_stopped(self.proc.pid)

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            if self.alive():
                _killpg(self.proc, signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after STOP_TIMEOUT_S to whatever of the
        group is left (a server's own children too); idempotent."""
        self.resume()  # a stopped process would not act on SIGTERM
        p, self.proc = self.proc, None
        if p is not None:
            try:
                if p.poll() is None:
                    _killpg(p, signal.SIGTERM)
                    try:
                        p.wait(STOP_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        pass
                _killpg(p, signal.SIGKILL)
            except ProcessLookupError:  # the group is gone already
                pass
            p.wait()
            if isinstance(p, ForkedProcess):
                p.close()
        _end_watchdog(self._watchdog)
        self._watchdog = None
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- requests ----------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def request(self, path: str, body: Optional[dict] = None, timeout_s: float = 3600.0) -> dict | str:
        """GET (body None) or POST JSON; -> the parsed JSON, or the text of a non-JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url(path), data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("error", {}).get("message", detail)
            except (ValueError, AttributeError):
                pass
            raise ServerError(f"{self.name} answered {e.code} to {path}: {detail.strip()[:300]}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
            if not self.alive():
                code = self.proc.returncode if self.proc is not None else "?"
                raise ServerError(f"{self.name} died during a request (exit {code}): {self.reason()}") from None
            raise ServerError(f"{self.name} did not answer {path}: {e}") from None
        text = raw.decode(errors="replace")
        try:
            return json.loads(text)
        except ValueError:
            return text

    # -- its log -----------------------------------------------------------------------------

    def log_mark(self) -> int:
        """Where the log ends now (for log_text(since=...))."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_text(self, since: Optional[int] = None) -> str:
        """What the server wrote since `since` (a log_mark), else since its latest start."""
        if self._log is not None:
            self._log.flush()
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._offset if since is None else since)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def reason(self) -> str:
        """The server's own first error line (else its last line), for a one-line message."""
        lines = [ln.strip() for ln in self.log_text().splitlines() if ln.strip() and not ln.startswith("$ ")]
        errors = [ln for ln in lines if LOG_ERROR.match(ln) or "error" in ln.lower()]
        line = (errors or lines or ["no output"])[0]
        return LOG_PREFIX.sub("", line)[:300] + f" (log: {self.log_path})"

    def _bind_failed(self) -> bool:
        text = self.log_text().lower()
        return any(s in text for s in self.bind_failure)


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
        drafter, head = str(self.drafter), Path(self.drafter.path or "")
        if self.drafter.path:  # a head by its folder's name, not its whole path
            drafter = "eagle3-" + (head.name if head.name != "head" else head.parent.name)
        parts = [str(self.policy)] + ([f"gamma{self.gamma_max}"] if self.gamma_max else []) \
            + ([drafter] if self.drafter.kind != "model" else []) \
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
    starts_together = 1
    serves_concurrently = True  # --concurrency N > 1: closed-loop cells (generate_load)
    servers: ServerPool
    load_path = "/completion"  # the streaming endpoint of generate_load

    def generate_load(self, prompts: list[list[int]], gens: list, speculative: bool) -> tuple:
        """One cell under load (runtimes/load.py): request i sends prompts[i] with gens[i] (all of
        one setting and concurrency N), N streams at once -> (Cell, [Generation, or an error line,
        per request]). The server's counters around the cell must add up to the requests' own."""
        from runtimes import load

        n = gens[0].concurrency
        srv = self._server(ServerSetting.of(gens[0]) if speculative else ServerSetting.baseline(n))
        mark, before = srv.log_mark(), self.load_counters(srv)
        cell = load.run_cell(HOST, srv.port, self.load_path, [self.load_body(ids, g) for ids, g in zip(prompts, gens)], n,
                             self.load_chunk)
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
        later = self._together(upcoming)
        self.servers.keep_only({setting, *later})
        self._server(setting, later)

    def start_early(self, setting: ServerSetting, upcoming: Sequence[ServerSetting] = ()) -> None:
        """Launch the servers start_setting(setting, upcoming) would, and return at once: the runner
        lets them start while other runtimes load and pauses them (hold) while anything is measured."""
        self.servers.launch([setting, *self._together(upcoming)], self._launch)

    def hold(self) -> None:
        """Pause every server (SIGSTOP to its group), starting or idle: another runtime measures."""
        self.servers.pause_all()

    def release(self) -> None:
        self.servers.resume_all()
