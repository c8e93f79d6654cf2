"""Registry of MoE execution paths: built-ins plus those other packages register.

Another package adds a path through the ``qharness.moe_paths`` entry-point group; the
entry point names a path object, a path class, or a zero-argument factory
(harness.paths.registry). Every registered path is parametrized into suites/test_moe.py
like the built-ins.
"""

from __future__ import annotations

from harness.paths.registry import Registry

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


# All MoE paths by name: built-ins first, then entry points. Names must be unique.
moe_paths: Registry[MoEPath] = Registry(
    ENTRY_POINT_GROUP,
    MoEPath,  # type: ignore[type-abstract]
    "MoE path",
    "docs/MOE.md",
    BUILTIN_MOE_PATHS,
)


def get_moe_path(name: str) -> MoEPath:
    return moe_paths.get(name)
