"""The merged matrix: scheme x path rows, one column per platform, one verdict per cell.

A cell is ``pass``, ``fail`` (any failed or errored test), ``emulated-only`` (a native path
that did not run its tests natively here, while the reference path ran: skipped, or a MoE
kernel that is the emulated one), ``skipped`` (with the most common reason) or empty where
the platform has no such tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.report.regress import BAD, EMULATED_KERNEL, REFERENCE_PATHS


@dataclass(frozen=True)
class Cell:
    verdict: str  # "pass" | "fail" | "emulated-only" | "skipped" | ""
    passed: int
    failed: int
    skipped: int
    reason: str = ""

    @property
    def label(self) -> str:
        if self.verdict == "fail":
            return f"fail {self.failed}/{self.passed + self.failed}"
        if self.verdict == "pass" and self.skipped:
            return f"pass ({self.skipped} skipped)"
        return self.verdict


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
    if failed:
        return Cell("fail", passed, failed, skipped, reason)
    if non_reference and reference_ran and (passed == 0 or emulated_kernel):
        return Cell("emulated-only", passed, failed, skipped, reason or "runs the emulated kernel")
    if passed == 0:
        return Cell("skipped", passed, failed, skipped, reason)
    return Cell("pass", passed, failed, skipped, reason)


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
