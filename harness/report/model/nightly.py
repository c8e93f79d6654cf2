"""The nightly report model: current runs of several platforms, their baselines, the verdicts.

`build_report` takes the runs to report (one per platform: the newest given wins, older ones
of the same platform join the history), an optional history store and an optional baseline
run, and computes everything the Markdown and HTML renderers show; the renderers only
format it.

Data flow: each given results file is read once and folded into a `RunDigest`
(`harness.report.model.digest`: counts, matrix cells, skips, failures, plot inputs), so the report
never holds every record of a fleet. A runner with other known runs (history, older given
runs, ``--baseline``) is then compared test by test with them: `_Comparer` reads that
runner's runs again as frames (`harness.report.reading.runs.load_run`), one runner at a time, for
its baseline, regressions and failure streaks. Failures and skips reach renderers as plain
values whose missing fields are ``None`` (never pandas' NA or NaN; `harness.report.reading.plain`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.report.model.digest import RunDigest, digest_run
from harness.report.model.identity import (
    baseline_notes,
    keyed_by_runner,
    missing_baseline_note,
    shared_key_notes,
)
from harness.report.model.matrix import Cell, matrix_of
from harness.report.model.models_section import model_regressions
from harness.report.model.regress import BAD, Regression, find_regressions
from harness.report.reading.frame import COLUMNS, typed
from harness.report.reading.plain import column_values
from harness.report.reading.runs import load_run
from harness.store.bundle_names import bundle_filename
from harness.store.history import HistoryStore


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


def _empty(columns: Iterable[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=COLUMNS.get(c, "float64")) for c in columns})


SQNR_COLUMNS = ("platform", "scheme", "run_id", "created", "suite", "sqnr_db")
PEAK_COLUMNS = ("platform", "scheme", "suite", "peak_bytes")


@dataclass
class NightlyReport:
    runs: dict[str, RunDigest]  # runner key (the platform, or platform@label) -> its run
    baselines: dict[str, str | None]  # platform -> baseline run id (None: first run)
    matrix: dict[tuple[str, str], dict[str, Cell]]
    regressions: list[Regression]
    failures: list[FailureRow]
    skips: list[SkipRow]  # most frequent first within each platform
    notes: list[str] = field(default_factory=list)
    # (platform, test) -> (scheme, path), ``-`` where none: the regressed and failing tests
    cases: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    # the plots' inputs, already aggregated (`harness.report.outputs.plots`): the median linear SQNR
    # per platform, scheme and known run; the memory suite's largest peak per scheme and
    # reported platform; every known run's benchmark rows
    sqnr: pd.DataFrame = field(default_factory=lambda: _empty(SQNR_COLUMNS))
    peaks: pd.DataFrame = field(default_factory=lambda: _empty(PEAK_COLUMNS))
    benchmarks: pd.DataFrame = field(default_factory=lambda: _empty(COLUMNS))
    # (scheme, path, runner) -> its linear median SQNR tonight and in its baseline (None:
    # no baseline, or no such cell in it): the matrix cell's number and its change
    cell_sqnr: dict[tuple[str, str, str], tuple[float, float | None]] = field(default_factory=dict)
    # the model suite's rows of the reported runs (`harness.report.model.models_section`)
    models: pd.DataFrame = field(default_factory=lambda: _empty(COLUMNS))

    @property
    def platforms(self) -> list[str]:
        return sorted(self.runs)

    def case(self, platform: str, nodeid: str) -> tuple[str, str]:
        """A listed test's scheme and path (``-`` where it has none or is not listed)."""
        return self.cases.get((platform, nodeid), ("-", "-"))


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

    def last_run_before(self, platform: str, run: RunDigest) -> str | None:
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

    def earlier(self, platform: str, run: RunDigest) -> pd.DataFrame:
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


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Frames of `COLUMNS` as one, each column keeping its dtype (converted again only where
    the parts disagree: converting every runner's rows cost more than comparing them)."""
    if not parts:
        return typed(pd.DataFrame(columns=list(COLUMNS)))
    every = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    if list(every.columns) != list(COLUMNS) or any(
        str(every[c].dtype) != t for c, t in COLUMNS.items() if c != "partial"
    ):
        every = typed(every)
    return every


def _text(value: object) -> str | None:
    return None if pd.isna(value) else str(value)


def _stored_rows(history: HistoryStore | None) -> pd.DataFrame | None:
    """The history's rows, keyed by runner (None without a history or an empty one)."""
    if history is None or not history.run_ids():
        return None
    return keyed_by_runner(typed(history.load()))


class _KnownRuns:
    """Every run the report knows of (history, given runs, the baseline) by its head: which
    runner it belongs to, and where its rows are, without holding the given runs' rows.

    Where one run id comes from several sources, the later one wins (given over history,
    the baseline over both), as the known rows' ``(run_id, nodeid)`` de-duplication did."""

    def __init__(
        self, stored: pd.DataFrame | None, given: list[RunDigest], base: RunDigest | None
    ) -> None:
        self.stored = stored
        self.given = given
        self.base = base
        self.stored_of_platform: dict[str, np.ndarray] = (
            {} if stored is None else dict(stored.groupby("platform", sort=False).indices)
        )
        self.runs_of_platform: dict[str, set[str]] = {}
        if stored is not None:
            heads = stored.drop_duplicates("run_id")
            for platform, run_id in zip(
                column_values(heads, "platform"), column_values(heads, "run_id"), strict=True
            ):
                self.runs_of_platform.setdefault(platform, set()).add(run_id)
        self.given_of_platform: dict[str, list[RunDigest]] = {}
        for run in [*given, *([base] if base is not None else [])]:
            if run.rows:
                self.runs_of_platform.setdefault(run.platform, set()).add(run.run_id)
        for run in given:
            self.given_of_platform.setdefault(run.platform, []).append(run)

    def others(self, platform: str, run: RunDigest) -> bool:
        """Does ``platform`` have a known run other than ``run``?"""
        return bool(self.runs_of_platform.get(platform, set()) - {run.run_id})

    def rows(
        self, platform: str, run: RunDigest, base_frame: pd.DataFrame | None
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Every known row of ``platform``, in the order of the known rows (history, given
        runs in their order, the baseline), each (run, test) once: its latest source; and
        ``run``'s own rows as its file gives them."""
        parts = []
        if self.stored is not None and platform in self.stored_of_platform:
            parts.append(self.stored.iloc[self.stored_of_platform[platform]])
        mine = None
        for given in self.given_of_platform.get(platform, []):
            if given.rows:
                parts.append(keyed_by_runner(load_run(given.results).frame))
                if given is run:
                    mine = parts[-1]
        if base_frame is not None and self.base is not None and self.base.platform == platform:
            parts.append(base_frame)
        every = _concat(parts).drop_duplicates(["run_id", "nodeid"], keep="last")
        return every.reset_index(drop=True), _concat([]) if mine is None else mine

    def _later_sources(self) -> list[RunDigest]:
        return [*self.given, *([self.base] if self.base is not None else [])]

    def sqnr_medians(self) -> pd.DataFrame:
        """The median linear SQNR per platform, scheme and known run: the SQNR plot's input."""
        # one row per platform, scheme (None too: the run is still a night on the plot) and run
        rows: dict[str, list[tuple[str | None, str | None, str, str | None, float]]] = {}
        for run in self._later_sources():
            if run.rows:
                rows[run.run_id] = [
                    (run.platform, scheme, run.run_id, run.created, median)
                    for scheme, median in run.sqnr_medians.items()
                ]
        stored: list[tuple[str | None, str | None, str, str | None, float]] = []
        if self.stored is not None:
            linear = self.stored[
                (self.stored["suite"] == "linear")
                & self.stored["sqnr_db"].notna()
                & ~self.stored["run_id"].isin(list(rows))
            ]
            grouped = linear.groupby(
                ["platform", "scheme", "run_id", "created"], dropna=False, sort=False
            )["sqnr_db"].median()
            stored = [
                (_text(p), _text(s), str(r), _text(c), float(m))
                for (p, s, r, c), m in grouped.items()
            ]
        found = stored + [row for run_rows in rows.values() for row in run_rows]
        frame = pd.DataFrame(found, columns=["platform", "scheme", "run_id", "created", "sqnr_db"])
        frame["suite"] = "linear"
        return frame.astype(
            {c: "string" for c in ("platform", "scheme", "run_id", "created", "suite")}
        ).astype({"sqnr_db": "float64"})

    def benchmark_rows(self) -> pd.DataFrame:
        """Every known run's benchmark rows, keyed by runner: the benchmark plot's input."""
        parts = []
        if self.stored is not None:
            parts.append(self.stored[self.stored["bench_mean_s"].notna()])
        rows = [row for run in self._later_sources() for row in run.benchmarks]
        if rows:
            parts.append(keyed_by_runner(typed(pd.DataFrame(rows, columns=list(COLUMNS)))))
        every = _concat(parts)
        return every.drop_duplicates(["run_id", "nodeid"], keep="last").reset_index(drop=True)


@dataclass
class _Compared:
    """One runner compared with its known runs."""

    baseline: str | None
    notes: list[str]
    regressions: list[Regression]
    since: list[str]  # per failure of the reported run, in its order
    cases: dict[tuple[str, str], tuple[str, str]]
    base_sqnr: dict[tuple[str, str], float] = field(default_factory=dict)  # the baseline's


class _Comparer:
    """The test-by-test part of the report, one runner at a time: its rows and its known
    runs' rows are read as frames here and dropped once the runner is done."""

    def __init__(self, known: _KnownRuns, base: RunDigest | None, single: bool) -> None:
        self.known = known
        self.base = base
        self.single = single
        self._base_frame: pd.DataFrame | None = None

    def base_frame(self) -> pd.DataFrame | None:
        """The ``--baseline`` run's rows, read on first use."""
        if self._base_frame is None and self.base is not None:
            self._base_frame = keyed_by_runner(load_run(self.base.results).frame)
        return self._base_frame

    def runner(self, platform: str, run: RunDigest) -> _Compared | None:
        """``platform``'s comparison; None when it has nothing to compare with (its first
        night: no baseline, and every failure is new)."""
        use_base = self.base is not None and (self.single or self.base.platform == platform)
        if not use_base and not self.known.others(platform, run):
            return None
        base_frame = self.base_frame()
        every, mine = self.known.rows(platform, run, base_frame)
        index = _RunIndex(every)
        notes: list[str] = []
        regressions: list[Regression] = []
        baseline: str | None
        old: pd.DataFrame | None = None
        if use_base and self.base is not None:
            baseline, old = self.base.run_id, self.base_frame()
        else:
            baseline = index.last_run_before(platform, run)
            if baseline is not None:
                old = index.rows([baseline])
        if old is not None:
            notes += baseline_notes(platform, mine, str(baseline), old)
            earlier = index.earlier(platform, run)
            regressions = find_regressions(mine, old, earlier)
            regressions += model_regressions(mine, old, earlier)
        failing = mine[mine["outcome"].isin(BAD)]
        since = _failing_since(every, failing) if len(failing) else []
        listed = {r.nodeid for r in regressions}
        # a test missing tonight (its plugin gone) keeps the scheme and path it had
        cases = _cases(platform, old, listed) if old is not None else {}
        cases.update(_cases(platform, mine, listed))
        base_sqnr = _cell_sqnr(old) if old is not None else {}
        return _Compared(baseline, notes, regressions, since, cases, base_sqnr)


def _cell_sqnr(rows: pd.DataFrame) -> dict[tuple[str, str], float]:
    """The linear suite's median SQNR per (scheme, path), as `RunDigest.cell_sqnr` has it."""
    linear = rows[(rows["suite"] == "linear") & rows["sqnr_db"].notna()]
    linear = linear[linear["scheme"].notna() & linear["path"].notna()]
    medians = linear.groupby(["scheme", "path"])["sqnr_db"].median()
    return {(str(s), str(p)): float(m) for (s, p), m in medians.items()}


def _cases(
    platform: str, rows: pd.DataFrame, listed: set[str]
) -> dict[tuple[str, str], tuple[str, str]]:
    """(platform, test) -> (scheme, path) of the ``listed`` tests in ``rows``."""
    return {
        (platform, nodeid): (scheme or "-", path or "-")
        for nodeid, scheme, path in zip(
            *(column_values(rows, c) for c in ("nodeid", "scheme", "path")), strict=True
        )
        if nodeid in listed
    }


def _model_rows(current: dict[str, RunDigest]) -> pd.DataFrame:
    """The model suite's rows of the reported runs, keyed by runner (the model section)."""
    rows = [row for run in current.values() for row in run.models]
    return keyed_by_runner(typed(pd.DataFrame(rows, columns=list(COLUMNS))))


def _peaks(current: dict[str, RunDigest]) -> pd.DataFrame:
    """The memory suite's largest peak per scheme and reported platform (the plot's input)."""
    rows = [
        (platform, scheme, "memory", peak)
        for platform, run in current.items()
        for scheme, peak in run.peaks.items()
    ]
    frame = pd.DataFrame(rows, columns=list(PEAK_COLUMNS))
    return frame.astype({"platform": "string", "scheme": "string", "suite": "string"}).astype(
        {"peak_bytes": "float64"}
    )


def build_report(
    runs: list[Path],
    history: HistoryStore | None = None,
    baseline: Path | None = None,
) -> NightlyReport:
    """The report of ``runs`` (module doc). Each results file is read once and folded into
    its `RunDigest`; no frame of every record is made. Only a runner with other known runs
    (history, older given runs, ``baseline``) is compared test by test: its runs' rows are
    read again for that comparison, one runner at a time."""
    given = [digest_run(run) for run in runs]
    base = digest_run(baseline) if baseline is not None else None
    stored = _stored_rows(history)

    current: dict[str, RunDigest] = {}
    for run in sorted(given, key=lambda r: (r.created, r.run_id)):
        current[run.platform] = run
    notes = [f"{r.run_id}: no records" for r in given if not r.rows]
    notes += [note for r in given for note in r.notes]
    notes += shared_key_notes(given)

    known = _KnownRuns(stored, given, base)
    compare = _Comparer(known, base, single=len(current) == 1)
    regressions: list[Regression] = []
    baselines: dict[str, str | None] = {}
    since: dict[str, list[str]] = {}
    cases: dict[tuple[str, str], tuple[str, str]] = {}
    base_sqnr: dict[str, dict[tuple[str, str], float]] = {}
    for platform, run in current.items():
        found = compare.runner(platform, run)
        if found is None:
            baselines[platform] = None
            notes.append(missing_baseline_note(platform))
            continue
        baselines[platform] = found.baseline
        notes += found.notes
        if found.baseline is None:
            notes.append(missing_baseline_note(platform))
        regressions += found.regressions
        since[platform] = found.since
        base_sqnr[platform] = found.base_sqnr
        cases.update(found.cases)

    failures = []
    for platform, run in current.items():
        firsts = since.get(platform) or [run.run_id] * len(run.failures)
        for failed, first in zip(run.failures, firsts, strict=True):
            failures.append(
                FailureRow(
                    platform=platform,
                    run_id=run.run_id,
                    nodeid=failed.nodeid,
                    outcome=failed.outcome,
                    reason=failed.reason,
                    since=first,
                    repro=_repro_link(run, failed.nodeid),
                )
            )
        listed = {f.nodeid: (f.scheme, f.path) for f in run.failures}
        listed.update(run.benchmark_cases)
        for nodeid, (scheme, path) in listed.items():
            cases.setdefault((platform, nodeid), (scheme or "-", path or "-"))

    skips = [
        SkipRow(platform, reason, count)
        for platform, reason, count in sorted(
            (
                (platform, reason, count)
                for platform, run in current.items()
                for reason, count in run.skips.items()
            ),
            key=lambda s: (s[0], -s[2], s[1] is None, s[1] or ""),
        )
    ]
    cells = {
        (scheme, path, platform): cell
        for platform, run in current.items()
        for (scheme, path), cell in run.cells.items()
    }
    return NightlyReport(
        runs=current,
        baselines=baselines,
        matrix=matrix_of(dict(sorted(cells.items()))),
        regressions=regressions,
        failures=failures,
        skips=skips,
        notes=notes,
        cases=cases,
        cell_sqnr={
            (scheme, path, platform): (value, base_sqnr.get(platform, {}).get((scheme, path)))
            for platform, run in current.items()
            for (scheme, path), value in run.cell_sqnr.items()
        },
        sqnr=known.sqnr_medians(),
        peaks=_peaks(current),
        benchmarks=known.benchmark_rows(),
        models=_model_rows(current),
    )


def _repro_link(run: RunDigest, nodeid: str) -> str | None:
    """The failure's repro bundle, if its run wrote one."""
    bundle = run.results.parent / "repro" / bundle_filename(nodeid)
    return str(bundle) if bundle.is_file() else None
