"""Runner identity in the report: one column per runner key, and warnings where two runners
share a key or a baseline came from another runner or another software stack.

The stored ``platform`` column stays the architecture (docs/HISTORY.md); the report groups
by ``runner_key`` (``gfx942@mi300x-rack2``; the architecture alone for runs without a label
and for history written before runners had keys).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable

import pandas as pd

from harness.report.model.digest import STACK_COLUMNS, RunDigest

LABEL_HINT = "give each runner its own `run --runner-label` (or QHARNESS_RUNNER)"


def keyed_by_runner(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``platform`` column replaced by the runner key, for the report."""
    frame = frame.copy()
    frame["platform"] = frame["runner_key"].fillna(frame["platform"])
    return frame


def shared_key_notes(runs: Iterable[RunDigest]) -> list[str]:
    """One warning per runner key given more than one run from different hosts."""
    hosts: dict[str, dict[str, str]] = defaultdict(dict)
    for run in runs:
        host = (run.host if run.rows else None) or run.run_id  # as the rows say
        hosts[run.platform].setdefault(host, run.run_id)
    return [
        f"runs {', '.join(sorted(seen.values()))} share the runner key {key!r} from "
        f"{len(seen)} hosts: only the newest is reported and the others are its history; "
        f"{LABEL_HINT}"
        for key, seen in sorted(hosts.items())
        if len(seen) > 1
    ]


def baseline_notes(key: str, run: pd.DataFrame, baseline_id: str, base: pd.DataFrame) -> list[str]:
    """Warnings when ``key``'s baseline was recorded on another host or another stack."""
    notes = []
    host, base_host = _first(run, "runner_host"), _first(base, "runner_host")
    if host and base_host and host != base_host:
        notes.append(
            f"{key}: baseline {baseline_id} was recorded on another host (tag {base_host}, "
            f"this run {host}) under the same runner key; {LABEL_HINT}"
        )
    changed = [
        f"{column.removesuffix('_version')} {old} -> {new}"
        for column in STACK_COLUMNS
        if (old := _first(base, column)) != (new := _first(run, column)) and (old or new)
    ]
    changed += _engine_changes(_first(base, "engine_versions"), _first(run, "engine_versions"))
    if changed:
        notes.append(f"{key}: software changed since baseline {baseline_id}: {', '.join(changed)}")
    return notes


def _engine_changes(old: str | None, new: str | None) -> list[str]:
    """``vllm 0.8.0 -> 0.8.1`` for each plugin or engine distribution whose version or
    commit differs between two ``engine_versions`` texts."""
    if old == new or not (old and new):
        return []
    try:
        before, after = json.loads(old), json.loads(new)
    except ValueError:
        return []
    changes = []
    for part in ("plugins", "engines", "commits"):
        a, b = before.get(part) or {}, after.get(part) or {}
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                changes.append(f"{name} {a.get(name)} -> {b.get(name)}")
    return changes


def missing_baseline_note(key: str) -> str:
    """The warning for a run with nothing to compare with."""
    return (
        f"{key}: no baseline: the history holds no earlier run of this runner key, so nothing "
        "was compared; unless this is its first night, the history was lost (keep it "
        "somewhere durable: docs/CI.md)"
    )


def _first(frame: pd.DataFrame, column: str) -> str | None:
    values = frame[column].dropna() if column in frame else pd.Series(dtype="string")
    return str(values.iloc[0]) if len(values) else None
