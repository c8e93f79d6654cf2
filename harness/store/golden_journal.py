"""A refresh's commit: the store's lock and its journal.

A refresh holds an exclusive lock (``flock`` on the store directory; a concurrent refresh is
refused) and commits through a journal (``<root>/.refresh-journal/``): new files and the new
manifest are written there, then a plan is written atomically (the commit point), then files
are renamed into place, manifest last. Whoever next opens the store rolls an unfinished
journal forward (plan written) or back (no plan), so after a kill at any moment the store is
wholly old or wholly new.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.core.files import UnreadableFileError, confined, read_regular_file
from harness.store.golden_errors import GoldenError, GoldenStoreBusyError, GoldenUsageError
from harness.store.golden_format import JOURNAL_NAME, MANIFEST_NAME, entry_file

PLAN_NAME = "PLAN.json"  # written last into the journal: its presence commits the refresh
# called after each file-system step of a commit (the kill-at-every-step self-test stops there)
Step = Callable[[str], None]


@contextlib.contextmanager
def store_lock(root: Path, purpose: str) -> Iterator[None]:
    """An exclusive ``flock`` on the store directory itself (no lock file to leave behind);
    held by another process: refused, never interleaved."""
    import fcntl

    try:
        fd = os.open(root, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise GoldenUsageError(f"cannot {purpose}: {root} cannot be opened ({exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GoldenStoreBusyError(
                f"cannot {purpose}: another process is refreshing {root} (it holds a "
                "lock on the directory); run again when it has finished"
            ) from None
        yield
    finally:
        os.close(fd)


def commit(
    root: Path, staged: dict[str, bytes], removed: list[str], manifest: dict[str, Any], step: Step
) -> None:
    """Write files, manifest and (last, atomically) the plan into the journal; then apply
    it. Call with the lock held."""
    journal = root / JOURNAL_NAME
    shutil.rmtree(journal, ignore_errors=True)
    (journal / "files").mkdir(parents=True)
    step("journal created")
    for entry, raw in staged.items():
        target = confined(journal / "files", f"{entry}.safetensors", "golden entry")
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_synced(target, raw)
        step(f"journaled {entry}")
    manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    _write_synced(journal / MANIFEST_NAME, manifest_bytes)
    step("journaled manifest")
    plan = json.dumps({"staged": sorted(staged), "removed": sorted(removed)}).encode()
    _write_synced(journal / f"{PLAN_NAME}.tmp", plan)
    os.replace(journal / f"{PLAN_NAME}.tmp", journal / PLAN_NAME)
    _fsync_dir(journal)
    step("committed")
    _apply(root, step)


def recover(root: Path, step: Step) -> None:
    """Finish a committed journal, or discard an uncommitted one. Call with the lock."""
    journal = root / JOURNAL_NAME
    if journal.is_symlink() or (journal.exists() and not journal.is_dir()):
        raise GoldenError(f"{journal} is not a directory; remove it and refresh again")
    if not journal.exists():
        return
    if (journal / PLAN_NAME).exists():
        _apply(root, step)
    else:
        shutil.rmtree(journal)


def _apply(root: Path, step: Step) -> None:
    """Rename journaled files into place (manifest last), delete removed entries, then
    drop the journal. Idempotent, so a second kill during it is also rolled forward."""
    journal = root / JOURNAL_NAME
    try:
        plan = json.loads(read_regular_file(journal / PLAN_NAME, "refresh plan"))
        staged = [str(e) for e in plan["staged"]]
        removed = [str(e) for e in plan["removed"]]
    except (UnreadableFileError, ValueError, KeyError, TypeError) as exc:
        raise GoldenError(
            f"{journal / PLAN_NAME} is unreadable ({exc}); remove {journal} and refresh again"
        ) from None
    for entry in staged:
        source = confined(journal / "files", f"{entry}.safetensors", "golden entry")
        if source.exists():
            final = entry_file(root, entry)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, final)
            step(f"installed {entry}")
    if (journal / MANIFEST_NAME).exists():
        os.replace(journal / MANIFEST_NAME, root / MANIFEST_NAME)
        _fsync_dir(root)
        step("installed manifest")
    for entry in removed:
        entry_file(root, entry).unlink(missing_ok=True)
        step(f"removed {entry}")
    (journal / PLAN_NAME).unlink()
    step("plan dropped")
    shutil.rmtree(journal)
    step("journal dropped")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, raw: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())
