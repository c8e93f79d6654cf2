"""The merged matrix: scheme x path rows, one column per platform, one verdict per cell.

A cell is ``pass`` (every suite with tests of that scheme and path ran some of them),
``fail`` (any failed or errored test), ``partial`` (some suites ran, others' tests were all
skipped or fell back to the emulated kernel: "pass" would claim what did not run),
``emulated-only`` (a native path that did not run its tests natively here, while the
reference path ran: skipped, or a MoE kernel that is the emulated one), ``skipped`` (shown
"not run", with the most common reason) or empty where the platform has no such tests.
Each cell keeps its per-suite counts.

A simulated platform's cell (its records carry ``execution``, docs/CLI.md) also says what
ran: GPU kernel source under the interpreter, or CPU code held to the arch's expectations
(a plain-torch path's pass there says nothing of the arch's kernels). A path that ran
nothing there is "not run (unsupported)", never ``emulated-only``: no native kernel is
expected of a CPU standing in for a GPU.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import pandas as pd

from harness.platform.simulate import CPU_CODE, EXECUTIONS, NOT_RUN
from harness.report.model.regress import BAD, EMULATED_KERNEL, REFERENCE_PATHS
from harness.report.reading.plain import column_values


@dataclass(frozen=True)
class SuiteCount:
    """One suite's tests in a cell; ``ran``: some passed, on the path's own kernel."""

    suite: str
    passed: int
    failed: int
    skipped: int
    ran: bool

    @property
    def text(self) -> str:
        if self.failed:
            return f"{self.suite} fail {self.failed}/{self.passed + self.failed}"
        if not self.ran:
            return (
                f"{self.suite} not run ({self.skipped} skipped)"
                if self.skipped
                else (f"{self.suite} emulated kernel")
            )
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        return f"{self.suite} {self.passed} passed{skipped}"


@dataclass(frozen=True)
class Cell:
    verdict: str  # "pass" | "fail" | "partial" | "emulated-only" | "skipped" | ""
    passed: int
    failed: int
    skipped: int
    reason: str = ""
    suites: tuple[SuiteCount, ...] = ()
    # on a simulated platform: what the tests that ran ran (`ran_as`), "" elsewhere
    ran: tuple[tuple[str, int], ...] = ()
    simulated: bool = False

    @property
    def only_cpu_code(self) -> bool:
        """A simulated cell whose tests ran only CPU code (no GPU kernel source)."""
        return [e for e, _ in self.ran] == [CPU_CODE]

    @property
    def ran_as(self) -> str:
        """What ran, in words: one `EXECUTIONS` entry, or each with its count when mixed;
        "" off simulation or where nothing ran."""
        if len(self.ran) == 1:
            return EXECUTIONS[self.ran[0][0]]
        return ", ".join(f"{EXECUTIONS[e]} ({n})" for e, n in self.ran)

    @property
    def head(self) -> str:
        """The verdict in a few words (the label without its per-suite counts)."""
        if self.verdict == "fail":
            head = f"fail {self.failed}/{self.passed + self.failed}"
        elif self.verdict == "pass" and self.skipped:
            head = f"pass ({self.skipped} skipped)"
        elif self.verdict == "skipped":
            head = "not run (unsupported)" if self.simulated else "not run"
        elif self.verdict == "partial":
            head = "partly run"
        else:
            head = self.verdict
        return f"{head}, {self.ran_as}" if self.ran_as else head

    @property
    def detail(self) -> str:
        """The per-suite counts where they say more than the head ("" where they do not)."""
        if len(self.suites) > 1 or self.verdict == "partial":
            return "; ".join(s.text for s in self.suites)
        return ""

    @property
    def label(self) -> str:
        return f"{self.head}: {self.detail}" if self.detail else self.head


class _Tally:
    """Counts of one cell (or one suite of it), gathered in one pass over the rows."""

    __slots__ = ("all_emulated", "executions", "failed", "passed", "reasons", "skipped")

    def __init__(self) -> None:
        self.passed = self.failed = self.skipped = 0
        self.all_emulated = True
        self.reasons: Counter[str] = Counter()
        self.executions: Counter[str] = Counter()  # a simulated platform's records only

    def add(
        self,
        outcome: str | None,
        reason: str | None,
        kernel: str | None,
        execution: str | None = None,
    ) -> None:
        if execution is not None:
            self.executions[execution] += 1
        if outcome in BAD:
            self.failed += 1
        elif outcome == "skipped":
            self.skipped += 1
            if reason is not None:
                self.reasons[reason] += 1
        else:
            self.passed += 1
        self.all_emulated = self.all_emulated and kernel == EMULATED_KERNEL


def _cell(path: str, total: _Tally, suites: dict[str, _Tally], reference_ran: bool) -> Cell:
    """The verdict of one (scheme, path, platform) from its tallies (rules: module doc)."""
    passed, failed, skipped = total.passed, total.failed, total.skipped
    # most common skip reason; ties go to the one seen first
    reason = max(total.reasons.items(), key=lambda kv: kv[1])[0] if total.reasons else ""
    non_reference = path not in REFERENCE_PATHS
    counts = tuple(
        SuiteCount(
            suite,
            t.passed,
            t.failed,
            t.skipped,
            t.passed > 0 and not (non_reference and t.all_emulated),
        )
        for suite, t in sorted(suites.items())
    )
    simulated = bool(total.executions)
    ran = tuple(sorted((e, n) for e, n in total.executions.items() if e != NOT_RUN))
    if simulated:
        return _simulated_cell(Cell("", passed, failed, skipped, reason, counts, ran, True))
    if failed:
        return Cell("fail", passed, failed, skipped, reason, counts)
    if non_reference and reference_ran and (passed == 0 or total.all_emulated):
        why = reason or "runs the emulated kernel"
        return Cell("emulated-only", passed, failed, skipped, why, counts)
    if passed == 0:
        return Cell("skipped", passed, failed, skipped, reason, counts)
    not_run = [s for s in counts if not s.ran]
    if not_run:
        why = "; ".join(s.text for s in not_run) + (f" ({reason})" if reason else "")
        return Cell("partial", passed, failed, skipped, why, counts)
    return Cell("pass", passed, failed, skipped, reason, counts)


def _simulated_cell(cell: Cell) -> Cell:
    """The verdict of a simulated platform's cell (module doc): no ``emulated-only``."""
    if cell.failed:
        verdict = "fail"
    elif cell.passed == 0:
        verdict = "skipped"
    elif any(not s.ran for s in cell.suites):
        verdict = "partial"
    else:
        verdict = "pass"
    return replace(cell, verdict=verdict)


