"""Registry of linear execution paths: built-ins plus those other packages register.

Another package adds a path through the ``qharness.paths`` entry-point group; the entry
point names a path object, a path class, or a zero-argument factory (harness.registry).
Every registered path is parametrized into the suites exactly like the built-ins
(`emulated`, `native`), which are built on first use, not at import: importing this
module loads neither the native kernels nor any capability probe.

The execution model the paths implement (`Support`, `Numerics`, `LinearPath`,
`LinearPathBase`, dispatch tables) is `harness.paths`.
"""

from __future__ import annotations

from harness.paths.base import LinearPath
from harness.registry import Registry

ENTRY_POINT_GROUP = "qharness.paths"

__all__ = ["ENTRY_POINT_GROUP", "get_path", "linear_paths"]


def _builtin_paths() -> tuple[LinearPath, ...]:
    from .emulated import EmulatedPath
    from .native import NativeScaledMMPath

    return (EmulatedPath(), NativeScaledMMPath())


# All paths by name: built-ins first, then entry points. Names must be unique.
linear_paths: Registry[LinearPath] = Registry(
    ENTRY_POINT_GROUP,
    LinearPath,  # type: ignore[type-abstract]
    "path",
    "docs/PATHS.md",
    _builtin_paths,
)


def get_path(name: str) -> LinearPath:
    return linear_paths.get(name)
