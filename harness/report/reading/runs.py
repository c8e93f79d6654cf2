"""Load one run (run directory or results file) into a frame, and add runs to a history."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import QHarnessError
from harness.report.reading.frame import (
    COLUMNS,
    HISTORY_SCHEMA,
    benchmark_rows,
    record_rows,
    run_columns,
    run_key,
    typed,
)
from harness.report.reading.results import read_results
from harness.report.reading.rundir import RunDir, results_path, run_id_of
from harness.store.history import HistoryStore


@dataclass(frozen=True)
class LoadedRun:
    run_id: str
    results: Path
    frame: pd.DataFrame
    partial: bool
    created: str
    platform: str  # the runner key (`harness.report.reading.frame.run_key`): the report's column
    notes: tuple[str, ...] = ()  # problems that did not stop the run from loading
    host: str | None = None  # the runner's host tag, when the results name one


def load_run(run: Path) -> LoadedRun:
    """A run directory or results file -> its rows (tests, then benchmarks if any).

    For what needs one run's rows test by test (the history, a comparison); the report
    reads a fleet through `harness.report.model.digest` instead, without rows.
    Raises the results reader's error for a missing or malformed file."""
    results = results_path(Path(run))
    doc = read_results(results)
    run_id = run_id_of(results)
    rows = _Columns()
    rows.extend(record_rows(doc, run_id))
    bench = RunDir(results.parent).benchmark if results.name == "results.json" else None
    notes: list[str] = []
    if bench is not None and bench.is_file():
        try:
            rows.extend(benchmark_rows(bench, run_columns(doc, run_id)))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            notes.append(f"{bench}: benchmark JSON left out, unreadable ({exc})")
    created = str(doc.get("created") or "")
    host = run_columns(doc, run_id)["runner_host"]
    partial, key = bool(doc.get("partial")), run_key(doc)
    del doc
    frame = typed(pd.DataFrame(rows.values, columns=list(COLUMNS)))
    return LoadedRun(run_id, results, frame, partial, created, key, tuple(notes), host)


class _Columns:
    """Rows kept as one list per column: a row costs a pointer per column, not a dict."""

    def __init__(self) -> None:
        self.values: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def extend(self, rows: list[dict[str, Any]]) -> None:
        for column, values in self.values.items():
            values.extend(row.get(column) for row in rows)
        self.count += len(rows)


def open_history(root: Path) -> HistoryStore:
    return HistoryStore(root, HISTORY_SCHEMA)


@dataclass(frozen=True)
class AddOutcome:
    run: str
    status: str  # "added" | "already present" | "skipped"
    detail: str = ""


def add_runs(history: HistoryStore, runs: list[Path]) -> list[AddOutcome]:
    """Add each run; a corrupt or partial run is skipped with the reason, never raised."""
    outcomes = []
    for run in runs:
        try:
            loaded = load_run(run)
        except QHarnessError as exc:
            outcomes.append(AddOutcome(str(run), "skipped", str(exc)))
            continue
        if loaded.partial:
            detail = "partial run (interrupted); its finished tests stay in its run directory"
            outcomes.append(AddOutcome(loaded.run_id, "skipped", detail))
            continue
        if loaded.frame.empty:
            outcomes.append(AddOutcome(loaded.run_id, "skipped", "no records"))
            continue
        added = history.add(loaded.run_id, loaded.frame)
        outcomes.append(AddOutcome(loaded.run_id, "added" if added else "already present"))
    return outcomes