MATRIX_COLUMNS = (
    "scheme",
    "path",
    "platform",
    "suite",
    "outcome",
    "reason",
    "kernel",
    "execution",
)


class MatrixFold:
    """Per-cell tallies gathered one row at a time (a run's records as they are read, or a
    frame's rows), then one verdict per cell: linear in the rows, whatever the number of
    platforms."""

    def __init__(self) -> None:
        self.totals: dict[tuple[str, str, str], _Tally] = {}
        self.suites: dict[tuple[str, str, str], dict[str, _Tally]] = {}
        self.reference_ran: set[tuple[str, str]] = set()

    def add(
        self,
        scheme: str,
        path: str,
        platform: str,
        suite: str | None,
        outcome: str | None,
        reason: str | None,
        kernel: str | None,
        execution: str | None = None,
    ) -> None:
        key = (scheme, path, platform)
        total = self.totals.get(key)
        if total is None:
            total = self.totals[key] = _Tally()
            self.suites[key] = {}
        total.add(outcome, reason, kernel, execution)
        by_suite = self.suites[key]
        name = suite or "other"
        tally = by_suite.get(name)
        if tally is None:
            tally = by_suite[name] = _Tally()
        tally.add(outcome, reason, kernel)
        if outcome != "skipped" and path in REFERENCE_PATHS:
            self.reference_ran.add((scheme, platform))

    def cells(self) -> dict[tuple[str, str, str], Cell]:
        """(scheme, path, platform) -> Cell, in sorted order."""
        return {
            key: _cell(
                key[1], self.totals[key], self.suites[key], (key[0], key[2]) in self.reference_ran
            )
            for key in sorted(self.totals)
        }


def build_matrix(frame: pd.DataFrame) -> dict[tuple[str, str], dict[str, Cell]]:
    """(scheme, path) -> platform -> Cell, over rows with a scheme and a path (no benchmarks)."""
    fold = MatrixFold()
    for scheme, path, platform, suite, outcome, reason, kernel, execution in zip(
        *(column_values(frame, c) for c in MATRIX_COLUMNS), strict=True
    ):
        if scheme is None or path is None or platform is None or suite == "benchmark":
            continue
        fold.add(scheme, path, platform, suite, outcome, reason, kernel, execution)
    return matrix_of(fold.cells())


def matrix_of(
    cells: dict[tuple[str, str, str], Cell],
) -> dict[tuple[str, str], dict[str, Cell]]:
    """(scheme, path, platform) -> Cell, in sorted order, as the report's (scheme, path) ->
    platform -> Cell."""
    matrix: dict[tuple[str, str], dict[str, Cell]] = {}
    for (scheme, path, platform), cell in cells.items():
        matrix.setdefault((scheme, path), {})[platform] = cell
    return matrix
