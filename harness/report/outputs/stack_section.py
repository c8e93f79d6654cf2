"""The page's provenance section: which software each runner ran
(`harness.report.reading.provenance`).

A regression is traced by what changed between two nights, so the page shows every
reported runner's torch and qharness versions, harness and engine commits, and plugin and
engine versions, as its results file stored them. Runners with the same stack share one
row (a fleet of 10,000 runners on one stack is one row), naming a few of its runners.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.report.model.escape import html_text
from harness.report.model.nightly import NightlyReport

# (stack field, column head), in the table's order
STACK_FIELDS = (
    ("torch_version", "torch"),
    ("qharness_version", "qharness"),
    ("harness_commit", "harness commit"),
    ("engine_commit", "engine commit"),
    ("engine_versions", "plugins, engines, their commits"),
)
NAMED_RUNNERS = 5


@dataclass(frozen=True)
class StackRow:
    values: tuple[str | None, ...]  # one per `STACK_FIELDS`; None: not recorded
    runners: tuple[str, ...]


def stack_rows(report: NightlyReport) -> list[StackRow]:
    """One row per distinct stack of the reported runners, most runners first."""
    found: dict[tuple[str | None, ...], list[str]] = {}
    for key in report.platforms:
        stack = report.runs[key].stack
        values = tuple(stack.get(name) for name, _ in STACK_FIELDS)
        found.setdefault(values, []).append(key)
    rows = [StackRow(values, tuple(keys)) for values, keys in found.items()]
    return sorted(rows, key=lambda r: (-len(r.runners), r.runners[0]))


def _versions(text: str | None) -> str:
    """The stored JSON of plugin and engine versions as ``section: name version, ...``."""
    if text is None:
        return "not recorded"
    try:
        stack = json.loads(text)
    except ValueError:
        return text
    if not isinstance(stack, dict):
        return text
    parts = [
        f"{section}: " + ", ".join(f"{name} {value}" for name, value in sorted(found.items()))
        for section, found in sorted(stack.items())
        if isinstance(found, dict) and found
    ]
    return "; ".join(parts) or "none"


def _runners(keys: tuple[str, ...]) -> str:
    more = f" and {len(keys) - NAMED_RUNNERS} more" if len(keys) > NAMED_RUNNERS else ""
    return f"{len(keys)}: " + ", ".join(keys[:NAMED_RUNNERS]) + more


def stack_html(rows: list[StackRow]) -> str:
    """The section's table (a heading, then one row per stack)."""
    if not rows:
        return "<h2>Provenance</h2><p>no runs</p>"
    head = "".join(f"<th>{html_text(title)}</th>" for _, title in STACK_FIELDS)
    body = []
    for row in rows:
        *plain, versions = row.values
        cells = "".join(f"<td><code>{html_text(v or 'not recorded')}</code></td>" for v in plain)
        body.append(
            f"<tr><td>{html_text(_runners(row.runners), 600)}</td>{cells}"
            f"<td>{html_text(_versions(versions), 2000)}</td></tr>"
        )
    return f"<h2>Provenance</h2><table><tr><th>runners</th>{head}</tr>{''.join(body)}</table>"
