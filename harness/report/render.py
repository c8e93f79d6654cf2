"""Nightly report: summarize a results file and flag regressions against a baseline.

The text report of one results file (`report --results`, and what `run` prints). Regressions
come from `harness.report.regress` (one linear comparison); every string from the results
file goes through `md_inline` (the regression lines, which scripts grep, through
`one_line`): one inert line, so a reason with newlines cannot start a section of its own
and no tag, terminal escape or bidi control gets through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.platform.simulate import EXECUTIONS
from harness.report.escape import md_inline, one_line
from harness.report.frame import records_frame
from harness.report.models_section import model_regressions, model_rows, models_text
from harness.report.plain import plain_rows, plain_text
from harness.report.regress import PEAK_GROWTH, SQNR_DROP_DB, Regression, find_regressions
from harness.report.results import read_results
from harness.report.runs import load_run
from harness.report.stream import stream_results

__all__ = ["PEAK_GROWTH", "SQNR_DROP_DB", "regressions", "render_report"]


COLUMNS = [
    "nodeid",
    "suite",
    "scheme",
    "path",
    "outcome",
    "reason",
    "sqnr_db",
    "peak_bytes",
    "execution",
]


class _Rows:
    """The report's rows, one tuple per record (a dict per record cost three times the
    memory); names repeat, so each distinct one is made inert and kept once."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.names: dict[tuple[Any, str], str] = {}
        self.words: dict[Any, Any] = {}
        self.models: list[dict[str, Any]] = []  # the model section's records (a few per model)

    def _name(self, value: Any, missing: str) -> str:
        found = self.names.get((value, missing))
        if found is None:
            found = self.names[(value, missing)] = md_inline(value or missing)
        return found

    def add(self, r: dict[str, Any]) -> None:
        metrics = r.get("metrics") or {}
        if isinstance(metrics.get("model"), str) and isinstance(metrics.get("model_check"), str):
            self.models.append(r)  # what `model_rows` reads
        outcome = self.words.setdefault(r["outcome"], r["outcome"])
        reason = r.get("reason")
        self.rows.append(
            (
                r["nodeid"],
                # null or absent: grouped, not dropped; names are table labels, made inert
                self._name(r.get("suite"), "other"),
                self._name(r.get("scheme"), "-"),
                self._name(r.get("path"), "-"),
                outcome,
                self.words.setdefault(reason, reason) if isinstance(reason, str) else reason,
                metrics.get("sqnr_db"),
                metrics.get("peak_bytes"),
                self.words.setdefault(r.get("execution"), r.get("execution")),
            )
        )


