"""User-facing errors: one line naming the problem and the fix, exit code 2.

Raise `HarnessError` for anything a user can fix (bad flag, missing file, mismatched
tokenizers). The CLI prints its message on one line and exits 2; everything else is a bug
and keeps its traceback.
"""


class HarnessError(Exception):
    """A problem with the user's input or environment, not a bug."""


class RuntimeUnavailable(HarnessError):
    """A runtime cannot run here (a missing dependency, an unsupported pair); the runner turns
    this into a "skipped: reason" row."""
