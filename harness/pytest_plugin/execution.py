"""The ``execution`` field of a test's record on a simulated platform (harness.paths.execution):
its case's path looked up in its kind's registry, a skipped test recorded as ``not-run``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.platform.simulate import NOT_RUN

if TYPE_CHECKING:
    from harness.platform.info import PlatformInfo


def _linear_path(name: str) -> object:
    from harness.linear.paths import get_path

    return get_path(name)


def _moe_path(name: str) -> object:
    from harness.moe.paths import get_moe_path

    return get_moe_path(name)


# A case's suite -> the registry its ``path`` names; every other suite's cases name linear paths.
PATH_LOOKUP: dict[str, Callable[[str], object]] = {"moe": _moe_path}


def case_execution(fields: dict[str, Any], platform: PlatformInfo) -> str | None:
    """What the case's path runs on ``platform`` (`execution_of`); None off simulation or
    for a case without a path. A path no registry knows is the test's error, not this."""
    from harness.paths.execution import execution_of  # torch: only once a test runs

    name = fields.get("path")
    if platform.simulated is None or not isinstance(name, str):
        return None
    lookup = PATH_LOOKUP.get(str(fields.get("suite")), _linear_path)
    try:
        path = lookup(name)
    except KeyError:
        return None  # the test itself fails on the unknown path, naming it
    return execution_of(path, platform)


def ran(execution: str | None, outcome: str) -> str | None:
    """The record's ``execution``: the path's, or ``not-run`` where the test was skipped."""
    if execution is None:
        return None
    return NOT_RUN if outcome == "skipped" else execution
