"""report.html's matrix cells: each runner's cell gives the linear median SQNR of its scheme
and path and its change since the runner's baseline, and wraps its per-suite counts onto
lines of their own instead of widening the page."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from harness.report.model.nightly import build_report
from harness.report.outputs.html_page import STYLE, render_html
from tests.fleet.night import record, results_doc, write_run

OLD = (30.0, 31.0, 32.5)
NEW = (29.25, 30.0, 30.5)


def _night(tmp_path: Path, run_id: str, created: str, sqnrs: tuple[float, ...]) -> Path:
    records = []
    for i, sqnr in enumerate(sqnrs):
        r = record("fp8_per_tensor", "emulated", sqnr=sqnr)
        r["nodeid"] = r["nodeid"].replace("1x16x256", f"{i + 1}x16x256")
        records.append(r)
    moe = record("fp8_per_tensor", "emulated", sqnr=3.0, suite="moe")  # not the cell's number
    return write_run(tmp_path, run_id, results_doc("sm_90", created, [*records, moe]))


def _cell_html(page: str) -> str:
    table = page.split("<h2>Matrix", 1)[1].split("</table>", 1)[0]
    found = re.search(r'<td class="cell pass">.*?</td>', table)
    assert found is not None
    return found.group(0)


def test_a_cell_shows_its_median_sqnr_and_the_change_since_the_baseline(tmp_path: Path) -> None:
    old = _night(tmp_path, "20261201T0300Z-sm_90-a1b2", "2026-12-01T03:00:00Z", OLD)
    new = _night(tmp_path, "20261202T0300Z-sm_90-a1b2", "2026-12-02T03:00:00Z", NEW)
    cell = _cell_html(render_html(build_report([new], baseline=old), tmp_path / "r.html"))
    now, base = statistics.median(NEW), statistics.median(OLD)
    assert f'<span class="sqnr">{now:.2f} dB (Δ {now - base:+.2f})</span>' in cell


def test_a_first_night_cell_shows_its_sqnr_without_a_change(tmp_path: Path) -> None:
    new = _night(tmp_path, "20261202T0300Z-sm_90-a1b2", "2026-12-02T03:00:00Z", NEW)
    cell = _cell_html(render_html(build_report([new]), tmp_path / "r.html"))
    assert f'<span class="sqnr">{statistics.median(NEW):.2f} dB</span>' in cell


def test_per_suite_counts_wrap_below_the_verdict(tmp_path: Path) -> None:
    new = _night(tmp_path, "20261202T0300Z-sm_90-a1b2", "2026-12-02T03:00:00Z", NEW)
    cell = _cell_html(render_html(build_report([new]), tmp_path / "r.html"))
    assert '>pass<span class="detail">linear 3 passed; moe 1 passed</span>' in cell
    rule = re.search(r"td\.cell\{([^}]*)\}", STYLE)
    assert rule is not None
    assert "nowrap" not in rule.group(1)
    assert "max-width" in rule.group(1)
