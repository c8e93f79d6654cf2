"""One run folded into what the report shows of it, record by record, without keeping records.

A fleet night is thousands of results files; a frame of every record cost seconds and
gigabytes. `digest_run` reads one results file, folds each record into small per-group
aggregates and drops the document: outcome counts, the run's matrix cells (one per scheme
and path), skip counts per reason, the failing tests (the report lists every one), the
linear SQNR median per scheme and the memory suite's largest peak per scheme (the plots'
inputs), the linear SQNR median per scheme and path (the matrix cell's), the benchmark rows
(a few per run) and the records' tables the text report prints
(`harness.report.model.record_tables`). It is the one model of a run that every report reads.
Its size grows with the run's schemes, paths, failures and skip reasons, never with its
passing tests.

The values are the ones the row-per-test frame (`harness.report.reading.frame`) gives, through the
same helpers: a missing optional field is ``None`` here, never NA or NaN.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.report.model.matrix import Cell, MatrixFold
from harness.report.model.record_tables import RecordTables
from harness.report.model.regress import BAD
from harness.report.reading.frame import (
    _number,
    _text,
    benchmark_rows,
    record_rows,
    run_columns,
    run_key,
)
from harness.report.reading.results import PLATFORM_FIELDS, read_results
from harness.report.reading.rundir import RunDir, results_path, run_id_of
from harness.report.reading.stream import stream_results

BENCHMARK_SUITE = "benchmark"
LINEAR_SUITE = "linear"  # the suite whose SQNR the plot follows (`harness.report.outputs.plots`)
MEMORY_SUITE = "memory"  # the suite whose peaks the plot shows (`harness.report.outputs.plots`)
# Software columns that, when they differ between a run and its baseline, are named in a
# warning (`harness.report.model.identity`, in this order).
STACK_COLUMNS = (
    "torch_version",
    "cuda_version",
    "hip_version",
    "driver_version",
    "qharness_version",
    "harness_commit",
    "engine_commit",
)
# The run's columns that identity warnings compare with its baseline's.
STACK_FIELDS = ("runner_host", *STACK_COLUMNS, "engine_versions")


@dataclass(frozen=True)
class FailedCase:
    """A failing (failed, error or xfailed) record of the run, as the report lists it."""

    nodeid: str
    outcome: str
    reason: str | None
    scheme: str | None
    path: str | None


@dataclass
class RunDigest:
    """What the report needs of one run (module doc); `harness.report.reading.runs.LoadedRun`'s
    head fields, without its rows."""

    run_id: str
    results: Path
    partial: bool
    created: str
    platform: str  # the runner key (`harness.report.reading.frame.run_key`): the report's column
    exitstatus: int = 0  # pytest's
    machine: dict[str, str] = field(default_factory=dict)  # the file's platform fields
    notes: tuple[str, ...] = ()
    host: str | None = None
    rows: int = 0  # records and benchmark rows: what a frame of the run would hold
    stack: dict[str, str | None] = field(default_factory=dict)  # run columns; {} when no rows
    outcomes: Counter[str | None] = field(default_factory=Counter)  # tests (no benchmarks)
    # a simulated platform's tests by what ran (`harness.platform.simulate.EXECUTIONS`)
    executions: Counter[str] = field(default_factory=Counter)
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)  # (scheme, path) -> cell
    skips: Counter[str | None] = field(default_factory=Counter)  # skip reason -> tests
    failures: list[FailedCase] = field(default_factory=list)
    benchmark_cases: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    sqnr_medians: dict[str | None, float] = field(default_factory=dict)  # linear, per scheme
    # the linear suite's median SQNR per (scheme, path): the matrix cell's number
    cell_sqnr: dict[tuple[str, str], float] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)  # memory suite, largest per scheme
    benchmarks: list[dict[str, Any]] = field(default_factory=list)  # frame rows
    models: list[dict[str, Any]] = field(default_factory=list)  # the model suite's frame rows
    # the records' tables as the text report groups them (benchmarks not among them)
    tables: RecordTables = field(default_factory=RecordTables)

    @property
    def tests(self) -> int:
        return sum(self.outcomes.values())

    def case(self, nodeid: str) -> tuple[str | None, str | None] | None:
        """The scheme and path of a failing test or benchmark (the last row naming it, as
        in a frame of the run), None for any other test."""
        if nodeid in self.benchmark_cases:
            return self.benchmark_cases[nodeid]
        found = [(f.scheme, f.path) for f in self.failures if f.nodeid == nodeid]
        return found[-1] if found else None


class _Fold:
    """The per-group aggregates of one run, fed one row at a time."""

    def __init__(self) -> None:
        self.matrix = MatrixFold()
        self.outcomes: Counter[str | None] = Counter()
        self.executions: Counter[str] = Counter()  # a simulated platform's tests, by what ran
        self.skips: Counter[str | None] = Counter()
        self.failures: list[FailedCase] = []
        self.sqnr: dict[str | None, list[float]] = {}
        self.cell_sqnr: dict[tuple[str, str], list[float]] = {}
        self.peaks: dict[str, float] = {}
        self.rows = 0
        self.models: list[dict[str, Any]] = []  # records of the model section (a few per model)
        self.tables = RecordTables()

    def add(
        self,
        nodeid: str | None,
        suite: str,
        scheme: str | None,
        path: str | None,
        outcome: str | None,
        reason: str | None,
        kernel: str | None,
        sqnr_db: float | None,
        peak_bytes: float | None,
        execution: str | None = None,
    ) -> None:
        self.rows += 1
        if suite != BENCHMARK_SUITE:
            self.outcomes[outcome] += 1
            if execution is not None:
                self.executions[execution] += 1
            if scheme is not None and path is not None:
                self.matrix.add(scheme, path, "", suite, outcome, reason, kernel, execution)
        if outcome == "skipped":
            self.skips[reason] += 1
        if outcome in BAD:
            self.failures.append(FailedCase(str(nodeid), str(outcome), reason, scheme, path))
        # a run with linear SQNR only of tests without a scheme is still a night on the plot
        if suite == LINEAR_SUITE and sqnr_db is not None and not math.isnan(sqnr_db):
            self.sqnr.setdefault(scheme, []).append(sqnr_db)
            if scheme is not None and path is not None:
                self.cell_sqnr.setdefault((scheme, path), []).append(sqnr_db)
        if (
            suite == MEMORY_SUITE
            and scheme is not None
            and peak_bytes is not None
            and not math.isnan(peak_bytes)
        ):
            self.peaks[scheme] = max(self.peaks.get(scheme, -math.inf), peak_bytes)

    def record(self, r: dict[str, Any]) -> None:
        """One record of a (validated) results document, as `record_rows` reads it."""
        metrics = r.get("metrics") or {}
        if isinstance(metrics.get("model"), str) and isinstance(metrics.get("model_check"), str):
            self.models.append(r)  # what `model_rows` reads
        self.tables.record(r)
        self.add(
            _text(r.get("nodeid")),
            _text(r.get("suite")) or "other",
            _text(r.get("scheme")),
            _text(r.get("path")),
            _text(r.get("outcome")),
            _text(r.get("reason")),
            _text(metrics.get("kernel")),
            _number(metrics.get("sqnr_db")),
            _number(metrics.get("peak_bytes")),
            _text(r.get("execution")),
        )


def digest_run(run: Path) -> RunDigest:
    """A run directory or results file -> its `RunDigest` (records, then benchmarks if any).

    The file is streamed record by record (`harness.report.reading.stream`); one the stream cannot
    vouch for is read whole, which raises the results reader's error for a missing or
    malformed file."""
    results = results_path(Path(run))
    fold = _Fold()
    doc = stream_results(results, fold.record)
    if doc is None:
        fold = _Fold()  # whatever the stream folded is dropped
        whole = read_results(results)
        for record in whole.get("records") or []:
            fold.record(record)
        doc = {k: v for k, v in whole.items() if k != "records"}
        del whole
    run_id = run_id_of(results)
    columns = run_columns(doc, run_id)
    platform = run_key(doc)
    models = record_rows({**doc, "records": fold.models}, run_id) if fold.models else []
    head = (
        bool(doc.get("partial")),
        str(doc.get("created") or ""),
        int(doc.get("exitstatus") or 0),  # an int: validated
        {k: str((doc.get("platform") or {}).get(k)) for k in PLATFORM_FIELDS},
    )
    del doc
    notes: list[str] = []
    benchmarks: list[dict[str, Any]] = []
    bench = RunDir(results.parent).benchmark if results.name == "results.json" else None
    if bench is not None and bench.is_file():
        try:
            benchmarks = benchmark_rows(bench, columns)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            notes.append(f"{bench}: benchmark JSON left out, unreadable ({exc})")
    benchmark_cases: dict[str, tuple[str | None, str | None]] = {}
    for row in benchmarks:
        fold.add(
            row["nodeid"],
            BENCHMARK_SUITE,
            row["scheme"],
            row["path"],
            row["outcome"],
            None,
            None,
            None,
            None,
        )
        benchmark_cases[str(row["nodeid"])] = (row["scheme"], row["path"])
    return RunDigest(
        run_id=run_id,
        results=results,
        partial=head[0],
        created=head[1],
        platform=platform,
        exitstatus=head[2],
        machine=head[3],
        notes=tuple(notes),
        host=columns["runner_host"],
        rows=fold.rows,
        stack={c: columns[c] for c in STACK_FIELDS} if fold.rows else {},
        outcomes=fold.outcomes,
        executions=fold.executions,
        cells={(s, p): cell for (s, p, _), cell in fold.matrix.cells().items()},  # one platform
        skips=fold.skips,
        failures=fold.failures,
        benchmark_cases=benchmark_cases,
        sqnr_medians={s: statistics.median(v) for s, v in fold.sqnr.items()},
        cell_sqnr={c: statistics.median(v) for c, v in fold.cell_sqnr.items()},
        peaks=fold.peaks,
        benchmarks=benchmarks,
        models=models,
        tables=fold.tables.finish(),
    )
