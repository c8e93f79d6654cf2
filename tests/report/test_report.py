"""Results file and nightly report: regressions against a baseline are found and named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.report.outputs.text import regressions, render_report
from harness.report.reading.results import SCHEMA, ResultsError, read_results, write_results


def _record(
    test: str,
    outcome: str,
    sqnr: float | None = 30.0,
    peak: int | None = 1000,
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "nodeid": f"suites/test_linear.py::test_linear[{test}]",
        "suite": "linear",
        "scheme": test.split("-")[0],
        "path": "native",
        "outcome": outcome,
        "reason": reason,
        "duration_s": 0.01,
        "metrics": {"sqnr_db": sqnr, "peak_bytes": peak},
    }


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    write_results(path, records, exitstatus=0)
    return path


def test_results_file_round_trips_with_schema_and_summary(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "r.json",
        [_record("a-1", "passed"), _record("a-2", "skipped", reason="no kernel")],
    )
    doc = read_results(path)
    assert doc["schema"] == SCHEMA
    assert doc["summary"] == {
        "total": 2,
        "outcomes": {"passed": 1, "skipped": 1},
        "skip_reasons": {"no kernel": 1},
    }
    assert doc["platform"]["device"] == "cpu"


def test_each_kind_of_regression_is_reported(tmp_path: Path) -> None:
    old = _write(
        tmp_path / "old.json",
        [
            _record("s-fail", "passed"),
            _record("s-skip", "passed"),
            _record("s-sqnr", "passed", sqnr=30.0),
            _record("s-peak", "passed", peak=1000),
            _record("s-gone", "passed"),
            _record("s-same", "passed", sqnr=30.0, peak=1000),
        ],
    )
    new = _write(
        tmp_path / "new.json",
        [
            _record("s-fail", "failed", reason="bias dropped"),
            _record("s-skip", "skipped", reason="probe failed"),
            _record("s-sqnr", "passed", sqnr=28.5),
            _record("s-peak", "passed", peak=1100),
            _record("s-same", "passed", sqnr=29.5, peak=1040),  # within 1 dB and 5%
        ],
    )
    found = regressions(new, old)
    joined = "\n".join(found)
    assert len(found) == 5, joined
    assert "s-fail]: passed -> failed: bias dropped" in joined
    assert "s-skip]: passed -> skipped: probe failed" in joined
    assert "s-sqnr]: SQNR 30.00 -> 28.50 dB" in joined
    assert "s-peak]: peak memory 1000 -> 1100 bytes" in joined
    assert "s-gone]: ran in the baseline, missing now" in joined
    assert "s-same" not in joined


def test_report_renders_outcomes_skips_and_regressions(tmp_path: Path) -> None:
    old = _write(tmp_path / "old.json", [_record("x-1", "passed")])
    new = _write(
        tmp_path / "new.json",
        [_record("x-1", "failed", reason="boom"), _record("x-2", "skipped", reason="no op here")],
    )
    text = render_report(new, baseline=old)
    assert "1 x no op here" in text
    assert "boom" in text
    assert "Regressions vs" in text
    assert "passed -> failed" in text


def test_unreadable_results_are_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ResultsError, match="not valid JSON"):
        read_results(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something-else/9"}))
    with pytest.raises(ResultsError, match=r"expected 'qharness\.results/1'"):
        read_results(other)
