"""The `harness` console command: harness/cli.py's `main`, in a process that ends as soon as the
command is done. What the command writes is written by then (rows, run.json, the report), every
atexit handler has run and the streams are flushed; what is skipped is the interpreter's teardown,
which after a run freed the loaded libraries' memory module by module for about a second.
What it does not own: the command line, its errors and exit codes (harness/cli.py)."""

import atexit
import os
import sys


def main() -> None:
    code = 1  # an exception that is not SystemExit is a bug: its traceback, then exit 1

    def leave() -> None:  # registered before anything else, so it runs after every other handler
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)

    atexit.register(leave)
    from spec_harness.harness.cli import main as cli

    try:
        cli()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        raise
    except KeyboardInterrupt:
        code = 130
        raise