def _read(results: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """The results document with only its model section's records, and every record as a
    table: the file is streamed (`harness.report.stream`), so a run of a million records is
    never one document; one the stream cannot vouch for is read whole (its error, or its
    records)."""
    rows = _Rows()
    head = stream_results(results, rows.add)
    if head is None:
        rows = _Rows()
        doc = read_results(results)
        for record in doc["records"]:
            rows.add(record)
        head = {k: v for k, v in doc.items() if k != "records"}
        del doc
    return {**head, "records": rows.models}, pd.DataFrame(rows.rows, columns=COLUMNS)


_LEGACY_FORMS = {
    "SQNR down": "SQNR {old} -> {new}",
    "peak memory up": "peak memory {old} -> {new}",
    "error/bound up": "worst error/bound {old} -> {new}",
    "missing": "ran in the baseline, missing now",
    "benchmark slower": "benchmark {old} -> {new} ({detail})",
}


def _legacy_line(r: Regression) -> str:
    """The one-line form `report --baseline` has always printed (scripts grep it)."""
    form = _LEGACY_FORMS.get(r.kind)
    if form is None:
        text = f"{r.old} -> {r.new}" + (f": {r.detail}" if r.detail else "")
    else:
        old = r.old.removesuffix(" dB").removesuffix(" bytes")
        text = form.format(old=old, new=r.new, detail=r.detail)
    return f"{r.nodeid}: {text}"


def regressions(results: Path | str, baseline: Path | str) -> list[str]:
    """Regressions of ``results`` against ``baseline`` (rules: `harness.report.regress`)."""
    new, old = load_run(Path(results)), load_run(Path(baseline))
    found = find_regressions(new.frame, old.frame) + model_regressions(new.frame, old.frame)
    return [one_line(_legacy_line(r), 2000) for r in found]


MOE_SQNR_NOTE = (
    "MoE inputs are built so that some outputs nearly cancel (they exercise the error "
    "bounds), which makes the worst SQNR say nothing about the scheme; the median is shown, "
    "and each test's value is in the results file."
)


def _execution_section(df: pd.DataFrame) -> list[str]:
    """On a simulated platform, what each suite and path ran (the records' ``execution``):
    its passes are the arch's kernels' only where GPU kernel source was interpreted."""
    ran = df.dropna(subset=["execution"])
    if ran.empty:
        return []
    table = ran.assign(execution=ran["execution"].map(EXECUTIONS)).pivot_table(
        index=["suite", "path"], columns="execution", values="nodeid", aggfunc="count", fill_value=0
    )
    return ["", "## What ran on this simulated platform (tests)", "", table.to_string()]


def _sqnr_sections(df: pd.DataFrame) -> list[str]:
    """Linear SQNR per scheme and path (median and worst: the linear inputs are plain
    seeded data), then MoE SQNR as a median with the reason the worst case is not shown."""
    lines: list[str] = []
    sq = df.dropna(subset=["sqnr_db"])
    linear = sq[sq["suite"] == "linear"]
    if not linear.empty:
        lines += ["", "## Linear SQNR per scheme and path (dB)", ""]
        table = linear.groupby(["scheme", "path"])["sqnr_db"].agg(["median", "min"])
        lines.append(table.rename(columns={"min": "worst"}).round(2).to_string())
    moe = sq[sq["suite"] == "moe"]
    if not moe.empty:
        lines += ["", "## MoE SQNR per scheme and path (dB, median)", "", MOE_SQNR_NOTE, ""]
        lines.append(moe.groupby(["scheme", "path"])["sqnr_db"].median().round(2).to_string())
    return lines


def render_report(
    results: Path | str, baseline: Path | str | None = None, max_rows: int = 200
) -> str:
    doc, df = _read(Path(results))
    p = doc["platform"]
    lines = [
        f"# qharness report: {md_inline(p['device'])}/{md_inline(p['arch'])} "
        f"({md_inline(p['name'])}), torch {md_inline(p['torch_version'])}",
        "",
        f"results: {md_inline(results, 1000)} (created {md_inline(doc['created'])}, "
        f"pytest exit {doc['exitstatus']})",
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
    lines += _execution_section(df)
    skipped = df[df["outcome"] == "skipped"]
    lines += ["", f"## Skips ({len(skipped)}), by reason", ""]
    for reason, count in skipped["reason"].value_counts(dropna=False).items():
        lines.append(f"- {count} x {md_inline(plain_text(reason) or '(no reason given)', 2000)}")
    if skipped.empty:
        lines.append("none")
    bad = df[df["outcome"].isin(["failed", "error"])]
    lines += ["", f"## Failures ({len(bad)})", ""]
    for row in plain_rows(bad.head(max_rows), ["nodeid", "outcome", "reason"]):
        lines.append(
            f"- {md_inline(row['nodeid'])}: {md_inline(row['reason'] or row['outcome'], 2000)}"
        )
    if bad.empty:
        lines.append("none")
    if len(bad) > max_rows:
        lines.append(f"- ... and {len(bad) - max_rows} more")
    lines += _sqnr_sections(df)
    lines += models_text(model_rows(records_frame(doc, Path(results).stem)))
    peaks = df.dropna(subset=["peak_bytes"])
    if not peaks.empty:
        lines += ["", "## Largest peak memory per scheme and path (bytes)", ""]
        lines.append(peaks.groupby(["scheme", "path"])["peak_bytes"].max().astype(int).to_string())
    if baseline is not None:
        found = regressions(results, baseline)
        lines += ["", f"## Regressions vs {baseline} ({len(found)})", ""]
        lines += [f"- {line}" for line in found] or ["none"]
    return "\n".join(lines) + "\n"
