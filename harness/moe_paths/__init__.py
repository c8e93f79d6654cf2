"""Registry of MoE execution paths: built-ins plus those other packages register.

Another package adds a path through the ``qharness.moe_paths`` entry-point group; the
entry point names either a path object or a zero-argument callable returning one. Every
registered path is parametrized into suites/test_moe.py like the built-ins.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

from harness.paths import PluginError

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


def _load_entry_point_paths() -> list[MoEPath]:
    found: list[MoEPath] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            # A class satisfies the runtime protocol check too, so call classes explicitly.
            factory = isinstance(obj, type) or (callable(obj) and not isinstance(obj, MoEPath))
            path = obj() if factory else obj
        except Exception as exc:
            raise PluginError(
                f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP} failed to "
                f"load: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(path, MoEPath):
            raise PluginError(
                f"entry point {ep.name!r} ({ep.value}) gave {path!r}, which lacks the MoE "
                "path protocol (name, supports, numerics, forward); see docs/MOE.md"
            )
        found.append(path)
    return found


@functools.cache
def moe_paths() -> dict[str, MoEPath]:
    """All MoE paths by name: built-ins first, then entry points. Names must be unique."""
    paths: dict[str, MoEPath] = {}
    for path in (*BUILTIN_MOE_PATHS, *_load_entry_point_paths()):
        if path.name in paths:
            raise PluginError(f"two MoE paths are named {path.name!r}; names must be unique")
        paths[path.name] = path
    return paths


def get_moe_path(name: str) -> MoEPath:
    paths = moe_paths()
    try:
        return paths[name]
    except KeyError:
        raise KeyError(f"unknown MoE path {name!r}; known: {sorted(paths)}") from None
