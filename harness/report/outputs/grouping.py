"""The summary's lists grouped by platform, scheme and path before tests, and free of the
runner's absolute paths.

One broken kernel on one platform fails hundreds of tests; listed one test at a time and cut
after a few dozen, a second platform's regressions vanish into "... and 53 more". Grouped,
every (platform, scheme, path) with its count is shown first, then a few tests of each.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.report.model.escape import md_inline
from harness.report.model.nightly import NightlyReport

TESTS_PER_GROUP = 5
MAX_GROUPS = 300  # one table row each; far below the summary's size limit


@dataclass
class Group:
    platform: str
    scheme: str
    path: str
    kinds: Counter[str] = field(default_factory=Counter)
    lines: list[str] = field(default_factory=list)


def group_items(report: NightlyReport, items: list[tuple[str, str, str, str]]) -> list[Group]:
    """``items``: (platform, nodeid, kind, markdown line); grouped by the test's scheme and
    path (``-`` where it has none), largest groups first."""
    groups: dict[tuple[str, str, str], Group] = {}
    for platform, nodeid, kind, line in items:
        scheme, path = report.case(platform, nodeid)
        key = (platform, scheme, path)
        group = groups.setdefault(key, Group(*key))
        group.kinds[kind] += 1
        group.lines.append(line)
    return sorted(groups.values(), key=lambda g: (-len(g.lines), g.platform, g.scheme, g.path))


def grouped_markdown(groups: list[Group], per_group: int = TESTS_PER_GROUP) -> list[str]:
    """A table of every group (platform, scheme, path, count, kinds), then each group's first
    ``per_group`` tests."""
    if not groups:
        return ["none"]
    lines = ["| platform | scheme | path | count | what |", "|---|---|---|---:|---|"]
    for g in groups[:MAX_GROUPS]:
        kinds = ", ".join(f"{k} {n}" for k, n in g.kinds.most_common())
        lines.append(
            f"| {md_inline(g.platform)} | {md_inline(g.scheme)} | {md_inline(g.path)} "
            f"| {len(g.lines)} | {md_inline(kinds)} |"
        )
    if len(groups) > MAX_GROUPS:
        lines.append(f"\n... and {len(groups) - MAX_GROUPS} more groups (see report.html)")
    for g in groups[:MAX_GROUPS]:
        title = f"{md_inline(g.platform)} · {md_inline(g.scheme)} · {md_inline(g.path)}"
        lines += ["", f"**{title}** ({len(g.lines)})", ""]
        lines += g.lines[:per_group]
        if len(g.lines) > per_group:
            lines.append(
                f"- ... and {len(g.lines) - per_group} more in this group (see report.html)"
            )
    return lines


def without_runner_paths(text: str, report: NightlyReport) -> str:
    """``text`` with each reported run's parent directory (the runner's workspace, an
    absolute path) removed, so paths read ``<run-id>/repro/...``."""
    for run in report.runs.values():
        parent = str(Path(run.results).resolve().parent.parent)
        if len(parent) > 1:
            text = text.replace(parent + "/", "")
    return text
