"""A server process the harness starts, owns and stops (llama-server, vLLM's OpenAI server).

What it owns: a free port on 127.0.0.1, the real binary started with its log in a file, the wait
for its health endpoint, JSON requests to it, pausing it (SIGSTOP to its process group) and
stopping it: SIGTERM to its process group, then SIGKILL, on `stop()` (the runtime's close, reached
on success, on error and on Ctrl-C through the caller's `finally`; harness/cli.py turns the
harness's own SIGTERM into the same path), and on Linux also when the harness dies without
cleaning up (kill -9: PR_SET_PDEATHSIG, with SIGKILL: llama-server loses a SIGTERM that arrives
while it loads its models; and a watchdog process per server that kills the server's whole group
then, since the server's own children, vLLM's engine and workers, outlive it otherwise).
`Forker`: a server started once that forks each server from itself (vLLM's API server imported
once: runtimes/vllm_serve.py --fork-server); a ServerProcess given one is such a fork, its pid
learnt from the forker, its exit code reported by it, paused, stopped and watched as any other.
What it does not own: which binary or flags (the runtime), which servers run for which setting
(runtimes/server.py's ServerPool), or what the responses mean.
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
from pathlib import Path
from typing import Optional

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


def group_processes(pgid: int) -> dict[int, str]:
    """pid -> state letter (R running, S sleeping, T stopped, ...) of each process of a process group
    (a server's: its engine and workers with it)."""
    found = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # ended while we looked
            if int(fields[2]) == pgid:
                found[int(p.name)] = fields[0]
    return found


def group_states(pgid: int) -> set[str]:
    """The state letters of a process group's processes."""
    return set(group_processes(pgid).values())


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
