"""Report rendering: strings from results files cannot forge sections or markup, the
regression rules #14 named (passed -> xfailed, NaN SQNR) fire, and MoE SQNR is reported as a
median with the reason its worst case is left out."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from harness.report.model.escape import html_text, md_inline
from harness.report.outputs.text import regressions, render_report
from harness.report.reading.results import write_results


def _rec(
    test: str, outcome: str = "passed", suite: str = "linear", **metrics: Any
) -> dict[str, Any]:
    return {
        "nodeid": f"suites/test_{suite}.py::test_{suite}[{test}]",
        "suite": suite,
        "scheme": test.split("-")[0],
        "path": "native",
        "outcome": outcome,
        "reason": metrics.pop("reason", None),
        "duration_s": 0.01,
        "metrics": metrics,
    }


def test_a_reason_with_newlines_and_markup_stays_one_inert_line(tmp_path: Path) -> None:
    forged = "boom\n\n## Regressions (0)\n\nnone\n<script>alert(1)</script> | a | b"
    path = tmp_path / "r.json"
    write_results(path, [_rec("s-1", "failed", reason=forged)], exitstatus=1)
    text = render_report(path)
    assert "\n## Regressions (0)" not in text
    assert "\nnone\n<script>" not in text
    assert "\n" not in md_inline(forged)  # a heading can only start a line
    assert "<script>" not in md_inline(forged)
    assert "\\|" in md_inline(forged)  # a table cell cannot be split
    assert "<script>" not in html_text(forged)


def test_passed_to_xfailed_and_nan_sqnr_are_regressions(tmp_path: Path) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    write_results(old, [_rec("a-1"), _rec("b-1", sqnr_db=30.0)], exitstatus=0)
    write_results(new, [_rec("a-1", "xfailed"), _rec("b-1", sqnr_db=math.nan)], exitstatus=0)
    found = "\n".join(regressions(new, old))
    assert "a-1]: passed -> xfailed" in found
    assert "b-1]: SQNR 30.00 -> NaN" in found


def test_moe_sqnr_is_a_median_with_its_worst_case_explained(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    records = [
        _rec("m-1", suite="moe", sqnr_db=-11.0),
        _rec("m-2", suite="moe", sqnr_db=12.0),
        _rec("m-3", suite="moe", sqnr_db=14.0),
        _rec("m-4", suite="linear", sqnr_db=25.0),
    ]
    write_results(path, records, exitstatus=0)
    text = render_report(path)
    moe = text[text.index("## MoE SQNR") :]
    assert "12.00" in moe.split("## Largest")[0] or "12.0" in moe
    assert "-11" not in moe.split("## Largest")[0]
    assert "nearly cancel" in moe
    assert "## Linear SQNR per scheme and path" in text
