"""One base for every error qharness raises on purpose, and the CLI's exit codes.

The CLI catches `QHarnessError` and prints its message as one line (no traceback), exiting
with the subclass's ``exit_code``. Each message says what is wrong and what to do. Errors
that are a user's bad input are usage errors (exit 2); errors that report a failed check
on otherwise valid input (a stale golden, say) exit 1; a file system that refuses a read or
write (read-only, full, no permission) exits 4. Anything else is a bug in qharness:
the CLI prints it as one line with a hint and exits 3 (docs/CLI.md lists the codes).
"""

from __future__ import annotations

import errno

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL, EXIT_FILESYSTEM = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # the shell's status for a SIGINT-terminated command
EXIT_BROKEN_PIPE = 141  # the shell's status for a SIGPIPE-terminated one: stdout's reader left

# errno -> what the file system refused: faults of the machine or its setup, never of qharness
FILESYSTEM_ERRNOS: dict[int, str] = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EIO: "input/output error",
    errno.EFBIG: "file too large",
    errno.EMFILE: "too many open files",
    errno.ENFILE: "too many open files in the system",
}


class QHarnessError(Exception):
    """Base of all deliberate qharness errors; ``exit_code`` is the CLI's exit status."""

    exit_code: int = EXIT_USAGE


class UsageError(QHarnessError):
    """A user mistake on the command line: printed as one line, exit status 2."""


class UnsafePathError(UsageError):
    """A path (from the command line or read from a file) that would leave where it belongs."""


class EnvironmentValueError(UsageError):
    """An environment variable qharness reads holds a value it cannot use."""


class FileSystemError(QHarnessError):
    """The file system refused a read or write (read-only, full, no permission): exit 4."""

    exit_code = EXIT_FILESYSTEM


def filesystem_fault(exc: BaseException) -> FileSystemError | None:
    """``exc`` (or what caused it) as a one-line `FileSystemError` naming the path and the
    cause, when it is a file-system fault of `FILESYSTEM_ERRNOS`; None otherwise."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in FILESYSTEM_ERRNOS:
            path = seen.filename if seen.filename is not None else "(a file)"
            return FileSystemError(f"{path}: {FILESYSTEM_ERRNOS[seen.errno]}")
        seen = seen.__cause__ or seen.__context__
    return None
