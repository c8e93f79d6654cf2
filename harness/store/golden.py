"""The golden store: committed safetensors files plus a manifest with provenance.

Layout: ``golden/<entry>.safetensors`` (e.g. ``golden/linear/fp8_per_tensor.safetensors``)
and ``golden/MANIFEST.json``. Entries are produced by registered builders; a builder returns
`GoldenData`: tensors compared bit-exactly (inputs, codes, scales) and float64-derived
reference tensors. Nothing here unpickles: safetensors and JSON only.

A refresh holds an exclusive lock (``flock`` on ``golden/``; a concurrent refresh is refused),
computes every selected entry in memory, and commits through a journal
(``golden/.refresh-journal/``): new files and the new manifest are written there, then a plan
is written atomically (the commit point), then files are renamed into place, manifest last.
Whoever next opens the store rolls an unfinished journal forward (plan written) or back (no
plan), so after a kill at any moment the store is wholly old or wholly new. Entry names are
confined to the store (no absolute paths, '..' or hidden parts) before any file is touched,
and golden files are byte-reproducible (sorted tensors, one metadata key). A normal test run
never writes goldens.

File format 2 (``MANIFEST.json`` says ``"format": 2`` and describes it under ``"encoding"``):
the one metadata key, ``golden``, is JSON ``{"reference": [names], "packed": {name: {"bits",
"shape"}}}``; a packed tensor is a uint8 tensor whose values fit in 4 or 6 bits, stored as a
bit stream (`harness.store.packing`) and unpacked on load, so readers see the codes as built.
Format-1 files (metadata key ``reference_keys``, nothing packed) still load; a refresh
rewrites them in format 2. Seeded inputs a builder can regenerate may be stored as a sha256
digest instead (`tensor_digest`), checked by the suite that regenerates them.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fnmatch
import functools
import hashlib
import json
import math
import os
import re
import shlex
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as st_save

from harness.core.files import (
    UnreadableFileError,
    check_regular_file,
    confined,
    is_safe_relative_name,
    read_regular_file,
)
from harness.errors import (
    EXIT_FAILED,
    EXIT_USAGE,
    FileSystemError,
    QHarnessError,
    UnsafePathError,
    filesystem_fault,
)
from harness.store.locations import golden_root
from harness.store.packing import PACKED_WIDTHS, pack_bits, packed_width, unpack_bits
from harness.version import __version__

MANIFEST_NAME = "MANIFEST.json"
JOURNAL_NAME = ".refresh-journal"
PLAN_NAME = "PLAN.json"  # written last into the journal: its presence commits the refresh
METADATA_KEY = "golden"  # the only safetensors metadata key: one key, one byte order
FORMAT_1_METADATA_KEY = "reference_keys"  # format 1: the reference names, nothing packed
MANIFEST_FORMAT = 2
READABLE_FORMATS: tuple[int, ...] = (1, 2)
# How to decode a format-2 file, written into the manifest so a reader needs no other doc.
MANIFEST_ENCODING: dict[str, Any] = {
    "metadata_key": METADATA_KEY,
    "reference": (
        "metadata 'reference' lists the float64-derived reference tensors (float32, compared "
        "within 1 float32 ULP); every other tensor is exact"
    ),
    "packed": (
        "metadata 'packed' maps a tensor to {bits, shape}: that uint8 tensor is stored as a "
        "little-endian bit stream, value i in bits [i*bits, (i+1)*bits) counted from bit 0 "
        "of byte 0, last byte zero-padded; unpack to uint8 and reshape to shape"
    ),
    "packed_widths": list(PACKED_WIDTHS),
}
DEFAULT_ROOT = golden_root()  # the checkout's golden/, or the copy shipped in the wheel


@dataclass
class GoldenData:
    """What a builder produces: exact tensors and float64-derived reference tensors."""

    exact: dict[str, torch.Tensor] = field(default_factory=dict)
    reference: dict[str, torch.Tensor] = field(default_factory=dict)
    # the store it was loaded from, so a message about it names that store's refresh command
    store_root: Path | None = field(default=None, compare=False, repr=False)

    @property
    def tensors(self) -> dict[str, torch.Tensor]:
        return {**self.exact, **self.reference}


Builder = Callable[[], GoldenData]
_BUILDERS: dict[str, tuple[Builder, str]] = {}


def register_golden(entry: str, builder: Builder, generator: str) -> None:
    """Register a builder for ``entry`` (a relative path without suffix, e.g. "linear/x")."""
    if entry in _BUILDERS:
        raise ValueError(f"golden entry {entry!r} registered twice")
    if not is_safe_relative_name(entry):
        raise ValueError(f"golden entry {entry!r} is not a safe relative name")
    _BUILDERS[entry] = (builder, generator)


def register_each(
    build: Callable[..., GoldenData], entries: Iterable[tuple[str, tuple[Any, ...]]]
) -> None:
    """Register ``build(*args)`` under each ``(entry, args)``; the generator is ``build``."""
    generator = f"{build.__module__}:{build.__qualname__}"
    for entry, args in entries:
        register_golden(entry, functools.partial(build, *args), generator)


def registered_builders() -> dict[str, tuple[Builder, str]]:
    """Every builder registered so far. The store imports no case module itself: importing
    them (`harness.catalog.golden_builders`) is the caller's job, so reading or checking
    the store's integrity never loads a path or a kernel."""
    return dict(sorted(_BUILDERS.items()))


