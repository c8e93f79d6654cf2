"""Regressions of one run against an earlier run of the same platform.

One merge of the two runs on the test id (linear in the records); each rule below is a
vectorized mask over the merged table. A regression names the test, its old and new values
and the first run where it appeared (the start of the trailing streak of runs in the
history where the new state holds).

Rules and where their thresholds come from:
- ``pass -> fail``: passed (or xpassed) before, now failed, error or xfailed.
- ``native -> emulated fallback``: a non-reference path that ran is now skipped, or a MoE
  path whose kernel was native now reports the ``emulated`` kernel.
- ``ran -> skipped``: any other test that ran and is now skipped.
- a metric's rule, one per field row with a ``threshold`` (`harness.report.reading.schema`,
  where each threshold's reason is written): ``SQNR down`` by more than `SQNR_DROP_DB` or
  now NaN; ``error/bound up`` by more than `RATIO_RISE` of the bound or now NaN; ``peak
  memory up`` by more than `PEAK_GROWTH`. A new regressing field is one row there.
- ``benchmark slower``: mean above the history's mean + `NOISE_SIGMAS` standard deviations
  of the same benchmark on the same platform (at least `MIN_HISTORY` earlier runs; with
  fewer, the two runs' own standard deviations).
- ``missing``: ran in the baseline, absent now (only when neither run is partial).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.report.reading.schema import (
    FIELDS,
    PEAK_GROWTH,
    RATIO_RISE,
    SQNR_DROP_DB,
    Field,
    Threshold,
)

__all__ = ["PEAK_GROWTH", "RATIO_RISE", "SQNR_DROP_DB", "Regression", "find_regressions"]

NOISE_SIGMAS = 3.0
MIN_HISTORY = 3

RAN_OK = ("passed", "xpassed")
BAD = ("failed", "error", "xfailed")
REFERENCE_PATHS = ("emulated",)
EMULATED_KERNEL = "emulated"

# What the rules read besides the compared values: the test's identity and state, and the
# benchmark's spread (its noise band sits beside the mean that regresses).
STATE_COLUMNS = ("nodeid", "path", "outcome", "reason", "kernel", "suite")
COMPANION_COLUMNS = ("bench_stddev_s",)


def metric_rules() -> list[tuple[Field, Threshold]]:
    """The fields with a regression threshold, in table order (read when called)."""
    return [(f, f.threshold) for f in FIELDS if f.threshold is not None and f.regresses]


def worse(field: Field, rule: Threshold, old: Any, new: pd.Series) -> pd.Series:
    """Where ``new`` moved the worse way from ``old`` by more than the rule allows (or became
    NaN, where that is worse); ``old`` is one value or a column beside ``new``."""
    if field.regresses == "fall":
        limit = old * (1 - rule.by) if rule.relative else old - rule.by
        moved = new < limit
    else:
        limit = old * (1 + rule.by) if rule.relative else old + rule.by
        moved = new > limit
    return (moved | new.isna()) if rule.nan_is_worse else moved


def compared_columns() -> list[str]:
    """The merged columns: state, every history field the schema marks as regressing (read
    when called, so a field added with ``regresses`` is compared), and companions."""
    compared = [f.name for f in FIELDS if f.regresses is not None and f.dtype is not None]
    return [*STATE_COLUMNS, *compared, *COMPANION_COLUMNS]


@dataclass(frozen=True)
class Regression:
    platform: str
    nodeid: str
    kind: str
    old: str
    new: str
    run_id: str
    first_run: str
    detail: str = ""

    def line(self) -> str:
        """The legacy one-line form (`report --baseline`)."""
        text = f"{self.nodeid}: {self.kind}: {self.old} -> {self.new}"
        return f"{text}: {self.detail}" if self.detail else text


def _fmt(value: Any, unit: str = "", digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "NaN" if isinstance(value, float) else "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}" if unit != " bytes" else f"{int(value)}{unit}"
    return f"{value}{unit}"


def _outcome_streak(rows: pd.DataFrame, holds: pd.Series) -> str | None:
    """The run id where the trailing run of True in ``holds`` (ordered by run) starts."""
    first = None
    for run_id, ok in zip(rows["run_id"].tolist()[::-1], holds.tolist()[::-1], strict=False):
        if not ok:
            break
        first = run_id
    return first


def find_regressions(
    new: pd.DataFrame,
    old: pd.DataFrame,
    history: pd.DataFrame | None = None,
) -> list[Regression]:
    """Regressions of run ``new`` against run ``old`` (frames of `harness.report.reading.frame`).

    ``history``: earlier rows of the same platform (any runs, ``new``'s excluded), for the
    benchmark noise band and the first run of each regression."""
    if new.empty:
        return []
    run_id = str(new["run_id"].iloc[0])
    platform = str(new["platform"].iloc[0])
    keep = compared_columns()
    m = pd.merge(
        old[keep].drop_duplicates("nodeid"),
        new[keep].drop_duplicates("nodeid"),
        on="nodeid",
        how="outer",
        suffixes=("_old", "_new"),
        indicator=True,
    )
    both = m["_merge"] == "both"
    o_ok = m["outcome_old"].isin(RAN_OK) & both
    n_bad = m["outcome_new"].isin(BAD)
    n_skip = m["outcome_new"] == "skipped"
    path = m["path_new"].fillna(m["path_old"])
    non_reference = path.notna() & ~path.isin(REFERENCE_PATHS)
    kernel_fell_back = (
        both
        & m["kernel_old"].notna()
        & (m["kernel_old"] != EMULATED_KERNEL)
        & (m["kernel_new"] == EMULATED_KERNEL)
    )
    fallback = (o_ok & n_skip & non_reference) | kernel_fell_back.fillna(False)
    ran_skipped = o_ok & n_skip & ~fallback

    ran_now = m["outcome_new"].isin(RAN_OK + BAD)  # a skipped test has no value
    metric_masks = []
    for field, rule in metric_rules():
        old_v, new_v = m[f"{field.name}_old"], m[f"{field.name}_new"]
        mask = both & old_v.notna() & worse(field, rule, old_v, new_v)
        if rule.finite_baseline:
            mask &= np.isfinite(old_v)
        if rule.ran_only:
            mask &= ran_now
        metric_masks.append((field, rule, mask))
    slower, bands = _benchmark_slower(m, both, history)
    missing = m["_merge"] == "left_only"
    if ("partial" in new and bool(new["partial"].any())) or (
        "partial" in old and bool(old["partial"].any())
    ):
        missing &= False

    found: list[tuple[str, str, str, str, str, float | None]] = []

    def raw(value: Any) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not pd.isna(value) else None

    def add(mask: pd.Series, kind: str, old_col: str, new_col: str, **fmt: Any) -> None:
        detail_col = fmt.pop("detail", None)
        for _, row in m[mask.fillna(False).astype(bool)].iterrows():
            detail = "" if detail_col is None else _fmt(row[detail_col])
            found.append(
                (
                    str(row["nodeid"]),
                    kind,
                    _fmt(row[old_col], **fmt),
                    _fmt(row[new_col], **fmt),
                    "" if detail == "-" else detail,
                    raw(row[old_col]),
                )
            )

    add(o_ok & n_bad, "pass -> fail", "outcome_old", "outcome_new", detail="reason_new")
    add(fallback & n_skip, "native -> emulated fallback", "outcome_old", "outcome_new",
        detail="reason_new")  # fmt: skip
    add(fallback & ~n_skip, "native -> emulated fallback", "kernel_old", "kernel_new")
    add(ran_skipped, "ran -> skipped", "outcome_old", "outcome_new", detail="reason_new")
    for field, rule, mask in metric_masks:
        add(mask, rule.kind, f"{field.name}_old", f"{field.name}_new", unit=rule.unit,
            digits=rule.digits)  # fmt: skip
    for _, row in m[slower].iterrows():
        found.append(
            (
                str(row["nodeid"]),
                "benchmark slower",
                _fmt(row["bench_mean_s_old"] * 1e3, " ms", 3),
                _fmt(row["bench_mean_s_new"] * 1e3, " ms", 3),
                f"noise band up to {bands[row['nodeid']] * 1e3:.3f} ms",
                None,
            )
        )
    add(missing, "missing", "outcome_old", "outcome_new")
    return [
        Regression(
            platform, nodeid, kind, o, n, run_id, _first_run(history, new, nodeid, kind, v), detail
        )
        for nodeid, kind, o, n, detail, v in found
    ]


def _benchmark_slower(
    m: pd.DataFrame, both: pd.Series, history: pd.DataFrame | None
) -> tuple[pd.Series, dict[str, float]]:
    """Mask of benchmarks above their noise band, and the band per benchmark."""
    is_bench = both & m["bench_mean_s_new"].notna() & m["bench_mean_s_old"].notna()
    own = m["bench_mean_s_old"] + NOISE_SIGMAS * np.fmax(
        m["bench_stddev_s_old"].fillna(0.0), m["bench_stddev_s_new"].fillna(0.0)
    )
    band = own.copy()
    if history is not None and not history.empty and is_bench.any():
        bench = history[history["bench_mean_s"].notna()]
        stats = bench.groupby("nodeid")["bench_mean_s"].agg(["mean", "std", "count"])
        stats = stats[stats["count"] >= MIN_HISTORY]
        spread = m["nodeid"].map(stats["mean"] + NOISE_SIGMAS * stats["std"].fillna(0.0))
        band = spread.where(spread.notna(), own)
    slower = is_bench & (m["bench_mean_s_new"] > band)
    return slower, dict(zip(m.loc[slower, "nodeid"], band[slower], strict=False))


FALLBACK = "native -> emulated fallback"


def _state(kind: str, rows: pd.DataFrame, old: float | None) -> pd.Series:
    """Per run of one test: does the regressed state of ``kind`` hold there?"""
    if kind == "pass -> fail":
        return rows["outcome"].isin(BAD)
    if kind == "ran -> skipped":
        return rows["outcome"] == "skipped"
    if kind == FALLBACK:
        return (rows["outcome"] == "skipped") | (rows["kernel"] == EMULATED_KERNEL)
    if old is not None:
        for field, rule in metric_rules():
            if rule.kind == kind:
                return worse(field, rule, old, rows[field.name])
    return pd.Series(False, index=rows.index)


def _first_run(
    history: pd.DataFrame | None, new: pd.DataFrame, nodeid: str, kind: str, old: float | None
) -> str:
    """Where the new state began: the earliest run of the trailing streak sharing it."""
    run_id = str(new["run_id"].iloc[0])
    if history is None or history.empty:
        return run_id
    rows = pd.concat([history[history["nodeid"] == nodeid], new[new["nodeid"] == nodeid]])
    rows = rows.sort_values(["created", "run_id"], kind="stable")
    return _outcome_streak(rows, _state(kind, rows, old).fillna(False)) or run_id
