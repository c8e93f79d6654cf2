"""Cost of the nightly report as history grows (pytest-benchmark; timings, not unit tests).

    python -m pytest benchmarks/test_bench_report.py --benchmark-only

- a report over a 60-run history (about 2,800 tests per run, the suite's size): target
  well under 10 s, including the Parquet reads, the matrix, regressions and the plots;
- the regression comparison of two 200,000-record runs: one merge, linear in the records.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.report.frame import records_frame
from harness.report.html_page import render_html
from harness.report.nightly import build_report
from harness.report.regress import find_regressions
from harness.report.results import SCHEMA
from harness.report.runs import open_history

RUNS = 60
SCHEMES = [f"scheme_{i:02d}" for i in range(24)]
PATHS = ("emulated", "native")
SHAPES = [f"{m}x{n}x256" for m in (1, 16, 32) for n in (16, 64, 128, 256)]
VARIANTS = [f"{b}-{d}" for b in ("bias", "nobias") for d in ("bf16", "fp16", "f32")]


def _records(count_per_cell: int = 1, night: int = 0) -> list[dict[str, Any]]:
    records = []
    for s, scheme in enumerate(SCHEMES):
        for path in PATHS:
            for shape in SHAPES:
                for variant in VARIANTS[: 6 * count_per_cell]:
                    skipped = path == "native" and s % 5 == 0
                    records.append(
                        {
                            "nodeid": f"suites/test_linear.py::test_linear[{scheme}-{path}-"
                            f"{shape}-{variant}]",
                            "suite": "linear",
                            "scheme": scheme,
                            "path": path,
                            "shape": shape,
                            "outcome": "skipped" if skipped else "passed",
                            "reason": "no kernel for this scheme" if skipped else None,
                            "duration_s": 0.01,
                            "metrics": {}
                            if skipped
                            else {
                                "sqnr_db": 20.0 + s + 0.01 * math.sin(night),
                                "worst_error_to_bound": 0.3,
                                "peak_bytes": 40_000 + 100 * s,
                            },
                        }
                    )
    return records


def _doc(night: int) -> dict[str, Any]:
    records = _records(night=night)
    return {
        "schema": SCHEMA,
        "created": f"2026-10-{1 + night // 24:02d}T{night % 24:02d}:00:00Z",
        "exitstatus": 0,
        "partial": False,
        "platform": {"device": "cpu", "arch": "x86_64", "name": "cpu", "torch_version": "2.13"},
        "capabilities": {},
        "versions": {"qharness": "0.1.0", "torch": "2.13"},
        "summary": {"total": len(records), "outcomes": {}, "skip_reasons": {}},
        "records": records,
    }


@pytest.fixture(scope="module")
def sixty_nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("history")
    history = open_history(root / "history")
    for night in range(RUNS - 1):
        doc = _doc(night)
        history.add(f"night{night:03d}", records_frame(doc, f"night{night:03d}"))
    latest = root / f"night{RUNS - 1:03d}" / "results.json"
    latest.parent.mkdir()
    latest.write_text(json.dumps(_doc(RUNS - 1)))
    history.add(latest.parent.name, records_frame(_doc(RUNS - 1), latest.parent.name))
    return root / "history", latest


def test_report_over_sixty_runs(benchmark: Any, sixty_nights: tuple[Path, Path]) -> None:
    history_dir, latest = sixty_nights

    def report() -> str:
        nightly = build_report([latest], open_history(history_dir))
        return render_html(nightly, latest.parent / "report.html")

    page = benchmark.pedantic(report, rounds=1, iterations=1)
    assert "Matrix" in page


def test_regression_comparison_is_linear(benchmark: Any) -> None:
    """200k records per run: one merge; the old quadratic comparison took about a minute."""
    base = _records()
    copies = 200_000 // len(base) + 1
    records = [{**r, "nodeid": f"{r['nodeid']}#{i}"} for i in range(copies) for r in base][:200_000]
    doc = _doc(0) | {"records": records}
    old = records_frame(doc, "old")
    new = records_frame(doc | {"created": "2026-12-01T00:00:00Z"}, "new")
    new.loc[new.index[:10], "outcome"] = "failed"
    found = benchmark.pedantic(find_regressions, args=(new, old), rounds=1, iterations=1)
    assert len(found) == sum(1 for r in records[:10] if r["outcome"] == "passed")
