"""One base for every error qharness raises on purpose.

The CLI catches `QHarnessError` and prints its message as one line (no traceback), exiting
with the subclass's ``exit_code``. Each message says what is wrong and what to do. Errors
that are a user's bad input are usage errors (exit 2); errors that report a failed check
on otherwise valid input (a stale golden, say) exit 1.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class QHarnessError(Exception):
    """Base of all deliberate qharness errors; ``exit_code`` is the CLI's exit status."""

    exit_code: int = EXIT_USAGE


class UsageError(QHarnessError):
    """A user mistake on the command line: printed as one line, exit status 2."""
