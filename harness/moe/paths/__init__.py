"""Registry of MoE execution paths: built-ins plus those other packages register.

Another package adds a path through the ``qharness.moe_paths`` entry-point group; the
entry point names either a path object or a zero-argument callable returning one. Every
registered path is parametrized into suites/test_moe.py like the built-ins.
"""

from __future__ import annotations

import functools

from harness.paths.registry import by_unique_name, load_entry_points, lookup

from .base import MoEPath, MoEProblem
from .emulated import EmulatedMoEPath
from .native import NativeMoEPath

ENTRY_POINT_GROUP = "qharness.moe_paths"

BUILTIN_MOE_PATHS: tuple[MoEPath, ...] = (EmulatedMoEPath(), NativeMoEPath())

__all__ = [
    "BUILTIN_MOE_PATHS",
    "ENTRY_POINT_GROUP",
    "MoEPath",
    "MoEProblem",
    "get_moe_path",
    "moe_paths",
]


@functools.cache
def moe_paths() -> dict[str, MoEPath]:
    """All MoE paths by name: built-ins first, then entry points. Names must be unique."""
    external = load_entry_points(ENTRY_POINT_GROUP, MoEPath, "docs/MOE.md")  # type: ignore[type-abstract]
    return by_unique_name((*BUILTIN_MOE_PATHS, *external), "MoE path")


def get_moe_path(name: str) -> MoEPath:
    return lookup(moe_paths(), name, "MoE path")