class GoldenError(QHarnessError):
    """A golden entry that is missing, corrupted or stale; the message says what to do."""

    exit_code = EXIT_FAILED


class GoldenStoreBusyError(GoldenError):
    """Another process is refreshing this store; refused rather than interleaved."""

    exit_code = EXIT_USAGE


class GoldenUsageError(GoldenError):
    """A refresh or check asked for something the store cannot do (bad pattern, bad root)."""

    exit_code = EXIT_USAGE


def refresh_command(entry: str, root: Path | None = None) -> str:
    """The command that rebuilds ``entry`` in the store at ``root``: ``--root`` is added
    whenever that is not the default store, so the command can be pasted as it is."""
    return f"python -m harness golden refresh --only '{entry}'{root_option(root)}"


def root_option(root: Path | None) -> str:
    """`` --root DIR`` (absolute, shell-quoted) for a store other than the default one, or
    nothing: what a suggested command must carry to act on the store the user named."""
    if root is None or _is_default_root(root):
        return ""
    return f" --root {shlex.quote(os.path.abspath(root))}"


def _is_default_root(root: Path) -> bool:
    from harness.store.locations import golden_root

    return Path(root).resolve() == golden_root().resolve()


def missing_entry_hint(entry: str, root: Path) -> str:
    """What to do about a missing entry: never a refresh into an installed package's copy
    (site-packages); for another store, a refresh with its ``--root``."""
    from harness.store.locations import SHIPPED_ROOT

    resolved = Path(root).resolve()
    if resolved.is_relative_to(SHIPPED_ROOT.resolve()):
        return (
            "the goldens shipped with the installed qharness lack it (a damaged install: "
            "reinstall qharness), or point --qharness-golden / ini qharness_golden at a store "
            f"of your own and run: {refresh_command(entry)} --root DIR"
        )
    return f"create it with: {refresh_command(entry, root)}"


# --------------------------------------------------------------------- serialization
def _serialize(data: GoldenData) -> bytes:
    overlap = set(data.exact) & set(data.reference)
    if overlap:
        raise ValueError(f"tensor names both exact and reference: {sorted(overlap)}")
    tensors: dict[str, torch.Tensor] = {}
    packed: dict[str, dict[str, Any]] = {}
    for name, t in sorted(data.tensors.items()):
        t = t.detach().cpu().contiguous().clone()
        bits = packed_width(t)
        if bits is not None:
            packed[name] = {"bits": bits, "shape": list(t.shape)}
            t = pack_bits(t, bits)
        tensors[name] = t
    # safetensors keeps metadata in a hash map whose order varies between processes; with a
    # single key the header, and so the file, is the same bytes in every process.
    layout = {"reference": sorted(data.reference), "packed": packed}
    metadata = {METADATA_KEY: json.dumps(layout, sort_keys=True)}
    return bytes(st_save(tensors, metadata=metadata))


