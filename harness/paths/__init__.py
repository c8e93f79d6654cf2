"""Registry of execution paths: built-ins plus those other packages register.

Another package adds a path through the ``qharness.paths`` entry-point group; the entry
point names a path object, a path class, or a zero-argument factory (harness.paths.registry). Every
registered path is parametrized into the suites exactly like the built-ins.
"""

from __future__ import annotations

import functools

from harness.paths.base import LinearPath, LinearProblem, Support
from harness.paths.emulated import EmulatedPath
from harness.paths.native import NativeScaledMMPath
from harness.paths.registry import PluginError, by_unique_name, load_entry_points, lookup

ENTRY_POINT_GROUP = "qharness.paths"

BUILTIN_PATHS: tuple[LinearPath, ...] = (EmulatedPath(), NativeScaledMMPath())

__all__ = [
    "BUILTIN_PATHS",
    "ENTRY_POINT_GROUP",
    "LinearPath",
    "LinearProblem",
    "PluginError",
    "Support",
    "get_path",
    "linear_paths",
]


@functools.cache
def linear_paths() -> dict[str, LinearPath]:
    """All paths by name: built-ins first, then entry points. Names must be unique."""
    external = load_entry_points(ENTRY_POINT_GROUP, LinearPath, "docs/PATHS.md")  # type: ignore[type-abstract]
    return by_unique_name((*BUILTIN_PATHS, *external), "path")


def get_path(name: str) -> LinearPath:
    return lookup(linear_paths(), name, "path")
