"""Nightly report: summarize a results file and flag regressions against a baseline.

The text report of one results file (`report --results`, and what `run` prints). Regressions
come from `harness.report.model.regress` (one linear comparison); every string from the results
file goes through `md_inline` (the regression lines, which scripts grep, through
`one_line`): one inert line, so a reason with newlines cannot start a section of its own
and no tag, terminal escape or bidi control gets through.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from harness.platform.simulate import EXECUTIONS
from harness.report.model.digest import digest_run
from harness.report.model.escape import md_inline, one_line
from harness.report.model.models_section import model_regressions, model_rows, models_text
from harness.report.model.record_tables import RecordTables
from harness.report.model.regress import PEAK_GROWTH, SQNR_DROP_DB, Regression, find_regressions
from harness.report.reading.frame import COLUMNS, typed
from harness.report.reading.runs import load_run

FAILED = ("failed", "error")  # the failures the text lists (an xfail is expected)

__all__ = ["PEAK_GROWTH", "SQNR_DROP_DB", "regressions", "render_report"]


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
    """Regressions of ``results`` against ``baseline`` (rules: `harness.report.model.regress`)."""
    new, old = load_run(Path(results)), load_run(Path(baseline))
    found = find_regressions(new.frame, old.frame) + model_regressions(new.frame, old.frame)
    return [one_line(_legacy_line(r), 2000) for r in found]


MOE_SQNR_NOTE = (
    "MoE inputs are built so that some outputs nearly cancel (they exercise the error "
    "bounds), which makes the worst SQNR say nothing about the scheme; the median is shown, "
    "and each test's value is in the results file."
)


def _counts(counts: Counter[tuple[str, str, str]], column: str) -> str:
    """A (suite, path) x ``column`` table of test counts, 0 where none."""
    frame = pd.DataFrame(
        [(*key, n) for key, n in counts.items()], columns=["suite", "path", column, "n"]
    )
    table = frame.pivot_table(
        index=["suite", "path"], columns=column, values="n", aggfunc="sum", fill_value=0
    )
    return str(table.to_string())


def _execution_section(tables: RecordTables) -> list[str]:
    """On a simulated platform, what each suite and path ran (the records' ``execution``):
    its passes are the arch's kernels' only where GPU kernel source was interpreted."""
    if not tables.executions:
        return []
    ran: Counter[tuple[str, str, str]] = Counter()
    for (suite, path, execution), n in tables.executions.items():
        ran[(suite, path, EXECUTIONS[execution])] += n
    return ["", "## What ran on this simulated platform (tests)", "", _counts(ran, "execution")]


def _groups(values: dict[tuple[str, str], Any], columns: list[str]) -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples(list(values), names=["scheme", "path"])
    return pd.DataFrame(list(values.values()), index=index, columns=columns).sort_index()


def _sqnr_sections(tables: RecordTables) -> list[str]:
    """Linear SQNR per scheme and path (median and worst: the linear inputs are plain
    seeded data), then MoE SQNR as a median with the reason the worst case is not shown."""
    lines: list[str] = []
    worst = int if tables.sqnr_ints else float
    linear = tables.sqnr.get("linear")
    if linear:
        lines += ["", "## Linear SQNR per scheme and path (dB)", ""]
        rows = {g: (s.median, worst(s.worst)) for g, s in linear.items()}
        lines.append(_groups(rows, ["median", "worst"]).round(2).to_string())
    moe = tables.sqnr.get("moe")
    if moe:
        lines += ["", "## MoE SQNR per scheme and path (dB, median)", "", MOE_SQNR_NOTE, ""]
        medians = _groups({g: s.median for g, s in moe.items()}, ["sqnr_db"])["sqnr_db"]
        lines.append(medians.round(2).to_string())
    return lines


def _peak_section(tables: RecordTables) -> list[str]:
    """The largest peak memory per scheme and path (bytes, whole)."""
    if not tables.peaks:
        return []
    whole = {g: int(p if tables.peak_ints else float(p)) for g, p in tables.peaks.items()}
    peaks = _groups(whole, ["peak_bytes"])["peak_bytes"]
    return ["", "## Largest peak memory per scheme and path (bytes)", "", peaks.to_string()]


def render_report(
    results: Path | str, baseline: Path | str | None = None, max_rows: int = 200
) -> str:
    """The text report of one results file, from its digest (`harness.report.model.digest`)."""
    run = digest_run(Path(results))
    tables, p = run.tables, run.machine
    lines = [
        f"# qharness report: {md_inline(p['device'])}/{md_inline(p['arch'])} "
        f"({md_inline(p['name'])}), torch {md_inline(p['torch_version'])}",
        "",
        f"results: {md_inline(results, 1000)} (created {md_inline(run.created)}, "
        f"pytest exit {run.exitstatus})",
        "",
        "## Outcomes by suite and path",
        "",
    ]
    lines.append(_counts(tables.outcomes, "outcome") if tables.records else "no records")
    lines += _execution_section(tables)
    lines += ["", f"## Skips ({sum(run.skips.values())}), by reason", ""]
    by_count = sorted(run.skips.items(), key=lambda item: -item[1])  # stable: first seen first
    for reason, count in by_count:
        lines.append(f"- {count} x {md_inline(reason or '(no reason given)', 2000)}")
    if not run.skips:
        lines.append("none")
    bad = [f for f in run.failures if f.outcome in FAILED]
    lines += ["", f"## Failures ({len(bad)})", ""]
    for f in bad[:max_rows]:
        lines.append(f"- {md_inline(f.nodeid)}: {md_inline(f.reason or f.outcome, 2000)}")
    if not bad:
        lines.append("none")
    if len(bad) > max_rows:
        lines.append(f"- ... and {len(bad) - max_rows} more")
    lines += _sqnr_sections(tables)
    lines += models_text(model_rows(typed(pd.DataFrame(run.models, columns=list(COLUMNS)))))
    lines += _peak_section(tables)
    if baseline is not None:
        found = regressions(results, baseline)
        lines += ["", f"## Regressions vs {baseline} ({len(found)})", ""]
        lines += [f"- {line}" for line in found] or ["none"]
    return "\n".join(lines) + "\n"
