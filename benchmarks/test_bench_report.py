"""Cost of the nightly report as history grows (pytest-benchmark; timings, not unit tests).

    python -m pytest benchmarks/test_bench_report.py --benchmark-only

- a report over a 60-run history (about 2,800 tests per run, the suite's size): target
  well under 10 s, including the Parquet reads, the matrix, regressions and the plots;
- the regression comparison of two 200,000-record runs: one merge, linear in the records;
- one night of a 10,000-runner fleet (`report RUN...` with 10,000 run directories): linear
  in runners. The per-platform pandas code took 26 s for 100 runners of 50 records, 70 s
  for 300 and had not finished 10,000 in 30 minutes; the one-pass code takes 3.6 s for 300,
  4.6 s for 1,000 and about 28 s for 10,000 (500,000 records, 1.7 GB peak) on a shared
  2-core machine, with identical output. Target: seconds and well under 1 GB (not reached
  yet: see the Cost section of docs/HISTORY.md).
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


FLEET_RUNNERS = 10_000
FLEET_RUNNERS_SMOKE = 200  # with --benchmark-disable (selftest runs each benchmark once)
FLEET_RECORDS = 20


@pytest.fixture(scope="module")
def fleet_runners(request: pytest.FixtureRequest) -> int:
    disabled = bool(request.config.getoption("benchmark_disable", False))
    return FLEET_RUNNERS_SMOKE if disabled else FLEET_RUNNERS


@pytest.fixture(scope="module")
def fleet_night(tmp_path_factory: pytest.TempPathFactory, fleet_runners: int) -> list[Path]:
    """One night of a fleet (10,000 runners when benchmarking): one run directory per
    runner (label), each with a few records across two schemes and both paths, some
    failing and some skipped."""
    root = tmp_path_factory.mktemp("fleet")
    base = _records()[:FLEET_RECORDS]
    runs = []
    for runner in range(fleet_runners):
        records = [
            r | {"outcome": "failed", "reason": "mismatch"} if i == runner % FLEET_RECORDS else r
            for i, r in enumerate(base)
        ]
        doc = _doc(0) | {
            "records": records,
            "runner": {"key": f"cpu@rack{runner:05d}", "label": f"rack{runner:05d}"},
        }
        run = root / f"20261001T0000Z-cpu-{runner:05d}"
        run.mkdir()
        (run / "results.json").write_text(json.dumps(doc))
        runs.append(run)
    return runs


def test_fleet_report_of_ten_thousand_runners(
    benchmark: Any, fleet_night: list[Path], fleet_runners: int
) -> None:
    """Target: seconds, linear in runners (the per-platform pandas code took about 70 s for
    1,000 runners and had not finished 10,000 in 30 minutes)."""
    from harness.report.markdown import full_markdown

    def report() -> str:
        return full_markdown(build_report(fleet_night))

    text = benchmark.pedantic(report, rounds=1, iterations=1)
    assert f"## Failures ({fleet_runners})" in text
