"""The golden store: committed safetensors files plus a manifest with provenance.

Layout: ``golden/<entry>.safetensors`` (e.g. ``golden/linear/fp8_per_tensor.safetensors``)
and ``golden/MANIFEST.json``. Entries are produced by registered builders; a builder returns
`GoldenData`: tensors compared bit-exactly (inputs, codes, scales) and float64-derived
reference tensors. Nothing here unpickles: safetensors and JSON only.

A refresh computes every selected entry in memory, writes new files to a staging directory,
and only then renames them into place (manifest last), so an interrupted refresh leaves the
old store intact. A normal test run never writes goldens.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import functools
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as st_save

import harness
from harness.errors import EXIT_FAILED, QHarnessError

MANIFEST_NAME = "MANIFEST.json"
MANIFEST_FORMAT = 1
DEFAULT_ROOT = Path(__file__).resolve().parent.parent.parent / "golden"


@dataclass
class GoldenData:
    """What a builder produces: exact tensors and float64-derived reference tensors."""

    exact: dict[str, torch.Tensor] = field(default_factory=dict)
    reference: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def tensors(self) -> dict[str, torch.Tensor]:
        return {**self.exact, **self.reference}


Builder = Callable[[], GoldenData]
_BUILDERS: dict[str, tuple[Builder, str]] = {}


def register_golden(entry: str, builder: Builder, generator: str) -> None:
    """Register a builder for ``entry`` (a relative path without suffix, e.g. "linear/x")."""
    if entry in _BUILDERS:
        raise ValueError(f"golden entry {entry!r} registered twice")
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


def refresh_command(entry: str) -> str:
    return f"python -m harness golden refresh --only '{entry}'"


# --------------------------------------------------------------------- serialization
def _serialize(data: GoldenData) -> bytes:
    overlap = set(data.exact) & set(data.reference)
    if overlap:
        raise ValueError(f"tensor names both exact and reference: {sorted(overlap)}")
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in sorted(data.tensors.items())}
    metadata = {
        "qharness_golden_format": str(MANIFEST_FORMAT),
        "reference_keys": json.dumps(sorted(data.reference)),
    }
    return bytes(st_save(tensors, metadata=metadata))


def _deserialize(path: Path) -> GoldenData:
    try:
        with safe_open(str(path), framework="pt") as f:
            reference_keys = set(json.loads((f.metadata() or {})["reference_keys"]))
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - not a dict
    except (SafetensorError, OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        raise GoldenError(f"{path} is not a readable golden file ({exc})") from exc
    return GoldenData(
        exact={k: v for k, v in tensors.items() if k not in reference_keys},
        reference={k: v for k, v in tensors.items() if k in reference_keys},
    )


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
    ) -> None:
        """``entry_builders``: what refresh and check recompute (default: every builder
        registered so far; the CLI passes `harness.catalog.golden_builders()`)."""
        self.root = Path(root)
        self._builders = entry_builders
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

    def file_for(self, entry: str) -> Path:
        return self.root / f"{entry}.safetensors"

    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {"format": MANIFEST_FORMAT, "entries": {}}
        try:
            data: dict[str, Any] = json.loads(self.manifest_path.read_text())
            if not isinstance(data.get("entries"), dict):
                raise ValueError("no 'entries' object")
        except (ValueError, json.JSONDecodeError) as exc:
            raise GoldenError(
                f"{self.manifest_path} is not a valid manifest ({exc}); restore it from git "
                "or run `python -m harness golden refresh`"
            ) from exc
        return data

    # -- reading
    def load(self, entry: str) -> GoldenData:
        """Load one entry after verifying it against the manifest. Cached per process."""
        if entry in self._cache:
            return self._cache[entry]
        record = self.manifest()["entries"].get(entry)
        path = self.file_for(entry)
        if record is None or not path.exists():
            raise GoldenError(
                f"golden entry {entry!r} is missing ({path}); create it with: "
                f"{refresh_command(entry)}"
            )
        raw = path.read_bytes()
        if _sha256(raw) != record["sha256"]:
            raise GoldenError(
                f"{path} does not match its manifest sha256 (corrupted or edited by hand); "
                f"restore it from git, or regenerate it with: {refresh_command(entry)}"
            )
        data = _deserialize(path)
        self._cache[entry] = data
        return data

    # -- writing
    def refresh(self, only: str | None = None, log: Callable[[str], None] = print) -> list[Change]:
        """Recompute entries (all, or those matching the glob ``only``) and write changes."""
        all_builders = self.builders()
        selected = [e for e in all_builders if only is None or fnmatch.fnmatch(e, only)]
        if not selected:
            raise GoldenError(
                f"--only {only!r} matches no golden entry; entries: {', '.join(all_builders)}"
            )
        manifest = self.manifest()
        entries: dict[str, Any] = dict(manifest["entries"])
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
            on_disk_matches = old is not None and entries.get(entry, {}).get("sha256") == _sha256(
                self.file_for(entry).read_bytes()
            )
            if change.status != "unchanged" or not on_disk_matches:
                staged[entry] = raw
                entries[entry] = self._record(entry, raw, generator)
                if change.status == "unchanged":
                    change.status = "re-recorded"  # same tensors, manifest record was wrong
        if only is None:
            for entry in sorted(set(entries) - set(all_builders)):
                changes.append(Change(entry, "removed"))
                del entries[entry]
        for change in changes:
            log(f"{change.entry}: {change.status}")
            for line in change.details:
                log(f"    {line}")
        removed = [c.entry for c in changes if c.status == "removed"]
        if staged or removed:
            self._commit(staged, removed, {"format": MANIFEST_FORMAT, "entries": entries})
        self._cache.clear()
        return changes

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
            "file": self.file_for(entry).relative_to(self.root).as_posix(),
            "sha256": _sha256(raw),
            "bytes": len(raw),
            "generator": generator,
            "harness_version": harness.__version__,
            "torch_version": torch.__version__,
            "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def _commit(
        self, staged: dict[str, bytes], removed: list[str], manifest: dict[str, Any]
    ) -> None:
        """Write everything to a staging dir first; then rename into place, manifest last."""
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            for entry, raw in staged.items():
                target = staging / f"{entry}.safetensors"
                target.parent.mkdir(parents=True, exist_ok=True)
                _write_synced(target, raw)
            manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
            _write_synced(staging / MANIFEST_NAME, manifest_bytes)
            for entry in staged:
                final = self.file_for(entry)
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / f"{entry}.safetensors", final)
            os.replace(staging / MANIFEST_NAME, self.manifest_path)
            for entry in removed:
                self.file_for(entry).unlink(missing_ok=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    # -- checking
    def check(self, recompute: bool = True, only: str | None = None) -> list[str]:
        """Problems with the store (empty when it is intact and current)."""
        problems: list[str] = []
        try:
            manifest = self.manifest()
        except GoldenError as exc:
            return [str(exc)]
        recorded = manifest["entries"]
        all_builders = self.builders()
        wanted = [e for e in all_builders if only is None or fnmatch.fnmatch(e, only)]
        if not wanted:
            raise GoldenError(
                f"--only {only!r} matches no golden entry; entries: {', '.join(all_builders)}"
            )
        for entry in sorted(set(recorded) - set(all_builders)):
            problems.append(f"{entry}: in the manifest but no builder produces it (orphaned)")
        known_files = {self.file_for(e).resolve() for e in recorded}
        for path in sorted(self.root.rglob("*.safetensors")):
            if path.resolve() not in known_files and ".staging-" not in str(path):
                problems.append(f"{path}: not listed in {MANIFEST_NAME}")
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
                    f"{refresh_command(entry)}"
                )
        return problems


def _write_synced(path: Path, raw: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())