def _file_layout(
    metadata: dict[str, str],
) -> tuple[set[str], dict[str, tuple[int, tuple[int, ...]]]]:
    """(reference names, packed name -> (bits, shape)) from a golden file's metadata, format
    2 or 1; ValueError naming what is wrong."""
    if METADATA_KEY in metadata:
        layout = json.loads(metadata[METADATA_KEY])
        if not isinstance(layout, dict):
            raise ValueError(f"metadata {METADATA_KEY!r} is not an object")
        reference, packed_raw = layout.get("reference"), layout.get("packed")
    elif FORMAT_1_METADATA_KEY in metadata:
        reference, packed_raw = json.loads(metadata[FORMAT_1_METADATA_KEY]), {}
    else:
        raise ValueError(f"no {METADATA_KEY!r} (or format-1 {FORMAT_1_METADATA_KEY!r}) metadata")
    if not isinstance(reference, list) or not isinstance(packed_raw, dict):
        raise ValueError(
            f"metadata {METADATA_KEY!r}: 'reference' must be a list, 'packed' an object"
        )
    packed: dict[str, tuple[int, tuple[int, ...]]] = {}
    for name, spec in packed_raw.items():
        bits = spec.get("bits") if isinstance(spec, dict) else None
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if (
            bits not in PACKED_WIDTHS
            or not isinstance(shape, list)
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise ValueError(
                f"packed[{name!r}] must be {{bits: one of {list(PACKED_WIDTHS)}, shape: [sizes]}}, "
                f"got {spec!r}"
            )
        packed[str(name)] = (int(bits), tuple(shape))
    return {str(k) for k in reference}, packed


def _deserialize(path: Path) -> GoldenData:
    try:
        check_regular_file(path, "golden file")
        with safe_open(str(path), framework="pt") as f:
            reference_keys, packed = _file_layout(f.metadata() or {})
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - not a dict
        for name, (bits, shape) in packed.items():
            if math.prod(shape) > 8 * tensors[name].numel():  # before allocating anything
                raise ValueError(f"packed[{name!r}] shape {list(shape)} exceeds its bytes")
            tensors[name] = unpack_bits(tensors[name], bits, shape)
    except (SafetensorError, OSError, ValueError, KeyError, RecursionError) as exc:
        raise GoldenError(f"{path} is not a readable golden file ({exc})") from exc
    except UnreadableFileError as exc:
        raise GoldenError(str(exc)) from None
    return GoldenData(
        exact={k: v for k, v in tensors.items() if k not in reference_keys},
        reference={k: v for k, v in tensors.items() if k in reference_keys},
    )


def tensor_digest(t: torch.Tensor) -> torch.Tensor:
    """sha256 of a tensor's raw bytes in its own dtype (NaN payloads and subnormals
    included), uint8 [32]: stored in place of a seeded input the builder can regenerate."""
    raw = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return torch.frombuffer(bytearray(hashlib.sha256(raw).digest()), dtype=torch.uint8)


def regenerated(entry: str, name: str, tensor: torch.Tensor, data: GoldenData) -> torch.Tensor:
    """``tensor``, regenerated from its seed, after checking it against the digest the
    golden stores as ``<name>_sha256``; a GoldenError (never a quiet mismatch) otherwise."""
    stored = data.tensors.get(f"{name}_sha256")
    if stored is None:
        raise GoldenError(
            f"golden {entry} has no {name}_sha256 (written when it stored {name} itself?); "
            f"run: {refresh_command(entry, data.store_root)}"
        )
    if not torch.equal(tensor_digest(tensor), stored):
        raise GoldenError(
            f"golden {entry}: the regenerated {name} differs from the one the golden was built "
            "from (its generator or torch changed?); if intended, review and run: "
            f"{refresh_command(entry, data.store_root)}"
        )
    return tensor


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


# ----------------------------------------------------------------------- comparison
def _float32_ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """ULP distance between float32 tensors via their ordered integer images."""
    ia = a.float().contiguous().view(torch.int32).long()
    ib = b.float().contiguous().view(torch.int32).long()
    ia = torch.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return (ia - ib).abs()


# Reference tensors are float64 sums rounded to float32; another BLAS may sum in another
# order and flip the float32 rounding by one ULP. More than that is a real change.
REFERENCE_ULP_ALLOWANCE = 1


def diff_tensors(name: str, old: torch.Tensor, new: torch.Tensor, reference: bool) -> str | None:
    """One line describing how ``new`` differs from ``old``, or None when equal."""
    if old.shape != new.shape or old.dtype != new.dtype:
        return (
            f"{name}: shape/dtype {tuple(old.shape)} {old.dtype} -> {tuple(new.shape)} {new.dtype}"
        )
    if reference:
        ulps = _float32_ulp_distance(old, new)
        if int(ulps.max()) <= REFERENCE_ULP_ALLOWANCE if ulps.numel() else True:
            return None
        err = (old.double() - new.double()).abs().max().item()
        return (
            f"{name}: reference moved, max {int(ulps.max())} float32 ULPs, max abs diff {err:.3g} "
            f"(old max|x| {old.double().abs().max().item():.6g}, "
            f"new {new.double().abs().max().item():.6g})"
        )
    from harness.core.compare import bit_mismatches

    n = bit_mismatches(new, old)
    if n == 0:
        return None
    if old.is_floating_point():
        detail = (
            f"max|x| old {old.double().abs().max().item():.6g} new "
            f"{new.double().abs().max().item():.6g}"
        )
    else:
        detail = f"sum old {int(old.long().sum())} new {int(new.long().sum())}"
    return f"{name}: {n}/{new.numel()} elements differ bit-wise ({detail})"


def diff_data(old: GoldenData, new: GoldenData) -> list[str]:
    lines: list[str] = []
    old_t, new_t = old.tensors, new.tensors
    for name in sorted(set(old_t) - set(new_t)):
        lines.append(f"{name}: removed")
    for name in sorted(set(new_t) - set(old_t)):
        lines.append(f"{name}: added {tuple(new_t[name].shape)} {new_t[name].dtype}")
    for name in sorted(set(old_t) & set(new_t)):
        line = diff_tensors(name, old_t[name], new_t[name], name in new.reference)
        if line:
            lines.append(line)
    return lines


# ----------------------------------------------------------------------------- store
@dataclass
class Change:
    entry: str
    status: str  # "new" | "changed" | "unchanged" | "re-recorded" | "removed"
    details: list[str] = field(default_factory=list)


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
        return confined(self.root, f"{entry}.safetensors", "golden entry")

    # -- the manifest
    def manifest(self) -> dict[str, Any]:
        """The validated manifest; finishes (or undoes) an interrupted refresh first."""
        if self.journal_path.exists() or self.journal_path.is_symlink():
            with self._lock(purpose="finish an interrupted refresh"):
                try:
                    self._recover()
                except OSError as exc:
                    fault = filesystem_fault(exc)
                    if fault is None:
                        raise
                    raise FileSystemError(
                        f"{self.root} holds an interrupted refresh ({JOURNAL_NAME}) that must "
                        f"be finished before it is read, and the store refused it: {fault}; "
                        "make the store writable and rerun, or restore it from git"
                    ) from None
        return self._read_manifest()

    def _read_manifest(self) -> dict[str, Any]:
        path = self.manifest_path
        if not path.exists() and not path.is_symlink():
            return {"format": MANIFEST_FORMAT, "encoding": MANIFEST_ENCODING, "entries": {}}
        fix = (
            "restore it from git (`git checkout -- golden/MANIFEST.json`), or delete it and run "
            f"`python -m harness golden refresh{root_option(self.root)}`"
        )
        try:
            data = json.loads(read_regular_file(path, "golden manifest").decode("utf-8"))
        except UnreadableFileError as exc:
            raise GoldenError(f"{exc}; {fix}") from None
        except (ValueError, RecursionError) as exc:  # JSON, UTF-8, nesting
            raise GoldenError(f"{path} is not a valid manifest ({exc}); {fix}") from None
        problem = _manifest_problem(data)
        if problem:
            raise GoldenError(f"{path}: {problem}; {fix}")
        return dict(data)

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
        if _sha256(raw) != record["sha256"]:
            raise GoldenError(
                f"{path} does not match its manifest sha256 (corrupted or edited by hand); "
                f"restore it from git, or regenerate it with: {refresh_command(entry, self.root)}"
            )
        data = _deserialize(path)
        data.store_root = self.root
        self._cache[entry] = data
        return data

    # -- writing
    def refresh(self, only: str | None = None, log: Callable[[str], None] = print) -> list[Change]:
        """Recompute entries (all, or those matching the glob ``only``) and write changes.

        Everything is validated (root, pattern, manifest entries) before any file is written;
        the commit is journaled (see the module docstring)."""
        _check_pattern(only)
        self._check_root_for_writing()
        all_builders = self.builders()
        selected = [e for e in all_builders if only is None or fnmatch.fnmatch(e, only)]
        if not selected:
            raise GoldenUsageError(
                f"--only {only!r} matches no golden entry; entries: {', '.join(all_builders)}"
            )
        if not self.journal_path.exists():
            self._read_manifest()  # a bad manifest is refused before anything is written
        self.root.mkdir(parents=True, exist_ok=True)
        with self._lock(purpose="refresh"):
            self._recover()
            changes, staged, entries = self._plan_refresh(only, selected, all_builders)
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
            outdated = {k: v for k, v in self._read_manifest().items() if k != "entries"} != {
                k: v for k, v in manifest.items() if k != "entries"
            }
            if staged or removed or outdated:
                self._commit(staged, removed, manifest)
        self._cache.clear()
        return changes

    def _plan_refresh(
        self, only: str | None, selected: list[str], all_builders: dict[str, tuple[Builder, str]]
    ) -> tuple[list[Change], dict[str, bytes], dict[str, Any]]:
        """What a refresh would write: the changes, the new files and the new manifest."""
        manifest = self._read_manifest()
        entries: dict[str, Any] = dict(manifest["entries"])
        orphans = sorted(set(entries) - set(all_builders)) if only is None else []
        for entry in [*selected, *orphans]:
            self.file_for(entry)  # every path is confined before anything is computed
        changes: list[Change] = []
        staged: dict[str, bytes] = {}
        for entry in selected:
            builder, generator = all_builders[entry]
            new = builder()
            raw = _serialize(new)
            old = self._try_load_for_diff(entry)
            if old is None:
                change = Change(entry, "new")
            else:
                details = diff_data(old, new)
                change = Change(entry, "changed" if details else "unchanged", details)
            changes.append(change)
            on_disk = self._try_read(entry)
            on_disk_matches = (
                on_disk is not None
                and on_disk == raw
                and entries.get(entry, {}).get("sha256") == _sha256(on_disk)
            )
            if change.status != "unchanged" or not on_disk_matches:
                staged[entry] = raw
                entries[entry] = self._record(entry, raw, generator)
                if change.status == "unchanged":
                    change.status = "re-recorded"  # same tensors; bytes or record were stale
        for entry in orphans:
            changes.append(Change(entry, "removed"))
            del entries[entry]
        return changes, staged, entries

    def _try_read(self, entry: str) -> bytes | None:
        try:
            return read_regular_file(self.file_for(entry), "golden file")
        except UnreadableFileError:
            return None

    def _try_load_for_diff(self, entry: str) -> GoldenData | None:
        path = self.file_for(entry)
        if not path.exists():
            return None
        try:
            return _deserialize(path)
        except GoldenError:
            return None  # a corrupted file is replaced like a missing one

    def _record(self, entry: str, raw: bytes, generator: str) -> dict[str, Any]:
        return {
            "file": f"{entry}.safetensors",
            "sha256": _sha256(raw),
            "bytes": len(raw),
            "generator": generator,
            "harness_version": __version__,
            "torch_version": torch.__version__,
            "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def _check_root_for_writing(self) -> None:
        """A refresh writes only into a golden store: an existing manifest, or a new/empty
        directory; never into some other directory a mistyped ``--root`` names."""
        root = self.root
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

    # -- the journaled commit
    @contextlib.contextmanager
    def _lock(self, purpose: str) -> Iterator[None]:
        """An exclusive ``flock`` on the store directory itself (no lock file to leave behind);
        held by another process: refused, never interleaved."""
        import fcntl

        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise GoldenUsageError(
                f"cannot {purpose}: {self.root} cannot be opened ({exc})"
            ) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise GoldenStoreBusyError(
                    f"cannot {purpose}: another process is refreshing {self.root} (it holds a "
                    "lock on the directory); run again when it has finished"
                ) from None
            yield
        finally:
            os.close(fd)

    def _step(self, name: str) -> None:
        if self._on_commit_step is not None:
            self._on_commit_step(name)

    def _commit(
        self, staged: dict[str, bytes], removed: list[str], manifest: dict[str, Any]
    ) -> None:
        """Write files, manifest and (last, atomically) the plan into the journal; then apply
        it. Call with the lock held."""
        journal = self.journal_path
        shutil.rmtree(journal, ignore_errors=True)
        (journal / "files").mkdir(parents=True)
        self._step("journal created")
        for entry, raw in staged.items():
            target = confined(journal / "files", f"{entry}.safetensors", "golden entry")
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_synced(target, raw)
            self._step(f"journaled {entry}")
        manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
        _write_synced(journal / MANIFEST_NAME, manifest_bytes)
        self._step("journaled manifest")
        plan = json.dumps({"staged": sorted(staged), "removed": sorted(removed)}).encode()
        _write_synced(journal / f"{PLAN_NAME}.tmp", plan)
        os.replace(journal / f"{PLAN_NAME}.tmp", journal / PLAN_NAME)
        _fsync_dir(journal)
        self._step("committed")
        self._apply_journal()

    def _recover(self) -> None:
        """Finish a committed journal, or discard an uncommitted one. Call with the lock."""
        journal = self.journal_path
        if journal.is_symlink() or (journal.exists() and not journal.is_dir()):
            raise GoldenError(f"{journal} is not a directory; remove it and refresh again")
        if not journal.exists():
            return
        if (journal / PLAN_NAME).exists():
            self._apply_journal()
        else:
            shutil.rmtree(journal)

    def _apply_journal(self) -> None:
        """Rename journaled files into place (manifest last), delete removed entries, then
        drop the journal. Idempotent, so a second kill during it is also rolled forward."""
        journal = self.journal_path
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
                final = self.file_for(entry)
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(source, final)
                self._step(f"installed {entry}")
        if (journal / MANIFEST_NAME).exists():
            os.replace(journal / MANIFEST_NAME, self.manifest_path)
            _fsync_dir(self.root)
            self._step("installed manifest")
        for entry in removed:
            self.file_for(entry).unlink(missing_ok=True)
            self._step(f"removed {entry}")
        (journal / PLAN_NAME).unlink()
        self._step("plan dropped")
        shutil.rmtree(journal)
        self._step("journal dropped")

    # -- checking
    def check(self, recompute: bool = True, only: str | None = None) -> list[str]:
        """Problems with the store (empty when it is intact and current)."""
        _check_pattern(only)
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
        entry_files = _store_files(self.root)
        for name in entry_files:
            if name not in known:
                problems.append(f"{self.root / name}: not listed in {MANIFEST_NAME}")
        for name in _stray_files(self.root, set(entry_files)):
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


def _manifest_problem(data: Any) -> str | None:
    """What is structurally wrong with a parsed manifest (naming the field), or None."""
    if not isinstance(data, dict):
        return f"the manifest must be a JSON object, got {type(data).__name__}"
    version = data.get("format", 1)
    if version not in READABLE_FORMATS or isinstance(version, bool):
        return (
            f"field 'format' is {version!r}; this qharness reads formats "
            f"{', '.join(map(str, READABLE_FORMATS))} (a newer qharness wrote it? upgrade)"
        )
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return "field 'entries' must be an object of entry name -> record"
    for entry, record in entries.items():
        if not is_safe_relative_name(entry):
            return (
                f"entries[{entry!r}]: not a safe relative name inside the store (absolute paths, "
                "'..' and hidden parts are refused)"
            )
        if not isinstance(record, dict):
            return f"entries[{entry!r}] must be an object, got {type(record).__name__}"
        sha = record.get("sha256")
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
            return f"entries[{entry!r}].sha256 must be 64 lowercase hex digits, got {sha!r}"
        if record.get("file", f"{entry}.safetensors") != f"{entry}.safetensors":
            return f"entries[{entry!r}].file must be {entry}.safetensors, got {record['file']!r}"
    return None


def _check_pattern(only: str | None) -> None:
    """``--only`` globs entry names: relative, no '..', no absolute paths, no NUL."""
    if only is None:
        return
    parts = only.split("/")
    absolute = PurePosixPath(only).is_absolute()
    if not only or absolute or "\\" in only or "\0" in only or ".." in parts:
        raise GoldenUsageError(
            f"--only {only!r} must be a glob over entry names such as 'linear/fp8_*' (relative, "
            "no '..', no absolute path)"
        )


def _store_files(root: Path) -> list[str]:
    """Relative names of ``*.safetensors`` under ``root``, not following symlinked
    directories and skipping hidden ones (the journal)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if is_safe_relative_name(d))  # not hidden
        base = Path(dirpath).relative_to(root)
        names = [*filenames, *dirnames]  # a directory named x.safetensors is a problem too
        found += [(base / n).as_posix() for n in names if Path(n).suffix == ".safetensors"]
    return sorted(found)


def _stray_files(root: Path, entry_files: set[str]) -> list[str]:
    """Relative names of everything under ``root`` that is neither the manifest, nor one of
    ``entry_files`` (`_store_files`), nor in the refresh journal: a ``.pt`` or ``.txt`` left
    there, a copy in a hidden or oddly named directory, a symlinked directory. The store owns
    every file in it; an audit that skipped the others would pass a store holding anything."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath).relative_to(root)
        if base == Path("."):
            dirnames[:] = [d for d in dirnames if d != JOURNAL_NAME]
        linked = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames.sort()
        for name in [*filenames, *linked]:
            relative = (base / name).as_posix()
            if relative != MANIFEST_NAME and relative not in entry_files:
                found.append(relative)
    return sorted(found)


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
