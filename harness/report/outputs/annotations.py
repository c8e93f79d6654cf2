"""Regressions and new failures as GitHub Actions annotations (workflow commands), one per
platform, scheme and path group, so a night's breakage shows on the run's page.

``::error title=...::message`` on stdout; GitHub shows the first few of each kind per step,
so groups (largest first, `MAX_ANNOTATIONS` at most) are the useful unit, not tests.
"""

from __future__ import annotations

from harness.report.model.nightly import NightlyReport
from harness.report.outputs.grouping import Group, group_items

MAX_ANNOTATIONS = 20


def _data(text: str) -> str:
    """A workflow command's message: %, CR and LF escaped (GitHub's rule)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A workflow command's property value: also ':' and ','."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _lines(level: str, what: str, groups: list[Group]) -> list[str]:
    out = []
    for g in groups:
        kinds = ", ".join(f"{k} {n}" for k, n in g.kinds.most_common())
        title = f"qharness {what}: {g.platform} {g.scheme} {g.path}"
        first = g.lines[0].removeprefix("- ")
        message = f"{len(g.lines)} {what} ({kinds}); first: {first}"
        out.append(f"::{level} title={_property(title)}::{_data(message)}")
    return out


def github_annotations(report: NightlyReport) -> list[str]:
    """Error annotations for regressions, then for new failures, grouped."""
    regressions = group_items(
        report, [(r.platform, r.nodeid, r.kind, r.line()) for r in report.regressions]
    )
    failures = group_items(
        report,
        [
            (f.platform, f.nodeid, f.outcome, f"{f.nodeid}: {f.reason or f.outcome}")
            for f in report.failures
            if f.is_new
        ],
    )
    lines = _lines("error", "regressions", regressions) + _lines("error", "new failures", failures)
    return lines[:MAX_ANNOTATIONS]
