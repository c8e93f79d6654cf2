"""Golden builders: what each produces (`GoldenData`), and the registry of them by entry.

Case modules register their builders here (`register_each`); the store imports no case
module itself (`harness.catalog.golden_builders` does). Seeded inputs a builder can
regenerate are stored as a sha256 digest (`tensor_digest`) and checked by the suite that
regenerates them (`regenerated`).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from harness.core.files import is_safe_relative_name
from harness.store.golden_errors import GoldenError, refresh_command


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
