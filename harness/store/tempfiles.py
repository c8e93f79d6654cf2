"""Temporary files and staging directories that say who made them, and the sweep that
removes those of a writer that died (SIGKILL, power loss) before renaming them into place.

An atomic write or a staged directory is named ``.<base>.<host>-<pid>.<random>.tmp``: the
next writer into the same directory removes it when its owner is gone: a process of this
host that no longer exists, or (another host's, or one whose pid was reused) once it is
older than `STALE_AFTER_S`. A live writer's file is never touched: its pid answers. A name
without that owner stamp (an earlier version's ``.<name>.<8 chars>.tmp``, or a user's file
of the same shape) is never removed: nothing says it is ours. Each removal is said on stderr.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

# No atomic write or history add takes anywhere near this long; a file this old whose
# owner cannot be asked (another host) is a dead writer's.
STALE_AFTER_S = 24 * 3600.0

_OWNED = re.compile(r"\.(?P<base>.+)\.(?P<host>[0-9a-f]{4})-(?P<pid>[0-9]{1,10})\.[^./]+\.tmp")


def host_tag() -> str:
    """Four hex digits naming this host (not its name) in temp names."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:4]


def owner_tag() -> str:
    """``<host>-<pid>``: the part of a temp name that says which process owns it."""
    return f"{host_tag()}-{os.getpid()}"


def make_temp_file(directory: Path, base: str) -> tuple[int, str]:
    """``mkstemp`` in ``directory`` with an owned name for ``base``: (fd, path)."""
    return tempfile.mkstemp(prefix=f".{base}.{owner_tag()}.", suffix=".tmp", dir=directory)


def make_temp_dir(directory: Path, base: str) -> Path:
    """``mkdtemp`` in ``directory`` with an owned name for ``base``."""
    return Path(tempfile.mkdtemp(prefix=f".{base}.{owner_tag()}.", suffix=".tmp", dir=directory))


def temp_name(base: str) -> str:
    """An owned temp name for ``base`` that no other process of any host can pick."""
    return f".{base}.{owner_tag()}.{os.urandom(4).hex()}.tmp"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process; or no such pid
        return True  # err on the side of the living
    return True


def is_stale(entry: Path, now: float | None = None) -> bool:
    """Whether ``entry`` (a temp file or staging directory) belongs to a dead writer."""
    owned = _OWNED.fullmatch(entry.name)
    if owned is None:
        return False  # no owner stamp: never ours to remove
    try:
        age = (time.time() if now is None else now) - entry.lstat().st_mtime
    except OSError:
        return False  # gone already
    if owned["host"] == host_tag() and not _process_exists(int(owned["pid"])):
        return True
    return age > STALE_AFTER_S  # a reused pid, or another host's


def sweep_stale(directory: Path) -> list[Path]:
    """Remove the dead writers' temp files and staging directories directly in
    ``directory``, each named on stderr; returns what was removed. Never fails a write: an
    entry that cannot be removed (read-only, raced by another sweeper) is left."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for item in entries:
        if not is_stale(Path(item.path)):
            continue
        try:
            if item.is_dir(follow_symlinks=False):
                shutil.rmtree(item.path)
            else:
                os.unlink(item.path)
        except OSError:
            continue
        removed.append(Path(item.path))
        print(f"qharness: removed {item.path} (left by a writer that died)", file=sys.stderr)
    return removed


_SWEPT: set[str] = set()


def sweep_once(directory: Path) -> None:
    """`sweep_stale` the first time this process writes into ``directory`` (a directory of
    many repro bundles is listed once, not once per bundle)."""
    key = os.path.abspath(directory)
    if key in _SWEPT:
        return
    _SWEPT.add(key)
    sweep_stale(directory)
