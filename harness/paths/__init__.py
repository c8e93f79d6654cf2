"""Registry of execution paths: built-ins plus those other packages register.

Another package adds a path through the ``qharness.paths`` entry-point group; the entry
point names a path object, a path class, or a zero-argument factory (harness.paths.registry). Every
registered path is parametrized into the suites exactly like the built-ins.

The execution model linear and MoE share lives here too: `Support`, `Numerics`,
`PathBase`, `KernelContract` (harness.paths.base) and the dispatch-table type
(harness.paths.dispatch).
"""

from __future__ import annotations

from harness.paths.base import (
    KernelContract,
    LinearPath,
    LinearPathBase,
    LinearProblem,
    Numerics,
    PathBase,
    Support,
)
from harness.paths.emulated import EmulatedPath
from harness.paths.native import NativeScaledMMPath
from harness.paths.registry import PluginError, Registry

ENTRY_POINT_GROUP = "qharness.paths"

BUILTIN_PATHS: tuple[LinearPath, ...] = (EmulatedPath(), NativeScaledMMPath())

__all__ = [
    "BUILTIN_PATHS",
    "ENTRY_POINT_GROUP",
    "KernelContract",
    "LinearPath",
    "LinearPathBase",
    "LinearProblem",
    "Numerics",
    "PathBase",
    "PluginError",
    "Support",
    "get_path",
    "linear_paths",
]

# All paths by name: built-ins first, then entry points. Names must be unique.
linear_paths: Registry[LinearPath] = Registry(
    ENTRY_POINT_GROUP,
    LinearPath,  # type: ignore[type-abstract]
    "path",
    "docs/PATHS.md",
    BUILTIN_PATHS,
)


def get_path(name: str) -> LinearPath:
    return linear_paths.get(name)
