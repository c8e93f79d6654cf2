"""Registry of MoE execution paths: built-ins plus those other packages register.

Another package adds a path through the ``qharness.moe_paths`` entry-point group; the
entry point names a path object, a path class, or a zero-argument factory
(harness.registry). Every registered path is parametrized into suites/test_moe.py
like the built-ins. The built-ins are built on first use, not at import. An engine's
fused-MoE kernel path subclasses `FusedMoEPathBase` (``fused``: the table, modes, where it
runs and one ``forward`` through `run_fused_moe`) and supplies only its calls; an engine's
router subclasses `RouterMoEPathBase` (``router``: its routing in front of the emulated
block, for the routing suite) and supplies only ``route``.
"""

from __future__ import annotations

from harness.registry import Registry

from .base import (
    MoEPath,
    MoEProblem,
    SelfRoutingMoEPath,
    ranks_slots,
    routes_itself,
    routing_support,
    tie_break,
)

ENTRY_POINT_GROUP = "qharness.moe_paths"

__all__ = [
    "ENTRY_POINT_GROUP",
    "MoEPath",
    "MoEProblem",
    "SelfRoutingMoEPath",
    "get_moe_path",
    "moe_paths",
    "ranks_slots",
    "routes_itself",
    "routing_support",
    "tie_break",
]


def _builtin_moe_paths() -> tuple[MoEPath, ...]:
    from .emulated import EmulatedMoEPath
    from .native import NativeMoEPath

    return (EmulatedMoEPath(), NativeMoEPath())


# All MoE paths by name: built-ins first, then entry points. Names must be unique.
moe_paths: Registry[MoEPath] = Registry(
    ENTRY_POINT_GROUP,
    MoEPath,  # type: ignore[type-abstract]
    "MoE path",
    "docs/MOE.md",
    _builtin_moe_paths,
)


def get_moe_path(name: str) -> MoEPath:
    return moe_paths.get(name)
