"""`report --html` at fleet scale: beyond `MAX_GROUPS` runners the plots and the matrix show
groups of runners (by platform, the rest in one), never a panel, bar or column per runner,
and every runner stays counted in its group."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

from harness.report.model.digest import RunDigest
from harness.report.model.fleet_groups import MAX_GROUPS, runner_groups
from harness.report.model.matrix import Cell
from harness.report.model.nightly import NightlyReport
from harness.report.outputs import plots
from harness.report.outputs.html_page import render_html

RUNNERS = 40  # five times `MAX_GROUPS`


def _capture(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    figures: list[Figure] = []

    def keep(fig: Figure) -> str:
        figures.append(fig)
        return ""

    monkeypatch.setattr(plots, "_png", keep)
    return figures


def test_few_runners_keep_a_group_each() -> None:
    keys = [f"cpu@rack{i}" for i in range(MAX_GROUPS)]
    assert runner_groups(keys) == {k: k for k in keys}


def test_many_platforms_keep_the_largest_and_count_the_rest_together() -> None:
    # platform p{i} has i + 1 runners: 12 platforms, 78 runners
    keys = [f"p{i:02d}@r{j}" for i in range(12) for j in range(i + 1)]
    groups = runner_groups(keys)
    names = set(groups.values())
    assert len(names) == MAX_GROUPS
    assert "p11 (12 runners)" in names
    assert groups["p00@r0"] == "5 other platforms (15 runners)"  # p00..p04: 1+2+3+4+5


def _sqnr(runners: int, nights: int) -> tuple[pd.DataFrame, dict[tuple[str, int], float]]:
    """Per-run medians as `NightlyReport.sqnr` holds them, and each (scheme, night)'s
    median over the runners, computed here from the same inputs."""
    rows: list[dict[str, Any]] = []
    expected: dict[tuple[str, int], float] = {}
    for scheme, base in (("fp8", 30.0), ("mxfp4", 18.0)):
        for night in range(nights):
            values = [base + night + 0.25 * (r % 7) for r in range(runners)]
            expected[(scheme, night)] = statistics.median(values)
            rows += [
                {"platform": f"cpu@rack{r:03d}", "scheme": scheme, "run_id": f"n{night}-{r:03d}",
                 "created": f"2026-12-0{night + 1}T03:{r % 60:02d}:00Z", "suite": "linear",
                 "sqnr_db": v}
                for r, v in enumerate(values)
            ]  # fmt: skip
    return pd.DataFrame(rows).astype({"sqnr_db": "float64"}), expected


def test_sqnr_plot_of_a_fleet_is_one_panel_of_medians_over_runners(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    figures = _capture(monkeypatch)
    frame, expected = _sqnr(RUNNERS, nights=3)
    plots.sqnr_over_runs(frame)
    axes = figures[0].axes
    assert len(axes) == 1  # one platform: one panel, not one per runner
    assert f"cpu ({RUNNERS} runners)" in axes[0].get_title()
    lines = {line.get_label(): list(line.get_ydata()) for line in axes[0].get_lines()}
    assert lines == {s: [expected[(s, n)] for n in range(3)] for s in ("fp8", "mxfp4")}


def test_peak_memory_plot_of_a_fleet_has_a_bar_per_group(monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _capture(monkeypatch)
    frame = pd.DataFrame(
        [
            {
                "platform": f"cpu@rack{r:03d}",
                "scheme": scheme,
                "suite": "memory",
                "peak_bytes": float((r + 1) * 2**20 * factor),
            }
            for r in range(RUNNERS)
            for scheme, factor in (("fp8", 1), ("mxfp4", 2))
        ]
    )
    plots.peak_memory(frame)
    ax = figures[0].axes[0]
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths == [float(RUNNERS), float(2 * RUNNERS)]  # the largest over the runners


def _sqnr_of(r: int) -> tuple[float, float | None]:
    """Runner ``r``'s cell SQNR tonight and in its baseline (every third has none)."""
    return 30.0 + 0.5 * (r % 9), (None if r % 3 == 0 else 30.25 + 0.5 * (r % 9))


def _fleet_report(tmp_path: Path, runners: int) -> NightlyReport:
    matrix: dict[tuple[str, str], dict[str, Cell]] = {("fp8", "native"): {}}
    runs = {}
    for r in range(runners):
        key = f"cpu@rack{r:03d}"
        runs[key] = RunDigest(f"run{r:03d}", tmp_path / "results.json", False, "2026", key)
        failed = r in (3, 17)
        matrix[("fp8", "native")][key] = Cell("fail" if failed else "pass", 4, int(failed), 0)
    sqnr = {("fp8", "native", f"cpu@rack{r:03d}"): _sqnr_of(r) for r in range(runners)}
    return NightlyReport(runs, dict.fromkeys(runs), matrix, [], [], [], cell_sqnr=sqnr)


def test_matrix_of_a_fleet_has_a_column_per_group_counting_its_runners(tmp_path: Path) -> None:
    page = render_html(_fleet_report(tmp_path, RUNNERS), tmp_path / "report.html")
    table = page.split("<h2>Matrix", 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th>([^<]*)</th>", table)
    assert heads == ["scheme", "path", f"cpu ({RUNNERS} runners)"]
    cell = re.search(r'<td class="cell (\w+)" title="([^"]*)">([^<]*)(.*?)</td>', table)
    assert cell is not None
    assert cell.groups()[:3] == (
        "fail",
        "fail: cpu@rack003, cpu@rack017",
        f"2 fail, {RUNNERS - 2} pass",
    )
    sqnrs = [_sqnr_of(r) for r in range(RUNNERS)]
    now = statistics.median(n for n, _ in sqnrs)
    change = statistics.median(n - b for n, b in sqnrs if b is not None)
    assert cell.group(4) == f'<span class="sqnr">median {now:.2f} dB (Δ {change:+.2f})</span>'


def test_matrix_of_a_few_runners_keeps_a_column_each(tmp_path: Path) -> None:
    page = render_html(_fleet_report(tmp_path, 4), tmp_path / "report.html")
    table = page.split("<h2>Matrix", 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th>([^<]*)</th>", table)
    assert heads == ["scheme", "path", *(f"cpu@rack{r:03d}" for r in range(4))]
