"""The golden store on disk: file format, manifest and directory layout.

Layout: ``<root>/<entry>.safetensors`` (e.g. ``golden/linear/fp8_per_tensor.safetensors``)
and ``<root>/MANIFEST.json``. Nothing here unpickles: safetensors and JSON only, and golden
files are byte-reproducible (sorted tensors, one metadata key).

File format 2 (``MANIFEST.json`` says ``"format": 2`` and describes it under ``"encoding"``):
the one metadata key, ``golden``, is JSON ``{"reference": [names], "packed": {name: {"bits",
"shape"}}}``; a packed tensor is a uint8 tensor whose values fit in 4 or 6 bits, stored as a
bit stream (`harness.store.packing`) and unpacked on load, so readers see the codes as built.
Format-1 files (metadata key ``reference_keys``, nothing packed) still load; a refresh
rewrites them in format 2.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
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
from harness.store.golden_errors import GoldenError, GoldenUsageError, root_option
from harness.store.golden_registry import GoldenData
from harness.store.packing import PACKED_WIDTHS, pack_bits, packed_width, unpack_bits

MANIFEST_NAME = "MANIFEST.json"
JOURNAL_NAME = ".refresh-journal"
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


def entry_file(root: Path, entry: str) -> Path:
    """The entry's file, confined to the store (`UnsafePathError` for '../x', '/x', ...)."""
    return confined(root, f"{entry}.safetensors", "golden entry")


def serialize(data: GoldenData) -> bytes:
    """The file's bytes: the same in every process for the same tensors."""
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


def file_layout(
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


def deserialize(path: Path) -> GoldenData:
    """A golden file's tensors, packed ones unpacked; a GoldenError for anything unreadable."""
    try:
        check_regular_file(path, "golden file")
        with safe_open(str(path), framework="pt") as f:
            reference_keys, packed = file_layout(f.metadata() or {})
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


def sha256_hex(raw: bytes) -> str:
    """The digest the manifest records for a file's bytes."""
    return hashlib.sha256(raw).hexdigest()


def read_manifest(root: Path) -> dict[str, Any]:
    """The validated manifest at ``root`` (an empty one when there is none); a GoldenError
    that says how to restore it otherwise."""
    path = root / MANIFEST_NAME
    if not path.exists() and not path.is_symlink():
        return {"format": MANIFEST_FORMAT, "encoding": MANIFEST_ENCODING, "entries": {}}
    fix = (
        "restore it from git (`git checkout -- golden/MANIFEST.json`), or delete it and run "
        f"`python -m harness golden refresh{root_option(root)}`"
    )
    try:
        data = json.loads(read_regular_file(path, "golden manifest").decode("utf-8"))
    except UnreadableFileError as exc:
        raise GoldenError(f"{exc}; {fix}") from None
    except (ValueError, RecursionError) as exc:  # JSON, UTF-8, nesting
        raise GoldenError(f"{path} is not a valid manifest ({exc}); {fix}") from None
    problem = manifest_problem(data)
    if problem:
        raise GoldenError(f"{path}: {problem}; {fix}")
    return dict(data)


def manifest_problem(data: Any) -> str | None:
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


def check_pattern(only: str | None) -> None:
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


def store_files(root: Path) -> list[str]:
    """Relative names of ``*.safetensors`` under ``root``, not following symlinked
    directories and skipping hidden ones (the journal)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if is_safe_relative_name(d))  # not hidden
        base = Path(dirpath).relative_to(root)
        names = [*filenames, *dirnames]  # a directory named x.safetensors is a problem too
        found += [(base / n).as_posix() for n in names if Path(n).suffix == ".safetensors"]
    return sorted(found)


def stray_files(root: Path, entry_files: set[str]) -> list[str]:
    """Relative names of everything under ``root`` that is neither the manifest, nor one of
    ``entry_files`` (`store_files`), nor in the refresh journal: a ``.pt`` or ``.txt`` left
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
