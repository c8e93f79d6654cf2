"""Load runs (run directories or results files) into frames, and add them to a history."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.errors import QHarnessError
from harness.report.frame import (
    HISTORY_SCHEMA,
    benchmark_frame,
    records_frame,
    run_columns,
    run_key,
    typed,
)
from harness.report.results import read_results
from harness.report.rundir import RunDir, results_path, run_id_of
from harness.store.history import HistoryStore


@dataclass(frozen=True)
class LoadedRun:
    run_id: str
    results: Path
    frame: pd.DataFrame
    partial: bool
    created: str
    platform: str  # the runner key (`harness.report.frame.run_key`): the report's column
    notes: tuple[str, ...] = ()  # problems that did not stop the run from loading


def load_run(run: Path) -> LoadedRun:
    """A run directory or results file -> its rows (tests, then benchmarks if any).

    Raises the results reader's error for a missing or malformed file."""
    results = results_path(Path(run))
    doc = read_results(results)
    run_id = run_id_of(results)
    frame = records_frame(doc, run_id)
    bench = RunDir(results.parent).benchmark if results.name == "results.json" else None
    notes: list[str] = []
    if bench is not None and bench.is_file():
        try:
            bench_rows = benchmark_frame(bench, run_columns(doc, run_id))
            frame = typed(pd.concat([frame, bench_rows]))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            notes.append(f"{bench}: benchmark JSON left out, unreadable ({exc})")
    return LoadedRun(
        run_id,
        results,
        frame.reset_index(drop=True),
        bool(doc.get("partial")),
        str(doc.get("created") or ""),
        run_key(doc),
        tuple(notes),
    )


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
