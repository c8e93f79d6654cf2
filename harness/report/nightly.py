"""The nightly report model: current runs of several platforms, their baselines, the verdicts.

`build_report` takes the runs to report (one per platform: the newest given wins, older ones
of the same platform join the history), an optional history store and an optional baseline
run, and computes everything the Markdown and HTML renderers show; the renderers only
format it. Failures and skips leave the frames here, through `plain_rows`, as plain rows
whose missing fields are ``None`` (never pandas' NA or NaN).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.report.frame import typed
from harness.report.identity import (
    baseline_notes,
    keyed_by_runner,
    missing_baseline_note,
    shared_key_notes,
)
from harness.report.matrix import Cell, build_matrix
from harness.report.models_section import model_regressions
from harness.report.plain import column_values, plain_rows, plain_text
from harness.report.regress import BAD, Regression, find_regressions
from harness.report.runs import LoadedRun, load_run, load_runs, rows_between
from harness.store.history import HistoryStore
from harness.store.repro import bundle_filename


@dataclass(frozen=True)
class FailureRow:
    """One failing (failed, error or xfailed) test of a reported run."""

    platform: str
    run_id: str
    nodeid: str
    outcome: str
    reason: str | None  # None: the record gave none
    since: str  # the first run of its trailing streak of failing runs
    repro: str | None  # the repro bundle's path, None when the run wrote none

    @property
    def is_new(self) -> bool:
        return self.since == self.run_id


@dataclass(frozen=True)
class SkipRow:
    platform: str
    reason: str | None  # None: skipped without a reason
    count: int


@dataclass
class NightlyReport:
    runs: dict[str, LoadedRun]  # runner key (the platform, or platform@label) -> its run
    baselines: dict[str, str | None]  # platform -> baseline run id (None: first run)
    frame: pd.DataFrame  # rows of the reported runs
    history: pd.DataFrame  # every known row (history + given runs), for plots and streaks
    matrix: dict[tuple[str, str], dict[str, Cell]]
    regressions: list[Regression]
    failures: list[FailureRow]
    skips: list[SkipRow]  # most frequent first within each platform
    notes: list[str] = field(default_factory=list)

    @property
    def platforms(self) -> list[str]:
        return sorted(self.runs)


class _RunIndex:
    """Where each run and each platform's runs are in the known rows: built once, so the
    per-platform work of the report is a lookup, not a scan of every row."""

    def __init__(self, every: pd.DataFrame) -> None:
        self.every = every
        self.rows_of_run = every.groupby("run_id", sort=False).indices
        runs = every.drop_duplicates("run_id")
        self.runs_of_platform: dict[str, list[tuple[str, str]]] = {}  # dated runs only
        self.all_runs_of_platform: dict[str, list[str]] = {}
        for platform, created, run_id in zip(
            *(column_values(runs, c) for c in ("platform", "created", "run_id")), strict=True
        ):
            self.all_runs_of_platform.setdefault(platform, []).append(run_id)
            if created is not None:  # a run without a date is never "before" another
                self.runs_of_platform.setdefault(platform, []).append((created, run_id))
        for found in self.runs_of_platform.values():
            found.sort()

    def last_run_before(self, platform: str, run: LoadedRun) -> str | None:
        """The newest run of ``platform`` that is older than ``run`` (ties: the larger id)."""
        found = [
            run_id
            for created, run_id in self.runs_of_platform.get(platform, [])
            if run_id != run.run_id and created <= run.created
        ]
        return found[-1] if found else None

    def rows(self, run_ids: list[str]) -> pd.DataFrame:
        """The rows of ``run_ids``, in the order they have in the known rows."""
        parts = [self.rows_of_run[r] for r in run_ids if r in self.rows_of_run]
        positions = np.sort(np.concatenate(parts)) if parts else np.array([], dtype=np.intp)
        return self.every.iloc[positions]

    def earlier(self, platform: str, run: LoadedRun) -> pd.DataFrame:
        """Every known row of ``platform`` outside ``run``."""
        return self.rows(
            [r for r in self.all_runs_of_platform.get(platform, []) if r != run.run_id]
        )


def _failing_since(history: pd.DataFrame, failures: pd.DataFrame) -> list[str]:
    """For each failure, the first run of its trailing streak of failing runs.

    One pass over the history's rows of the failing tests, then one walk per failure."""
    wanted = set(column_values(failures, "nodeid"))
    by_test: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for platform, nodeid, created, run_id, outcome in zip(
        *(
            column_values(history, c)
            for c in ("platform", "nodeid", "created", "run_id", "outcome")
        ),
        strict=True,
    ):
        if nodeid in wanted:
            by_test.setdefault((platform, nodeid), []).append((created, run_id, outcome))
    since = []
    for platform, nodeid, created, run_id in zip(
        *(column_values(failures, c) for c in ("platform", "nodeid", "created", "run_id")),
        strict=True,
    ):
        first = str(run_id)
        rows = by_test.get((platform, nodeid), [])
        # the runs of this test up to this one, oldest first; a run without a date is
        # never "up to" another
        ordered = sorted(
            (r for r in rows if r[0] is not None and created is not None and r[0] <= created),
            key=lambda r: (r[0], r[1]),
        )
        for _, rid, outcome in reversed(ordered):
            if outcome not in BAD:
                break
            first = str(rid)
        since.append(first)
    return since


