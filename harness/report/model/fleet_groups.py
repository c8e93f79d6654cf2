"""Runners folded into a few groups, so a page of 10,000 runners draws a few panels.

A figure with one subplot (or one bar, or one matrix column) per runner took 6 minutes and
2.3 GB for 1,000 runners. Up to `MAX_GROUPS` runner keys are shown one each, as before;
beyond that, runners are grouped by their platform (the runner key without ``@label``),
and when there are still more platforms than `MAX_GROUPS`, the largest `MAX_GROUPS` - 1
keep a group each and the rest share one. Every runner is in exactly one group and each
group's name says how many runners it holds, so nothing is dropped unseen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

MAX_GROUPS = 8
LABEL_SEPARATOR = "@"  # runner key = platform[@label] (`harness.report.reading.frame.run_key`)


def platform_of(key: str) -> str:
    """The platform part of a runner key (``gfx942@rack2`` -> ``gfx942``)."""
    return key.partition(LABEL_SEPARATOR)[0]


def _name(platform: str, runners: int) -> str:
    return f"{platform} ({runners} runner{'s' if runners != 1 else ''})"


def runner_groups(keys: Iterable[str], limit: int = MAX_GROUPS) -> dict[str, str]:
    """Runner key -> the name of its group (module doc); the identity for ``limit`` keys
    or fewer."""
    distinct = sorted(set(keys))
    if len(distinct) <= limit:
        return {key: key for key in distinct}
    sizes = Counter(platform_of(key) for key in distinct)
    ranked = sorted(sizes, key=lambda p: (-sizes[p], p))
    kept = set(ranked if len(ranked) <= limit else ranked[: limit - 1])
    rest = [p for p in ranked if p not in kept]
    rest_runners = sum(sizes[p] for p in rest)
    rest_name = f"{len(rest)} other platforms ({rest_runners} runners)"
    names = {p: _name(p, sizes[p]) for p in kept}
    return {key: names.get(platform_of(key), rest_name) for key in distinct}


def is_grouped(groups: dict[str, str]) -> bool:
    """Does any group hold more than one runner?"""
    return any(key != name for key, name in groups.items())
