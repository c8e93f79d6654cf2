"""An honest matrix: a cell says pass only where every suite of that scheme and path ran;
per-suite counts and "not run" are shown; plots tell 30+ series apart; the peak-memory plot
shows the memory suite's forward-call peaks, not another suite's constant."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

from harness.report.model.matrix import build_matrix
from harness.report.outputs import plots
from harness.report.reading.frame import COLUMNS, typed


def _rows(*rows: dict[str, Any]) -> pd.DataFrame:
    base = {"run_id": "r1", "created": "2026-12-01T03:00:00Z", "platform": "cpu",
            "partial": False, "shape": "1x16x256"}  # fmt: skip
    return typed(pd.DataFrame([{**base, **r} for r in rows], columns=list(COLUMNS)))


def _row(suite: str, scheme: str, path: str, outcome: str, n: int, **extra: Any) -> dict[str, Any]:
    return {"suite": suite, "scheme": scheme, "path": path, "outcome": outcome,
            "nodeid": f"suites/test_{suite}.py::t[{scheme}-{path}-{n}]",
            "reason": "no native kernel" if outcome == "skipped" else None, **extra}  # fmt: skip


def test_moe_passing_does_not_make_skipped_linear_native_a_pass() -> None:
    frame = _rows(
        *[_row("linear", "w_mxfp4", "native", "skipped", i) for i in range(6)],
        *[_row("moe", "w_mxfp4", "native", "passed", i, kernel="grouped_mm") for i in range(2)],
        *[_row("linear", "w_mxfp4", "emulated", "passed", i) for i in range(6)],
    )
    cell = build_matrix(frame)[("w_mxfp4", "native")]["cpu"]
    assert cell.verdict == "partial"
    assert cell.label == "partly run: linear not run (6 skipped); moe 2 passed"
    ok = build_matrix(frame)[("w_mxfp4", "emulated")]["cpu"]
    assert (ok.verdict, ok.label) == ("pass", "pass")


def test_a_cell_that_ran_nothing_says_not_run() -> None:
    frame = _rows(*[_row("linear", "fp8", "native", "skipped", i) for i in range(3)])
    cell = build_matrix(frame)[("fp8", "native")]["cpu"]
    assert (cell.verdict, cell.label) == ("skipped", "not run")


def _capture(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    figures: list[Figure] = []

    def keep(fig: Figure) -> str:
        figures.append(fig)
        return ""

    monkeypatch.setattr(plots, "_png", keep)
    return figures


def test_thirty_five_sqnr_series_have_distinct_colour_and_marker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    figures = _capture(monkeypatch)
    rows = [
        {**_row("linear", f"scheme{i:02d}", "emulated", "passed", run), "run_id": f"r{run}",
         "created": f"2026-12-0{run + 1}T03:00:00Z", "sqnr_db": 20.0 + i}
        for i in range(35) for run in range(2)
    ]  # fmt: skip
    plots.sqnr_over_runs(_rows(*rows))
    lines = figures[0].axes[0].get_lines()
    assert len(lines) == 35
    styles = {(tuple(line.get_color()), line.get_marker()) for line in lines}
    assert len(styles) == 35


def test_peak_memory_plot_shows_the_memory_suites_forward_peaks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    figures = _capture(monkeypatch)
    mib = 2**20
    frame = _rows(
        # the reference quantizer's peak: the same 4 MiB for every scheme (shape-bound)
        _row("quantize", "fp8", "emulated", "passed", 0, peak_bytes=4.0 * mib),
        _row("quantize", "mxfp4", "emulated", "passed", 0, peak_bytes=4.0 * mib),
        # the forward calls under their budget: what the plot says it shows
        _row("memory", "fp8", "native", "passed", 1, peak_bytes=1.5 * mib),
        _row("memory", "fp8", "emulated", "passed", 2, peak_bytes=2.5 * mib),
        _row("memory", "mxfp4", "emulated", "passed", 1, peak_bytes=0.75 * mib),
    )
    plots.peak_memory(frame)
    ax = figures[0].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    widths = dict(zip(labels, [p.get_width() for p in ax.patches], strict=True))
    assert widths == {"mxfp4": 0.75, "fp8": 2.5}
    assert "forward" in ax.get_xlabel()


def test_peaks_alike_are_not_plotted_and_the_page_gives_their_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pathlib import Path

    from harness.report.model.nightly import PEAK_COLUMNS, NightlyReport
    from harness.report.outputs.html_page import render_html

    figures = _capture(monkeypatch)
    mib = 2**20
    # every scheme's forward peak about 4 MiB: bars of one length tell nothing apart
    peaks = pd.DataFrame(
        [("cpu", "fp8", "memory", 4.0 * mib), ("cpu", "mxfp4", "memory", 4.1 * mib)],
        columns=list(PEAK_COLUMNS),
    )
    assert plots.peak_memory(peaks) is None
    assert figures == []
    report = NightlyReport({}, {}, {}, [], [], [], peaks=peaks)
    page = render_html(report, Path("report.html"))
    assert "every scheme's peak is between 4.00 and 4.10 MiB (within 5%)" in page
