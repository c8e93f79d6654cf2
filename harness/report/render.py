"""Nightly report: summarize a results file and flag regressions against a baseline.

Regressions: a test that passed in the baseline and now fails or errors; a test that ran
and is now skipped; an error metric that got worse (SQNR down by more than
`SQNR_DROP_DB`, peak memory up by more than `PEAK_GROWTH`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.report.results import read_results

SQNR_DROP_DB = 1.0  # quantization noise is deterministic; a 1 dB drop is a real change
PEAK_GROWTH = 0.05  # allocator rounding aside, peak bytes are deterministic: 5% is real growth


def _frame(doc: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for r in doc["records"]:
        metrics = r.get("metrics") or {}
        rows.append(
            {
                "nodeid": r["nodeid"],
                "suite": r.get("suite", "other"),
                "scheme": r.get("scheme", "-"),
                "path": r.get("path", "-"),
                "outcome": r["outcome"],
                "reason": r.get("reason"),
                "sqnr_db": metrics.get("sqnr_db"),
                "peak_bytes": metrics.get("peak_bytes"),
            }
        )
    columns = ["nodeid", "suite", "scheme", "path", "outcome", "reason", "sqnr_db", "peak_bytes"]
    return pd.DataFrame(rows, columns=columns)


def regressions(results: Path | str, baseline: Path | str) -> list[str]:
    new = _frame(read_results(Path(results))).set_index("nodeid")
    old = _frame(read_results(Path(baseline))).set_index("nodeid")
    found: list[str] = []
    both = new.index.intersection(old.index)
    for nodeid in both:
        n, o = new.loc[nodeid], old.loc[nodeid]
        if o["outcome"] == "passed" and n["outcome"] in ("failed", "error"):
            found.append(f"{nodeid}: passed -> {n['outcome']}: {n['reason']}")
        elif o["outcome"] == "passed" and n["outcome"] == "skipped":
            found.append(f"{nodeid}: passed -> skipped: {n['reason']}")
        sqnr_known = pd.notna(o["sqnr_db"]) and pd.notna(n["sqnr_db"])
        if sqnr_known and n["sqnr_db"] < o["sqnr_db"] - SQNR_DROP_DB:
            found.append(f"{nodeid}: SQNR {o['sqnr_db']:.2f} -> {n['sqnr_db']:.2f} dB")
        peak_known = pd.notna(o["peak_bytes"]) and pd.notna(n["peak_bytes"])
        if peak_known and n["peak_bytes"] > o["peak_bytes"] * (1 + PEAK_GROWTH):
            found.append(
                f"{nodeid}: peak memory {int(o['peak_bytes'])} -> {int(n['peak_bytes'])} bytes"
            )
    for nodeid in old.index.difference(new.index):
        found.append(f"{nodeid}: ran in the baseline, missing now")
    return found


def render_report(
    results: Path | str, baseline: Path | str | None = None, max_rows: int = 200
) -> str:
    doc = read_results(Path(results))
    df = _frame(doc)
    p = doc["platform"]
    lines = [
        f"# qharness report: {p['device']}/{p['arch']} ({p['name']}), torch {p['torch_version']}",
        "",
        f"results: {results} (created {doc['created']}, pytest exit {doc['exitstatus']})",
        "",
        "## Outcomes by suite and path",
        "",
    ]
    if df.empty:
        lines.append("no records")
    else:
        table = df.pivot_table(
            index=["suite", "path"],
            columns="outcome",
            values="nodeid",
            aggfunc="count",
            fill_value=0,
        )
        lines.append(table.to_string())
    skipped = df[df["outcome"] == "skipped"]
    lines += ["", f"## Skips ({len(skipped)}), by reason", ""]
    for reason, count in skipped["reason"].value_counts().items():
        lines.append(f"- {count} x {reason}")
    if skipped.empty:
        lines.append("none")
    bad = df[df["outcome"].isin(["failed", "error"])]
    lines += ["", f"## Failures ({len(bad)})", ""]
    for _, row in bad.head(max_rows).iterrows():
        lines.append(f"- {row['nodeid']}: {row['reason']}")
    if bad.empty:
        lines.append("none")
    if len(bad) > max_rows:
        lines.append(f"- ... and {len(bad) - max_rows} more")
    sq = df.dropna(subset=["sqnr_db"])
    if not sq.empty:
        lines += ["", "## Worst SQNR per scheme and path (dB)", ""]
        lines.append(sq.groupby(["scheme", "path"])["sqnr_db"].min().round(2).to_string())
    peaks = df.dropna(subset=["peak_bytes"])
    if not peaks.empty:
        lines += ["", "## Largest peak memory per scheme and path (bytes)", ""]
        lines.append(peaks.groupby(["scheme", "path"])["peak_bytes"].max().astype(int).to_string())
    if baseline is not None:
        found = regressions(results, baseline)
        lines += ["", f"## Regressions vs {baseline} ({len(found)})", ""]
        lines += [f"- {line}" for line in found] or ["none"]
    return "\n".join(lines) + "\n"
