"""Repro bundles: one failing case as a safetensors file, re-runnable anywhere.

A bundle holds the case's tensors (inputs, quantized operands and scales, the path's output,
the reference) and, in its metadata, the test id, the case's fields, the metrics, the
verdict and the platform and versions it failed on. File names come from the test id with
every character outside ``[A-Za-z0-9._-]`` replaced, so they are safe on any file system.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from harness.errors import QHarnessError
from harness.store.atomic import write_bytes_atomic
from harness.store.bundle_names import SUFFIX as SUFFIX  # re-exported: bundle names live there
from harness.store.bundle_names import bundle_filename as bundle_filename

BUNDLE_FORMAT = "qharness.repro/1"
# Metadata fields the re-runners read as JSON objects (`write_bundle`'s callers write them so).
OBJECT_FIELDS = ("case", "platform")


class ReproError(QHarnessError):
    """A repro bundle that cannot be read or re-run."""


@dataclass(frozen=True)
class Bundle:
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any]


def write_bundle(directory: Path, nodeid: str, bundle: Bundle) -> Path:
    """Write ``bundle`` for test ``nodeid`` into ``directory`` (atomically); return its path."""
    meta = {"format": BUNDLE_FORMAT, "nodeid": nodeid, **bundle.meta}
    tensors = {k: v.detach().cpu().contiguous() for k, v in sorted(bundle.tensors.items())}
    data = save(tensors, metadata={"qharness": json.dumps(meta, sort_keys=True, default=str)})
    path = Path(directory) / bundle_filename(nodeid)
    write_bytes_atomic(path, data)
    return path


def read_bundle(path: Path) -> Bundle:
    """Read a bundle; a missing, foreign or damaged file is a `ReproError`."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        if not path.exists():
            raise ReproError(f"repro bundle {path} does not exist")
        kind = "a directory" if path.is_dir() else "not a regular file (a FIFO, socket, device)"
        raise ReproError(f"repro bundle {path} is {kind}; name a repro/<test>.safetensors file")
    try:
        with safe_open(str(path), framework="pt") as handle:
            raw = (handle.metadata() or {}).get("qharness")
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ReproError(f"{path} is not a readable safetensors file ({exc})") from exc
    try:
        meta = json.loads(raw or "")
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested past any bundle's
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != BUNDLE_FORMAT:
        raise ReproError(f"{path} is not a qharness repro bundle (format {BUNDLE_FORMAT})")
    for name in OBJECT_FIELDS:  # null counts as absent, as the re-runners read it
        if not isinstance(meta.get(name) or {}, dict):
            raise ReproError(
                f"{path}: metadata field {name!r} must be an object, got "
                f"{type(meta[name]).__name__} (a damaged or hand-edited bundle)"
            )
    return Bundle(tensors, meta)
