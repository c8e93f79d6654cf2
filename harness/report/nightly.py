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

import pandas as pd

from harness.report.frame import COLUMNS, typed
from harness.report.identity import (
    baseline_notes,
    keyed_by_runner,
    missing_baseline_note,
    shared_key_notes,
)
from harness.report.matrix import Cell, build_matrix
from harness.report.plain import plain_rows, plain_text
from harness.report.regress import BAD, Regression, find_regressions
from harness.report.runs import LoadedRun, load_run
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


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["created", "run_id"], kind="stable")


def _last_run_before(history: pd.DataFrame, platform: str, run: LoadedRun) -> str | None:
    """The newest run of ``platform`` in ``history`` that is older than ``run``."""
    created = run.created
    same = history[(history["platform"] == platform) & (history["run_id"] != run.run_id)]
    same = same[same["created"] <= created]
    if same.empty:
        return None
    last = _order(same.drop_duplicates("run_id")).iloc[-1]
    return str(last["run_id"])


def _failing_since(history: pd.DataFrame, failures: pd.DataFrame) -> list[str]:
    """For each failure, the first run of its trailing streak of failing runs."""
    since = []
    wanted = history[history["nodeid"].isin(set(failures["nodeid"]))]
    by_test = {key: _order(g) for key, g in wanted.groupby(["platform", "nodeid"], sort=False)}
    for _, row in failures.iterrows():
        rows = by_test.get((row["platform"], row["nodeid"]))
        first = str(row["run_id"])
        if rows is not None:
            rows = rows[rows["created"] <= row["created"]]
            for run_id, outcome in zip(
                rows["run_id"].tolist()[::-1], rows["outcome"].tolist()[::-1], strict=True
            ):
                if outcome not in BAD:
                    break
                first = str(run_id)
        since.append(first)
    return since


def build_report(
    runs: list[Path],
    history: HistoryStore | None = None,
    baseline: Path | None = None,
) -> NightlyReport:
    loaded = [load_run(r) for r in runs]
    stored = typed(history.load()) if history is not None and history.run_ids() else None
    known = [stored] if stored is not None else []
    known += [r.frame for r in loaded]
    base_run = load_run(baseline) if baseline is not None else None
    if base_run is not None:
        known.append(base_run.frame)
    every = typed(pd.concat(known, ignore_index=True)) if known else typed(pd.DataFrame())
    every = keyed_by_runner(every.drop_duplicates(["run_id", "nodeid"], keep="last"))
    loaded = [replace(r, frame=keyed_by_runner(r.frame)) for r in loaded]
    if base_run is not None:
        base_run = replace(base_run, frame=keyed_by_runner(base_run.frame))

    current: dict[str, LoadedRun] = {}
    for run in sorted(loaded, key=lambda r: (r.created, r.run_id)):
        current[run.platform] = run
    notes = [f"{r.run_id}: no records" for r in loaded if r.frame.empty]
    notes += [note for r in loaded for note in r.notes]
    notes += shared_key_notes(loaded)

    regressions: list[Regression] = []
    baselines: dict[str, str | None] = {}
    for platform, run in current.items():
        if base_run is not None and (len(current) == 1 or base_run.platform == platform):
            old = base_run.frame
            baselines[platform] = base_run.run_id
        else:
            previous = _last_run_before(every, platform, run)
            baselines[platform] = previous
            if previous is None:
                notes.append(missing_baseline_note(platform))
                continue
            old = every[every["run_id"] == previous]
        notes += baseline_notes(platform, run.frame, str(baselines[platform]), old)
        earlier = every[(every["platform"] == platform) & (every["run_id"] != run.run_id)]
        regressions += find_regressions(run.frame, old, earlier)

    frame = typed(pd.concat([r.frame for r in current.values()], ignore_index=True))
    if frame.empty:
        frame = typed(pd.DataFrame(columns=list(COLUMNS)))
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
