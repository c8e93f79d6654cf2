"""One base for every error qharness raises on purpose, and the CLI's exit codes.

The CLI catches `QHarnessError` and prints its message as one line (no traceback), exiting
with the subclass's ``exit_code``. Each message says what is wrong and what to do. Errors
that are a user's bad input are usage errors (exit 2); errors that report a failed check
on otherwise valid input (a stale golden, say) exit 1. Anything else is a bug in qharness:
the CLI prints it as one line with a hint and exits 3 (docs/CLI.md lists the codes).
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # the shell's status for a SIGINT-terminated command


class QHarnessError(Exception):
    """Base of all deliberate qharness errors; ``exit_code`` is the CLI's exit status."""

    exit_code: int = EXIT_USAGE


class UsageError(QHarnessError):
    """A user mistake on the command line: printed as one line, exit status 2."""


class UnsafePathError(UsageError):
    """A path (from the command line or read from a file) that would leave where it belongs."""


class EnvironmentValueError(UsageError):
    """An environment variable qharness reads holds a value it cannot use."""