def build_report(
    runs: list[Path],
    history: HistoryStore | None = None,
    baseline: Path | None = None,
) -> NightlyReport:
    given = load_runs(runs)
    loaded = given.runs
    stored = typed(history.load()) if history is not None and history.run_ids() else None
    known = [stored] if stored is not None else []
    known.append(given.frame)
    base_run = load_run(baseline) if baseline is not None else None
    if base_run is not None:
        known.append(base_run.frame)
    every = typed(pd.concat(known, ignore_index=True))
    every = keyed_by_runner(every.drop_duplicates(["run_id", "nodeid"], keep="last"))
    keyed = keyed_by_runner(given.frame)
    loaded = [
        replace(r, frame=rows_between(keyed, a, b))
        for r, (a, b) in zip(loaded, given.spans, strict=True)
    ]
    if base_run is not None:
        base_run = replace(base_run, frame=keyed_by_runner(base_run.frame))

    current: dict[str, LoadedRun] = {}
    for run in sorted(loaded, key=lambda r: (r.created, r.run_id)):
        current[run.platform] = run
    notes = [f"{r.run_id}: no records" for r in loaded if r.frame.empty]
    notes += [note for r in loaded for note in r.notes]
    notes += shared_key_notes(loaded)

    index = _RunIndex(every)
    regressions: list[Regression] = []
    baselines: dict[str, str | None] = {}
    for platform, run in current.items():
        if base_run is not None and (len(current) == 1 or base_run.platform == platform):
            old = base_run.frame
            baselines[platform] = base_run.run_id
        else:
            previous = index.last_run_before(platform, run)
            baselines[platform] = previous
            if previous is None:
                notes.append(missing_baseline_note(platform))
                continue
            old = index.rows([previous])
        notes += baseline_notes(platform, run.frame, str(baselines[platform]), old)
        earlier = index.earlier(platform, run)
        regressions += find_regressions(run.frame, old, earlier)
        regressions += model_regressions(run.frame, old, earlier)

    span_of = {id(r): span for r, span in zip(loaded, given.spans, strict=True)}
    picked = [np.arange(*span_of[id(r)]) for r in current.values()]
    positions = np.concatenate(picked) if picked else np.array([], dtype=np.intp)
    frame = typed(keyed.iloc[positions].reset_index(drop=True))
    failing = frame[frame["outcome"].isin(BAD)]
    since = _failing_since(every, failing) if len(failing) else []
    failures = [
        FailureRow(
            platform=str(row["platform"]),
            run_id=str(row["run_id"]),
            nodeid=str(row["nodeid"]),
            outcome=str(row["outcome"]),
            reason=plain_text(row["reason"]),
            since=first,
            repro=_repro_link(current[str(row["platform"])], str(row["nodeid"])),
        )
        for row, first in zip(
            plain_rows(failing, ["platform", "run_id", "nodeid", "outcome", "reason"]),
            since,
            strict=True,
        )
    ]
    skipped = frame[frame["outcome"] == "skipped"]
    counted = (
        skipped.groupby(["platform", "reason"], dropna=False)
        .size()
        .reset_index(name="count")
        .sort_values(["platform", "count"], ascending=[True, False], kind="stable")
    )
    skips = [
        SkipRow(str(row["platform"]), plain_text(row["reason"]), int(row["count"]))
        for row in plain_rows(counted, ["platform", "reason", "count"])
    ]
    return NightlyReport(
        runs=current,
        baselines=baselines,
        frame=frame,
        history=every,
        matrix=build_matrix(frame),
        regressions=regressions,
        failures=failures,
        skips=skips,
        notes=notes,
    )


def _repro_link(run: LoadedRun, nodeid: str) -> str | None:
    """The failure's repro bundle, if its run wrote one."""
    bundle = run.results.parent / "repro" / bundle_filename(nodeid)
    return str(bundle) if bundle.is_file() else None
