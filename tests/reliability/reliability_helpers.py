"""Shared by the reliability probes: a tiny golden store, a tree fingerprint, and the
assertion that an error is one clear line naming what it must name."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import torch

from harness.store.golden_registry import Builder, GoldenData
from harness.store.golden_store import GoldenStore


def builder(scale: float, rows: int = 4) -> Builder:
    """A tiny golden: exact uint8 codes and a float32 reference scaled by ``scale``."""

    def build() -> GoldenData:
        codes = (torch.arange(rows * 4, dtype=torch.int64) % 251).to(torch.uint8).reshape(rows, 4)
        return GoldenData(
            exact={"codes": codes}, reference={"y_ref": torch.linspace(-1.0, 1.0, 8) * scale}
        )

    return build


OLD_BUILDERS: dict[str, tuple[Builder, str]] = {
    "suite/a": (builder(1.0), "t:a"),
    "suite/b": (builder(2.0), "t:b"),
    "other/c": (builder(3.0), "t:c"),
}
# a changes, b stays, c is orphaned (removed), d is new: every kind of step in one refresh.
NEW_BUILDERS: dict[str, tuple[Builder, str]] = {
    "suite/a": (builder(5.0), "t:a"),
    "suite/b": (builder(2.0), "t:b"),
    "suite/d": (builder(7.0, rows=2), "t:d"),
}


def make_store(root: Path, builders: dict[str, tuple[Builder, str]] | None = None) -> GoldenStore:
    store = GoldenStore(root, entry_builders=OLD_BUILDERS if builders is None else builders)
    store.refresh(log=lambda _: None)
    return GoldenStore(root, entry_builders=OLD_BUILDERS if builders is None else builders)


def tree_fingerprint(root: Path) -> str:
    """sha256 over every path under ``root``: its type, and its bytes or link target
    (FIFOs and sockets are never opened)."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            mode = os.lstat(path).st_mode
            digest.update(f"{path.relative_to(root)}\0{stat.S_IFMT(mode)}\0".encode())
            if stat.S_ISLNK(mode):
                digest.update(os.readlink(path).encode())
            elif stat.S_ISREG(mode):
                digest.update(path.read_bytes())
    return digest.hexdigest()


def assert_clear_error(message: str, *must_name: str) -> None:
    """One line (no traceback) that names each of ``must_name`` (a file, a field)."""
    text = message.strip()
    assert text, "empty error message"
    assert "\n" not in text, f"error is not one line: {text!r}"
    assert "Traceback" not in text, text
    for name in must_name:
        assert name in text, f"error does not name {name!r}: {text!r}"
