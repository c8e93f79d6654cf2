"""Reading files a user or a file names, without hanging and without leaving where they belong.

Every file qharness reads on a user's behalf (a golden, a manifest, a results file, a
checkpoint) is opened non-blocking and checked to be a regular file before a byte is read,
so a FIFO cannot hang a run and a directory or a symlink loop is one clear error. Relative
names read from files (manifest entries) are confined to their root before they are used.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from harness.errors import QHarnessError, UnsafePathError

# One path segment: starts with a letter, digit or '_' (so never '.', '..' or hidden).
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9_.@+=-]*"
_RELATIVE_NAME = re.compile(rf"{_SEGMENT}(/{_SEGMENT})*")


class UnreadableFileError(QHarnessError):
    """A named file that is missing, not a regular file, or cannot be read."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: Path | str, what: str = "file") -> bytes:
    """All bytes of ``path``, which must be a regular file (checked on the open descriptor,
    so a FIFO cannot block and nothing can swap the file between check and read)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UnreadableFileError(f"{path}: {what} does not exist") from None
    except OSError as exc:
        reason = "is a symlink loop" if exc.errno == errno.ELOOP else f"cannot be opened ({exc})"
        raise UnreadableFileError(f"{path}: {what} {reason}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnreadableFileError(f"{path}: {what} is {_kind(mode)}, expected a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise UnreadableFileError(f"{path}: {what} cannot be read ({exc})") from None
    finally:
        os.close(fd)


def check_regular_file(path: Path | str, what: str = "file") -> None:
    """Raise `UnreadableFileError` unless ``path`` is a regular file (without opening it)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UnreadableFileError(f"{path}: {what} does not exist") from None
    except OSError as exc:
        reason = "is a symlink loop" if exc.errno == errno.ELOOP else f"cannot be read ({exc})"
        raise UnreadableFileError(f"{path}: {what} {reason}") from None
    if not stat.S_ISREG(mode):
        raise UnreadableFileError(f"{path}: {what} is {_kind(mode)}, expected a regular file")


def is_safe_relative_name(name: object) -> bool:
    """True for 'a/b_c@d' style names: relative, no '.', '..' or hidden segments, no '\\'."""
    return isinstance(name, str) and _RELATIVE_NAME.fullmatch(name) is not None


def confined(root: Path, name: str, what: str) -> Path:
    """``root / name`` after checking ``name`` is a safe relative name that resolves inside
    ``root`` (a symlinked directory on the way cannot lead out); else `UnsafePathError`."""
    if not is_safe_relative_name(name):
        raise UnsafePathError(
            f"{what} {name!r} is not a safe relative name (letters, digits, '_', '.', '@', '+', "
            "'=', '-' in '/'-separated parts; no absolute paths, '..' or hidden parts)"
        )
    path = root / name
    base = root.resolve()
    try:
        inside = path.resolve().is_relative_to(base)
    except (OSError, RuntimeError):  # Python raises RuntimeError for a symlink loop
        raise UnsafePathError(f"{path}: {what} {name!r} is a symlink loop") from None
    if not inside:
        raise UnsafePathError(f"{path}: {what} {name!r} resolves outside {root}")
    return path
