"""Cost of the nightly report as history grows (pytest-benchmark; timings, not unit tests).

    python -m pytest benchmarks/test_bench_report.py --benchmark-only

- a report over a 60-run history (about 2,800 tests per run, the suite's size): target
  well under 10 s, including the Parquet reads, the matrix, regressions and the plots;
- the regression comparison of two 200,000-record runs: one merge, linear in the records;
- one night of a 10,000-runner fleet (`report RUN...` with 10,000 run directories): each
  results file is read once and folded into its aggregates (`harness.report.model.digest`), so
  the cost is the parsing and the memory does not grow with the records. Target: under
  10 s and under 400 MB peak for 10,000 runners; a night of 1,000,000 records (10,000
  runners of 100) well under 1 GB. The peak is the `report` command's own, measured in a
  child process (`os.wait4`); numbers before and after: the Cost section of
  docs/HISTORY.md;
- the same night with `--html`: runners drawn in groups (`harness.report.model.fleet_groups`),
  targets under a minute and under 1 GB for 10,000 runners.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.report.model.nightly import build_report
from harness.report.model.regress import find_regressions
from harness.report.outputs.html_page import render_html
from harness.report.reading.frame import records_frame
from harness.report.reading.results import SCHEMA
from harness.report.reading.runs import open_history

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
PEAK_LIMIT = 1 << 30  # the report command's peak resident memory, bytes: "well under 1 GB"


@pytest.fixture(scope="module")
def fleet_runners(request: pytest.FixtureRequest) -> int:
    disabled = bool(request.config.getoption("benchmark_disable", False))
    return FLEET_RUNNERS_SMOKE if disabled else FLEET_RUNNERS


def _fleet(root: Path, runners: int, per_runner: int) -> list[Path]:
    """One night of a fleet: one run directory per runner (label), each with
    ``per_runner`` records across schemes and both paths, one failing and some skipped."""
    base = (_records() * (per_runner // len(_records()) + 1))[:per_runner]
    base = [r | {"nodeid": f"{r['nodeid']}#{i}"} for i, r in enumerate(base)]
    runs = []
    for runner in range(runners):
        records = [
            r | {"outcome": "failed", "reason": "mismatch"} if i == runner % per_runner else r
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


@pytest.fixture(scope="module")
def fleet_night(tmp_path_factory: pytest.TempPathFactory, fleet_runners: int) -> list[Path]:
    """10,000 runners (when benchmarking) of `FLEET_RECORDS` records."""
    return _fleet(tmp_path_factory.mktemp("fleet"), fleet_runners, FLEET_RECORDS)


def test_fleet_report_of_ten_thousand_runners(
    benchmark: Any, fleet_night: list[Path], fleet_runners: int
) -> None:
    """Target: under 10 s for 10,000 runners (the per-platform pandas code had not finished
    in 30 minutes; the one-frame code took minutes and 1.6 GB)."""
    from harness.report.outputs.markdown import full_markdown

    def report() -> str:
        return full_markdown(build_report(fleet_night))

    text = benchmark.pedantic(report, rounds=1, iterations=1)
    assert f"## Failures ({fleet_runners})" in text


# Runs the command as its own child and prints that child's peak RSS. On Linux a child's
# ru_maxrss starts at its parent's RSS when it forked (exec keeps the old address space's
# high-water mark), so the command must be forked from this small process, not from the
# benchmark session, which by then may hold a gigabyte of its own.
_PEAK_OF_CHILD = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n"
)


def _report_command(runs: list[Path], out: Path, *extra: str) -> int:
    """`python -m harness report RUN... --out OUT [EXTRA...]`, forked from a small helper
    process: its peak resident memory in bytes (Linux reports ru_maxrss in KiB)."""
    command = [
        sys.executable,
        "-m",
        "harness",
        "report",
        *map(str, runs),
        "--out",
        str(out),
        *extra,
    ]
    measured = subprocess.run(
        [sys.executable, "-c", _PEAK_OF_CHILD, *command],
        capture_output=True,
        text=True,
        check=True,
    )
    code, max_rss_kib = (int(v) for v in measured.stdout.split())
    assert code == 0, f"report exited {code}"
    return max_rss_kib * 1024


@pytest.mark.parametrize("per_runner", [50, 100], ids=["500k-records", "1M-records"])
def test_fleet_report_command_peak_memory(
    benchmark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    fleet_runners: int,
    per_runner: int,
) -> None:
    """The whole command over 10,000 runners (500,000 and 1,000,000 records): targets under
    10 s and 400 MB for 500,000 records, and well under 1 GB (`PEAK_LIMIT`) for a million.
    The one-frame code took 2 min and 1.6 GB for 500,000 records, 3.7 min and 2.9 GB for a
    million (20,000 runners of 50)."""
    root = tmp_path_factory.mktemp(f"fleet{per_runner}")
    runs = _fleet(root, fleet_runners, per_runner)
    out = root / "report.md"
    peak = benchmark.pedantic(_report_command, args=(runs, out), rounds=1, iterations=1)
    benchmark.extra_info["peak_rss_mib"] = round(peak / 2**20, 1)
    benchmark.extra_info["records"] = fleet_runners * per_runner
    assert peak < PEAK_LIMIT, f"peak {peak / 2**20:.0f} MiB"
    assert f"## Failures ({fleet_runners})" in out.read_text()


def test_fleet_html_report_command(
    benchmark: Any, fleet_night: list[Path], fleet_runners: int, tmp_path: Path
) -> None:
    """`report RUN... --html` over 10,000 runners: targets under a minute and under 1 GB
    (`PEAK_LIMIT`). A subplot, bar and matrix column per runner took 7.5 min and 2.3 GB for
    1,000 runners and passed 13 GB for 10,000; runners are now drawn in groups
    (`harness.report.model.fleet_groups`): 10,000 runners took 14 s and 246 MiB on a shared 2-core
    machine (the Cost section of docs/HISTORY.md)."""
    page = tmp_path / "report.html"
    peak = benchmark.pedantic(
        _report_command,
        args=(fleet_night, tmp_path / "report.md", "--html", str(page)),
        rounds=1,
        iterations=1,
    )
    benchmark.extra_info["peak_rss_mib"] = round(peak / 2**20, 1)
    assert peak < PEAK_LIMIT, f"peak {peak / 2**20:.0f} MiB"
    html = page.read_text()
    assert f"<th>cpu ({fleet_runners} runners)</th>" in html  # one matrix column, not 10,000
    assert html.count("<img ") == 1  # the SQNR plot, one panel
