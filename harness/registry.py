"""Named plugins from entry points: one registry type for every pluggable kind.

Paths (``qharness.paths``), MoE paths (``qharness.moe_paths``) and loaders
(``qharness.loaders``) are each a `Registry`: built-ins first, then entry points, names
unique, loaded once and cached. Built-ins come from a factory called on first use, so
importing a registry builds no path and runs no probe. Quantizers share the helpers.
An entry point names an object, a class, or a zero-argument factory, or a `PluginFamily`:
several plugins built when the registry loads (one path per launch configuration an
engine's installed tuning files hold, whose number the engine decides). Anything that
fails to load or lacks the expected interface stops with one error naming the entry point.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from harness.errors import EnvironmentValueError, QHarnessError
from harness.process import call_with_time_limit

T = TypeVar("T")


class PluginError(QHarnessError, RuntimeError):
    """An externally registered plugin that cannot be loaded or does not fit its protocol."""


def _instantiate(obj: Any, kind: type) -> Any:
    # A class passes a runtime protocol check too, so classes are always called.
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, kind)):
        return obj()
    return obj


LOAD_LIMIT_VARIABLE = "QHARNESS_PLUGIN_TIMEOUT"
DEFAULT_LOAD_LIMIT_S = 300.0  # an engine's import (vLLM) takes tens of seconds on a CPU


def load_limit_s(environ: Mapping[str, str]) -> float:
    """Seconds one entry point may take to load (``QHARNESS_PLUGIN_TIMEOUT``)."""
    raw = environ.get(LOAD_LIMIT_VARIABLE, "")
    if not raw:
        return DEFAULT_LOAD_LIMIT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (0 < value < 1e6):
        raise EnvironmentValueError(
            f"{LOAD_LIMIT_VARIABLE}={raw!r}: give the seconds a plugin may take to load"
        )
    return value


@dataclass(frozen=True)
class PluginFamily:
    """What one entry point may name instead of one plugin: ``members()`` builds its
    plugins (each checked as any other), when the registry loads."""

    members: Callable[[], Iterable[Any]]


def _load(ep: EntryPoint, kind: type) -> list[Any]:
    obj = ep.load()
    if isinstance(obj, PluginFamily):
        return [_instantiate(member, kind) for member in obj.members()]
    return [_instantiate(obj, kind)]


def _same(error: PluginError) -> PluginError:
    return error


def _fault(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def load_entry_points(group: str, kind: type[T], doc: str) -> list[T]:
    """Objects registered under ``group``, each checked to be a ``kind``.

    Every fault of a plugin (its import or factory raises, calls ``sys.exit`` or takes
    longer than `load_limit_s`; the object is not a ``kind``; reading its ``name`` raises)
    is a `PluginError` naming the entry point and the distribution it comes from."""
    limit = load_limit_s(os.environ)
    found: list[T] = []
    for ep in entry_points(group=group):
        dist = getattr(ep, "dist", None)
        where = f"entry point {ep.name!r} ({ep.value}) in group {group}" + (
            f" of {dist.name} {dist.version}" if dist is not None else ""
        )
        hung = PluginError(
            f"{where} did not finish loading in {limit:g} s (does its import hang?); "
            f"uninstall it, or raise {LOAD_LIMIT_VARIABLE}"
        )
        try:
            objs = call_with_time_limit(
                functools.partial(_load, ep, kind),
                limit,
                f"plugin {where} to load",
                expired=functools.partial(_same, hung),
            )
        except PluginError as exc:
            if exc is hung:
                raise
            raise PluginError(f"{where} failed to load: {_fault(exc)}") from exc
        except (Exception, SystemExit) as exc:
            raise PluginError(f"{where} failed to load: {_fault(exc)}") from exc
        for obj in objs:
            try:
                fits = isinstance(obj, kind)
                name = str(getattr(obj, "name")) if fits else ""  # noqa: B009 - T is unbounded
            except (Exception, SystemExit) as exc:
                raise PluginError(f"{where}: reading its attributes raised {_fault(exc)}") from exc
            if not fits or not name:
                raise PluginError(
                    f"{where} gave {obj!r}, which is not a {kind.__name__}; see {doc}"
                )
            found.append(obj)
    return found


PLUGIN_GROUPS = ("qharness.paths", "qharness.moe_paths", "qharness.loaders", "qharness.quantizers")


def plugin_owning(module: str) -> str | None:
    """The entry point (as errors name it) whose top-level package holds ``module``."""
    package = module.split(".")[0]
    for group in PLUGIN_GROUPS:
        for ep in entry_points(group=group):
            if ep.module.split(".")[0] == package:
                return f"entry point {ep.name!r} ({ep.value}) in group {group}"
    return None


def by_unique_name(items: Iterable[T], what: str) -> dict[str, T]:
    """Index plugins by their ``name``; two with one name are an error."""
    named: dict[str, T] = {}
    for item in items:
        name = str(getattr(item, "name"))  # noqa: B009 - T is unbounded
        if name in named:
            raise PluginError(f"two {what}s are named {name!r}; {what} names must be unique")
        named[name] = item
    return named


def lookup(registry: dict[str, T], name: str, what: str) -> T:
    try:
        return registry[name]
    except KeyError:
        raise KeyError(f"unknown {what} {name!r}; known: {sorted(registry)}") from None


class Registry(Generic[T]):
    """Built-ins plus the entry points of one group, by unique name.

    Calling the registry returns ``{name: plugin}`` (loaded on first call, then cached);
    `get` looks one up with an error that lists the known names; `cache_clear` forgets
    the entry points (tests that fake them call it).
    """

    def __init__(
        self,
        group: str,
        kind: type[T],
        what: str,
        doc: str,
        builtins: Callable[[], Iterable[T]],
    ) -> None:
        self.group = group  # the entry-point group, a public contract
        self.kind = kind  # what every plugin must be (a class or runtime-checkable protocol)
        self.what = what  # how errors name one plugin ("path", "MoE path", "loader")
        self.doc = doc  # where the protocol is documented (named in errors)
        self._make_builtins = builtins  # called on first use: nothing is built at import
        self._builtins: tuple[T, ...] | None = None
        self._cache: dict[str, T] | None = None

    @property
    def builtins(self) -> tuple[T, ...]:
        """The built-in plugins, built on first use (then kept)."""
        if self._builtins is None:
            self._builtins = tuple(self._make_builtins())
        return self._builtins

    def __call__(self) -> dict[str, T]:
        if self._cache is None:
            external = load_entry_points(self.group, self.kind, self.doc)
            self._cache = by_unique_name((*self.builtins, *external), self.what)
        return self._cache

    def get(self, name: str) -> T:
        return lookup(self(), name, self.what)

    def cache_clear(self) -> None:
        self._cache = None
