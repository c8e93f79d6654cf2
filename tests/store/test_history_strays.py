"""A stray directory in the history (a copy made by hand, a name no run id can have) is
not a run: it must not stop every later report from loading the history."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from harness.report.reading.frame import COLUMNS, typed
from harness.report.reading.runs import open_history


def _rows(run_id: str) -> pd.DataFrame:
    row = {c: None for c in COLUMNS} | {
        "run_id": run_id,
        "created": "2026-11-01T00:00:00Z",
        "platform": "cpu",
        "partial": False,
        "nodeid": "suites/test_linear.py::test_linear[a]",
        "outcome": "passed",
        "sqnr_db": 31.5,
    }
    return typed(pd.DataFrame([row]))


def test_a_stray_partition_name_is_left_out_not_fatal(tmp_path: Path) -> None:
    history = open_history(tmp_path / "history")
    assert history.add("20261101T0000Z-cpu-ab12", _rows("20261101T0000Z-cpu-ab12"))
    real = tmp_path / "history" / "run=20261101T0000Z-cpu-ab12"
    shutil.copytree(real, tmp_path / "history" / "run=20261101T0000Z-cpu-ab12 (copy)")

    assert history.run_ids() == ["20261101T0000Z-cpu-ab12"]
    loaded = history.load()
    assert loaded["run_id"].tolist() == ["20261101T0000Z-cpu-ab12"]
    assert loaded["sqnr_db"].tolist() == [31.5]
