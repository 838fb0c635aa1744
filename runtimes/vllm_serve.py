"""vLLM's OpenAI server (`vllm.entrypoints.openai.api_server`, run as __main__, untouched) with
its engine core process forked from the API server instead of spawned, for the `vllm` runtime on
CPU (runtimes/vllm.py). Run by the Python of vLLM's own environment, never imported by the harness.

Why: vLLM's CPU platform sets VLLM_WORKER_MULTIPROC_METHOD=spawn for its worker processes, and the
engine core process then imports vLLM again, about 10 s of one core here, of a 20-30 s start for
a 135M model. With the `uni` executor there are no workers: the model runs in the engine core, and
fork (vLLM's own default elsewhere) starts it with the API server's imports done. The harness
asks for fork through the environment (VLLM_WORKER_MULTIPROC_METHOD=fork); this keeps that
choice after the platform's configuration. What it does not change: the engine, its scheduling,
its model code, or anything a request runs.
"""

import os
import runpy
import sys

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

if __name__ == "__main__":
    sys.argv[0] = "vllm"
    runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__", alter_sys=True)
