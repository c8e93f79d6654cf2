"""The golden store: committed safetensors files plus a manifest with provenance.

`GoldenStore` reads entries (each verified against its manifest sha256), checks the whole
store (integrity, strays, staleness against the builders) and refreshes it. The pieces:
builders and `GoldenData` (`golden_registry`), the file format and layout
(`golden_format`), tensor diffs (`golden_diff`), refresh (`golden_refresh`) and its locked,
journaled commit (`golden_journal`). Entry names are confined to the store (no absolute
paths, '..' or hidden parts) before any file is touched. A normal test run never writes
goldens.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.files import UnreadableFileError, read_regular_file
from harness.errors import FileSystemError, UnsafePathError, filesystem_fault
from harness.store.golden_diff import diff_data
from harness.store.golden_errors import (
    GoldenError,
    GoldenStoreBusyError,
    GoldenUsageError,
    missing_entry_hint,
    refresh_command,
)
from harness.store.golden_format import (
    JOURNAL_NAME,
    MANIFEST_NAME,
    check_pattern,
    deserialize,
    entry_file,
    read_manifest,
    sha256_hex,
    store_files,
    stray_files,
)
from harness.store.golden_journal import recover, store_lock
from harness.store.golden_refresh import Change
from harness.store.golden_refresh import refresh as refresh_store
from harness.store.golden_registry import Builder, GoldenData, registered_builders
from harness.store.locations import golden_root

DEFAULT_ROOT = golden_root()  # the checkout's golden/, or the copy shipped in the wheel


class GoldenStore:
    """Read, verify, refresh and check the committed golden tensors."""

    def __init__(
        self,
        root: Path | str = DEFAULT_ROOT,
        entry_builders: dict[str, tuple[Builder, str]] | None = None,
        on_commit_step: Callable[[str], None] | None = None,
    ) -> None:
        """``entry_builders``: what refresh and check recompute (default: every builder
        registered so far; the CLI passes `harness.catalog.golden_builders()`);
        ``on_commit_step`` is called after each file-system step of a refresh's commit (the
        kill-at-every-step self-test stops the process there)."""
        self.root = Path(root)
        self._builders = entry_builders
        self._on_commit_step = on_commit_step
        self._cache: dict[str, GoldenData] = {}

    def builders(self) -> dict[str, tuple[Builder, str]]:
        if self._builders is not None:
            return dict(sorted(self._builders.items()))
        found = registered_builders()
        if not found:
            raise GoldenError(
                "no golden builders are registered; pass entry_builders="
                "harness.catalog.golden_builders() to GoldenStore"
            )
        return found

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_NAME

    @property
    def journal_path(self) -> Path:
        return self.root / JOURNAL_NAME

    def file_for(self, entry: str) -> Path:
        """The entry's file, confined to the store (`UnsafePathError` for '../x', '/x', ...)."""
        return entry_file(self.root, entry)

    def _step(self, name: str) -> None:
        if self._on_commit_step is not None:
            self._on_commit_step(name)

    # -- the manifest
    def manifest(self) -> dict[str, Any]:
        """The validated manifest; finishes (or undoes) an interrupted refresh first."""
        if self.journal_path.exists() or self.journal_path.is_symlink():
            with store_lock(self.root, purpose="finish an interrupted refresh"):
                try:
                    recover(self.root, self._step)
                except OSError as exc:
                    fault = filesystem_fault(exc)
                    if fault is None:
                        raise
                    raise FileSystemError(
                        f"{self.root} holds an interrupted refresh ({JOURNAL_NAME}) that must "
                        f"be finished before it is read, and the store refused it: {fault}; "
                        "make the store writable and rerun, or restore it from git"
                    ) from None
        return read_manifest(self.root)

    # -- reading
    def load(self, entry: str) -> GoldenData:
        """Load one entry after verifying it against the manifest. Cached per process."""
        if entry in self._cache:
            return self._cache[entry]
        record = self.manifest()["entries"].get(entry)
        try:
            path = self.file_for(entry)
        except UnsafePathError as exc:
            raise GoldenError(
                f"{exc}; restore it from git or run: {refresh_command(entry, self.root)}"
            ) from None
        if record is None or not (path.exists() or path.is_symlink()):
            hint = missing_entry_hint(entry, self.root)
            raise GoldenError(f"golden entry {entry!r} is missing ({path}); {hint}")
        try:
            raw = read_regular_file(path, "golden file")
        except UnreadableFileError as exc:
            raise GoldenError(
                f"{exc}; regenerate it with: {refresh_command(entry, self.root)}"
            ) from None
        if sha256_hex(raw) != record["sha256"]:
            raise GoldenError(
                f"{path} does not match its manifest sha256 (corrupted or edited by hand); "
                f"restore it from git, or regenerate it with: {refresh_command(entry, self.root)}"
            )
        data = deserialize(path)
        data.store_root = self.root
        self._cache[entry] = data
        return data

    # -- writing
    def refresh(self, only: str | None = None, log: Callable[[str], None] = print) -> list[Change]:
        """Recompute entries (all, or those matching the glob ``only``) and write changes.

        Everything is validated (root, pattern, manifest entries) before any file is written;
        the commit is journaled (`harness.store.golden_journal`)."""
        changes = refresh_store(self.root, self.builders, only, log, self._step)
        self._cache.clear()
        return changes

    # -- checking
    def check(self, recompute: bool = True, only: str | None = None) -> list[str]:
        """Problems with the store (empty when it is intact and current)."""
        check_pattern(only)
        if self.root.exists() and not self.root.is_dir():
            raise GoldenUsageError(f"--root {self.root} is not a directory")
        problems: list[str] = []
        try:
            manifest = self.manifest()
        except GoldenStoreBusyError:
            raise
        except GoldenError as exc:
            return [str(exc)]
        recorded = manifest["entries"]
        all_builders = self.builders()
        wanted = [e for e in all_builders if only is None or fnmatch.fnmatch(e, only)]
        if not wanted:
            raise GoldenUsageError(
                f"--only {only!r} matches no golden entry; entries: {', '.join(all_builders)}"
            )
        for entry in sorted(set(recorded) - set(all_builders)):
            problems.append(f"{entry}: in the manifest but no builder produces it (orphaned)")
        known = {f"{e}.safetensors" for e in recorded}
        entry_files = store_files(self.root)
        for name in entry_files:
            if name not in known:
                problems.append(f"{self.root / name}: not listed in {MANIFEST_NAME}")
        for name in stray_files(self.root, set(entry_files)):
            problems.append(
                f"{self.root / name}: stray file, not a golden entry (the store holds only "
                f"{MANIFEST_NAME} and <entry>.safetensors files); move it out of the store"
            )
        for entry in wanted:
            try:
                stored = self.load(entry)
            except GoldenError as exc:
                problems.append(str(exc))
                continue
            if not recompute:
                continue
            builder, _ = all_builders[entry]
            details = diff_data(stored, builder())
            if details:
                problems.append(
                    f"{entry}: stale, recomputed tensors differ ({'; '.join(details[:3])}"
                    f"{'; ...' if len(details) > 3 else ''}); review, then run: "
                    f"{refresh_command(entry, self.root)}"
                )
        return problems
