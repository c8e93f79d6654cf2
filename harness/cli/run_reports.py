"""What ``run`` writes once its pytest wrote results: summary.md and report.html, the
``latest`` pointer, the ``--out`` copy, and the few lines it ends with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import FileSystemError, filesystem_fault


def finish_run(run: Any, reports: Path, out: Path | None, full: bool = True) -> str:
    """What a run does once its pytest wrote results: summary.md and report.html, the
    ``latest`` pointer, the ``--out`` copy; returns what to print: the text report
    (``full``) or the few lines of `run_digest`."""
    from harness.report.outputs.targets import Outputs
    from harness.report.outputs.text import render_report
    from harness.report.reading.rundir import update_latest

    try:
        write_run_reports(run)
        update_latest(reports, run)
        if out is not None:
            Outputs({"--out": out}).write("--out", run.results.read_bytes())
            print(f"results also written to {out}")
    except OSError as exc:
        fault = filesystem_fault(exc)
        if fault is None:
            raise
        raise FileSystemError(f"{fault}; the run's results are kept in {run.results}") from exc
    if not full:
        return run_digest(run)
    return render_report(run.results, baseline=None, max_rows=40)


def run_digest(run: Any) -> str:
    """The few lines `run` ends with: the outcome counts and where the details are."""
    from harness.report.reading.results import read_results

    summary = read_results(run.results)["summary"]
    counts = ", ".join(f"{n} {o}" for o, n in summary["outcomes"].items()) or "no tests"
    reasons = len(summary["skip_reasons"])
    skips = f" ({reasons} skip reason(s), counted above)" if reasons else ""
    return (
        f"qharness: {counts}{skips}\n"
        f"details: {run.summary} (summary), {run.html} (matrix, skips, plots), "
        f"{run.results}; `report --results {run.results}` prints the full text report"
    )


def write_run_reports(run: Any, history: Path | None = None) -> None:
    """summary.md and report.html of one run directory (vs its history when given)."""
    from harness.report.model.nightly import build_report
    from harness.report.outputs.html_page import render_html
    from harness.report.outputs.markdown import summary_markdown
    from harness.report.reading.runs import open_history
    from harness.store.atomic import write_text_atomic

    report = build_report([run.path], open_history(history) if history else None)
    write_text_atomic(run.summary, summary_markdown(report))
    write_text_atomic(run.html, render_html(report, run.html))
