"""Registry of execution paths: built-ins plus those other packages register.

Another package adds a path through the ``qharness.paths`` entry-point group; the entry
point names a path object, a path class, or a zero-argument callable returning a path. Every
registered path is parametrized into the suites exactly like the built-ins.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

from harness.paths.base import LinearPath, LinearProblem, Support
from harness.paths.emulated import EmulatedPath
from harness.paths.native import NativeScaledMMPath

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


class PluginError(RuntimeError):
    """An externally registered path that cannot be loaded or does not fit the protocol."""


def _load_entry_point_paths() -> list[LinearPath]:
    found: list[LinearPath] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            is_factory = isinstance(obj, type) or (
                callable(obj) and not isinstance(obj, LinearPath)
            )
            path = obj() if is_factory else obj
        except Exception as exc:
            raise PluginError(
                f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP} failed to "
                f"load: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(path, LinearPath):
            raise PluginError(
                f"entry point {ep.name!r} ({ep.value}) gave {path!r}, which lacks the path "
                "protocol (name, supports, forward); see docs/PATHS.md"
            )
        found.append(path)
    return found


@functools.cache
def linear_paths() -> dict[str, LinearPath]:
    """All paths by name: built-ins first, then entry points. Names must be unique."""
    paths: dict[str, LinearPath] = {}
    for path in (*BUILTIN_PATHS, *_load_entry_point_paths()):
        if path.name in paths:
            raise PluginError(f"two paths are named {path.name!r}; path names must be unique")
        paths[path.name] = path
    return paths


def get_path(name: str) -> LinearPath:
    paths = linear_paths()
    try:
        return paths[name]
    except KeyError:
        raise KeyError(f"unknown path {name!r}; known: {sorted(paths)}") from None
