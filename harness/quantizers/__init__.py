"""Quantizers: built-in reference plus those registered through ``qharness.quantizers``."""

from __future__ import annotations

import functools

from harness.quantizers.base import Quantizer, engine_of
from harness.quantizers.reference import ReferenceQuantizer
from harness.registry import by_unique_name, load_entry_points, lookup

ENTRY_POINT_GROUP = "qharness.quantizers"
BUILTIN_QUANTIZERS: tuple[Quantizer, ...] = (ReferenceQuantizer(),)

__all__ = [
    "BUILTIN_QUANTIZERS",
    "ENTRY_POINT_GROUP",
    "Quantizer",
    "engine_of",
    "get_quantizer",
    "quantizers",
]


@functools.cache
def quantizers() -> dict[str, Quantizer]:
    """All quantizers by name: built-ins first, then entry points. Names must be unique."""
    external = load_entry_points(ENTRY_POINT_GROUP, Quantizer, "docs/ENGINES-ADAPTERS.md")  # type: ignore[type-abstract]
    return by_unique_name((*BUILTIN_QUANTIZERS, *external), "quantizer")


def get_quantizer(name: str) -> Quantizer:
    return lookup(quantizers(), name, "quantizer")
