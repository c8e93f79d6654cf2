"""Refreshing the golden store: recompute entries, diff them, and commit what changed.

Everything is validated (root, pattern, manifest entries) and every selected entry computed
in memory before any file is written; the write is one journaled commit
(`harness.store.golden_journal`). A normal test run never refreshes.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from harness.core.files import UnreadableFileError, read_regular_file
from harness.store.golden_diff import diff_data
from harness.store.golden_errors import GoldenError, GoldenUsageError
from harness.store.golden_format import (
    JOURNAL_NAME,
    MANIFEST_ENCODING,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    check_pattern,
    deserialize,
    entry_file,
    read_manifest,
    serialize,
    sha256_hex,
)
from harness.store.golden_journal import Step, commit, recover, store_lock
from harness.store.golden_registry import Builder, GoldenData
from harness.version import __version__


@dataclass
class Change:
    entry: str
    status: str  # "new" | "changed" | "unchanged" | "re-recorded" | "removed"
    details: list[str] = field(default_factory=list)


def refresh(
    root: Path,
    builders: Callable[[], dict[str, tuple[Builder, str]]],
    only: str | None,
    log: Callable[[str], None],
    step: Step,
) -> list[Change]:
    """Recompute entries (all, or those matching the glob ``only``) of the store at ``root``
    and commit the changes; ``builders`` is asked only once root and pattern are valid."""
    check_pattern(only)
    _check_root_for_writing(root)
    all_builders = builders()
    selected = [e for e in all_builders if only is None or fnmatch.fnmatch(e, only)]
    if not selected:
        raise GoldenUsageError(
            f"--only {only!r} matches no golden entry; entries: {', '.join(all_builders)}"
        )
    if not (root / JOURNAL_NAME).exists():
        read_manifest(root)  # a bad manifest is refused before anything is written
    root.mkdir(parents=True, exist_ok=True)
    with store_lock(root, purpose="refresh"):
        recover(root, step)
        changes, staged, entries = _plan_refresh(root, only, selected, all_builders)
        for change in changes:
            log(f"{change.entry}: {change.status}")
            for line in change.details:
                log(f"    {line}")
        removed = [c.entry for c in changes if c.status == "removed"]
        manifest = {
            "format": MANIFEST_FORMAT,
            "encoding": MANIFEST_ENCODING,
            "entries": entries,
        }
        outdated = {k: v for k, v in read_manifest(root).items() if k != "entries"} != {
            k: v for k, v in manifest.items() if k != "entries"
        }
        if staged or removed or outdated:
            commit(root, staged, removed, manifest, step)
    return changes


def _plan_refresh(
    root: Path, only: str | None, selected: list[str], all_builders: dict[str, tuple[Builder, str]]
) -> tuple[list[Change], dict[str, bytes], dict[str, Any]]:
    """What a refresh would write: the changes, the new files and the new manifest."""
    manifest = read_manifest(root)
    entries: dict[str, Any] = dict(manifest["entries"])
    orphans = sorted(set(entries) - set(all_builders)) if only is None else []
    for entry in [*selected, *orphans]:
        entry_file(root, entry)  # every path is confined before anything is computed
    changes: list[Change] = []
    staged: dict[str, bytes] = {}
    for entry in selected:
        builder, generator = all_builders[entry]
        new = builder()
        raw = serialize(new)
        old = _try_load_for_diff(root, entry)
        if old is None:
            change = Change(entry, "new")
        else:
            details = diff_data(old, new)
            change = Change(entry, "changed" if details else "unchanged", details)
        changes.append(change)
        on_disk = _try_read(root, entry)
        on_disk_matches = (
            on_disk is not None
            and on_disk == raw
            and entries.get(entry, {}).get("sha256") == sha256_hex(on_disk)
        )
        if change.status != "unchanged" or not on_disk_matches:
            staged[entry] = raw
            entries[entry] = _record(entry, raw, generator)
            if change.status == "unchanged":
                change.status = "re-recorded"  # same tensors; bytes or record were stale
    for entry in orphans:
        changes.append(Change(entry, "removed"))
        del entries[entry]
    return changes, staged, entries


def _try_read(root: Path, entry: str) -> bytes | None:
    try:
        return read_regular_file(entry_file(root, entry), "golden file")
    except UnreadableFileError:
        return None


def _try_load_for_diff(root: Path, entry: str) -> GoldenData | None:
    path = entry_file(root, entry)
    if not path.exists():
        return None
    try:
        return deserialize(path)
    except GoldenError:
        return None  # a corrupted file is replaced like a missing one


def _record(entry: str, raw: bytes, generator: str) -> dict[str, Any]:
    return {
        "file": f"{entry}.safetensors",
        "sha256": sha256_hex(raw),
        "bytes": len(raw),
        "generator": generator,
        "harness_version": __version__,
        "torch_version": torch.__version__,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _check_root_for_writing(root: Path) -> None:
    """A refresh writes only into a golden store: an existing manifest, or a new/empty
    directory; never into some other directory a mistyped ``--root`` names."""
    if root.exists() and not root.is_dir():
        raise GoldenUsageError(f"--root {root} is not a directory")
    if (
        root.is_dir()
        and not (root / MANIFEST_NAME).exists()
        and any(p.name != JOURNAL_NAME for p in root.iterdir())
    ):
        raise GoldenUsageError(
            f"--root {root} is not a golden store (no {MANIFEST_NAME}) and not empty; "
            "refusing to write into it"
        )
