"""The merged matrix: scheme x path rows, one column per platform, one verdict per cell.

A cell is ``pass`` (every suite with tests of that scheme and path ran some of them),
``fail`` (any failed or errored test), ``partial`` (some suites ran, others' tests were all
skipped or fell back to the emulated kernel: "pass" would claim what did not run),
``emulated-only`` (a native path that did not run its tests natively here, while the
reference path ran: skipped, or a MoE kernel that is the emulated one), ``skipped`` (shown
"not run", with the most common reason) or empty where the platform has no such tests.
Each cell keeps its per-suite counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.report.regress import BAD, EMULATED_KERNEL, REFERENCE_PATHS


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

    @property
    def label(self) -> str:
        if self.verdict == "fail":
            head = f"fail {self.failed}/{self.passed + self.failed}"
        elif self.verdict == "pass" and self.skipped:
            head = f"pass ({self.skipped} skipped)"
        elif self.verdict == "skipped":
            head = "not run"
        elif self.verdict == "partial":
            head = "partly run"
        else:
            head = self.verdict
        if len(self.suites) > 1 or self.verdict == "partial":
            return f"{head}: " + "; ".join(s.text for s in self.suites)
        return head


def _suite_counts(rows: pd.DataFrame, non_reference: bool) -> tuple[SuiteCount, ...]:
    counts = []
    for suite, group in rows.groupby(rows["suite"].fillna("other"), sort=True):
        outcomes = group["outcome"]
        failed = int(outcomes.isin(BAD).sum())
        skipped = int((outcomes == "skipped").sum())
        passed = len(group) - failed - skipped
        emulated = bool((group["kernel"] == EMULATED_KERNEL).fillna(False).all())
        ran = passed > 0 and not (non_reference and emulated)
        counts.append(SuiteCount(str(suite), passed, failed, skipped, ran))
    return tuple(counts)


def _cell(rows: pd.DataFrame, reference_ran: bool) -> Cell:
    outcomes = rows["outcome"]
    failed = int(outcomes.isin(BAD).sum())
    skipped = int((outcomes == "skipped").sum())
    passed = len(rows) - failed - skipped
    reasons = rows.loc[outcomes == "skipped", "reason"].dropna()
    reason = str(reasons.value_counts().index[0]) if len(reasons) else ""
    non_reference = bool(
        rows["path"].notna().all() and not rows["path"].isin(REFERENCE_PATHS).any()
    )
    emulated_kernel = bool((rows["kernel"] == EMULATED_KERNEL).fillna(False).all())
    suites = _suite_counts(rows, non_reference)
    if failed:
        return Cell("fail", passed, failed, skipped, reason, suites)
    if non_reference and reference_ran and (passed == 0 or emulated_kernel):
        why = reason or "runs the emulated kernel"
        return Cell("emulated-only", passed, failed, skipped, why, suites)
    if passed == 0:
        return Cell("skipped", passed, failed, skipped, reason, suites)
    not_run = [s for s in suites if not s.ran]
    if not_run:
        why = "; ".join(s.text for s in not_run) + (f" ({reason})" if reason else "")
        return Cell("partial", passed, failed, skipped, why, suites)
    return Cell("pass", passed, failed, skipped, reason, suites)


def build_matrix(frame: pd.DataFrame) -> dict[tuple[str, str], dict[str, Cell]]:
    """(scheme, path) -> platform -> Cell, over rows with a scheme and a path (no benchmarks)."""
    rows = frame[frame["scheme"].notna() & frame["path"].notna() & (frame["suite"] != "benchmark")]
    ran = rows[rows["outcome"] != "skipped"]
    reference_ran = set(
        zip(
            ran.loc[ran["path"].isin(REFERENCE_PATHS), "scheme"],
            ran.loc[ran["path"].isin(REFERENCE_PATHS), "platform"],
            strict=True,
        )
    )
    matrix: dict[tuple[str, str], dict[str, Cell]] = {}
    for (scheme, path, platform), group in rows.groupby(
        ["scheme", "path", "platform"], sort=True, observed=True
    ):
        key = (str(scheme), str(path))
        matrix.setdefault(key, {})[str(platform)] = _cell(
            group, (scheme, platform) in reference_ran
        )
    return matrix
