"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Write to a temporary file in the same directory, fsync it, then `os.replace` it over the
target (atomic on POSIX within one file system). Used for results, reports and pointers.
Temp names say which process made them (`harness.store.tempfiles`): the first write into a
directory removes the temp files a killed writer left there.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.store.tempfiles import make_temp_file, sweep_once, sweep_stale, temp_name


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; the directory is created if needed. An
    `OSError` names ``path`` (a full disk fails a write() that names no file)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_once(path.parent)
        fd, tmp = make_temp_file(path.parent, path.name)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # what open() would give, not mkstemp's 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """`write_bytes_atomic` for UTF-8 text."""
    write_bytes_atomic(path, text.encode("utf-8"))


def point_symlink_atomic(link: Path, target: str) -> None:
    """Make ``link`` a symlink to ``target`` (relative), replacing any old one atomically."""
    link = Path(link)
    sweep_stale(link.parent)  # a pointer moves once per run: always worth a look
    tmp = link.with_name(temp_name(link.name))
    os.symlink(target, tmp)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
