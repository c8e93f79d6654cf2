"""The report folds each results file into small aggregates (`harness.report.model.digest`) instead
of a frame of every record: the folded report must say what a straightforward aggregation of
every record says, and its size must not grow with the passing tests.

The reference below reads the same runs as one row-per-test frame (`load_run`) and counts
with pandas, group by group: outcome counts, the matrix (the per-group code of
`tests/report/test_report_scale.py`), skips by reason, failures, and the plots' inputs.
Records are random and drop every optional field now and then (``None`` or absent).
"""

from __future__ import annotations

import json
import math
import pickle
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.report.model import digest, nightly
from harness.report.model.digest import digest_run
from harness.report.model.identity import keyed_by_runner
from harness.report.model.nightly import build_report
from harness.report.model.regress import BAD
from harness.report.outputs.markdown import full_markdown
from harness.report.reading.frame import typed
from harness.report.reading.results import SCHEMA, results_problem
from harness.report.reading.runs import load_run
from harness.report.reading.stream import stream_results
from tests.hang_guard import HANG_GUARD_S
from tests.report.test_report_scale import _ref_matrix

OUTCOMES = ["passed"] * 5 + ["failed", "error", "xfailed", "xpassed", "skipped", "skipped"]
SUITES = ["linear", "moe", "memory", "quantize", None]
SCHEMES = ["fp8_a", "mxfp4_b", "w8 <b>", None]
PATHS = ["emulated", "native", "vllm_x", None]
REASONS = ["no kernel", "no fp8", "line\nbreak | <i>", None]


def _maybe(rng: random.Random, record: dict[str, Any], name: str, value: Any) -> None:
    """Set ``name`` to ``value``, to None, or leave it out."""
    roll = rng.random()
    if roll < 0.7:
        record[name] = value
    elif roll < 0.85:
        record[name] = None


def _record(rng: random.Random, i: int) -> dict[str, Any]:
    outcome = rng.choice(OUTCOMES)
    record: dict[str, Any] = {"nodeid": f"suites/test_x.py::t[{i}]", "outcome": outcome}
    for name, values in (("suite", SUITES), ("scheme", SCHEMES), ("path", PATHS)):
        _maybe(rng, record, name, rng.choice(values))
    _maybe(rng, record, "reason", rng.choice(REASONS))
    _maybe(rng, record, "duration_s", rng.choice([0.01, 2]))
    metrics: dict[str, Any] = {}
    for name, value in (
        ("sqnr_db", rng.choice([rng.uniform(10, 40), 25.0, math.inf, math.nan])),
        ("peak_bytes", rng.choice([rng.randint(1, 10**6), 4096])),
        ("worst_error_to_bound", rng.uniform(0, 1)),
        ("kernel", rng.choice(["emulated", "native"])),
    ):
        _maybe(rng, metrics, name, value)
    _maybe(rng, record, "metrics", metrics)
    return record


def _run(root: Path, rng: random.Random, index: int) -> Path:
    records = [_record(rng, i) for i in range(rng.randint(0, 60))]
    label = rng.choice([None, f"rack{index % 3}"])
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "created": f"2026-11-0{1 + index % 3}T00:00:00Z",
        "exitstatus": 1,
        "platform": {"device": "cuda", "arch": rng.choice(["sm_90", "sm_100"]),
                     "name": "gpu", "torch_version": "2.13"},
        "records": records,
    }  # fmt: skip
    if label is not None or rng.random() < 0.5:
        doc["runner"] = {"key": "k", "label": label, "host": rng.choice(["aa", "bb", None])}
    assert results_problem(doc) is None
    run = root / f"2026110{1 + index % 3}T0000Z-run{index:03d}"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(doc))
    if rng.random() < 0.3:
        benches = [
            {"fullname": f"benchmarks/b.py::b{j}", "params": {"scheme_name": rng.choice(SCHEMES)},
             "stats": {"mean": rng.uniform(1e-3, 2e-3), "stddev": rng.choice([1e-5, None])}}
            for j in range(3)
        ]  # fmt: skip
        (run / "benchmark.json").write_text(json.dumps({"benchmarks": benches}))
    return run


def _reference(runs: list[Path]) -> dict[str, Any]:
    """Every output of the folded report, from one frame of every record of the newest run
    of each runner, counted group by group with pandas."""
    loaded = [load_run(r) for r in runs]
    current: dict[str, Any] = {}
    for run in sorted(loaded, key=lambda r: (r.created, r.run_id)):
        current[run.platform] = run
    frame = keyed_by_runner(typed(pd.concat([typed(r.frame) for r in current.values()])))
    tests = frame[frame["suite"] != "benchmark"]
    counts = {
        p: {
            str(k): int(v)
            for k, v in tests[tests["platform"] == p]["outcome"].value_counts().items()
        }
        for p in current
    }
    skipped = frame[frame["outcome"] == "skipped"]
    skips = (
        skipped.groupby(["platform", "reason"], dropna=False)
        .size()
        .reset_index(name="count")
        .sort_values(["platform", "count"], ascending=[True, False], kind="stable")
    )
    failing = frame[frame["outcome"].isin(BAD)]
    linear = frame[(frame["suite"] == "linear") & frame["sqnr_db"].notna()]
    memory = frame[
        frame["peak_bytes"].notna() & frame["scheme"].notna() & (frame["suite"] == "memory")
    ]
    return {
        "counts": counts,
        "matrix": _ref_matrix(frame),
        "skips": [
            (str(p), None if pd.isna(r) else str(r), int(n))
            for p, r, n in skips.itertuples(index=False)
        ],
        "failures": [
            (str(p), str(n), str(o), None if pd.isna(r) else str(r))
            for p, n, o, r in failing[["platform", "nodeid", "outcome", "reason"]].itertuples(
                index=False
            )
        ],
        "sqnr": linear.groupby(["platform", "scheme", "run_id"])["sqnr_db"].median().to_dict(),
        "peaks": memory.groupby(["scheme", "platform"])["peak_bytes"].max().to_dict(),
        "benchmarks": sorted(
            (str(p), str(n), float(m))
            for p, n, m in frame[frame["bench_mean_s"].notna()][
                ["platform", "nodeid", "bench_mean_s"]
            ].itertuples(index=False)
        ),
    }


@pytest.mark.parametrize("seed", range(6))
def test_folded_report_agrees_with_every_record_counted(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    runs = [_run(tmp_path, rng, i) for i in range(rng.randint(1, 9))]
    report = build_report(runs)
    ref = _reference(runs)

    assert {p: {str(k): v for k, v in r.outcomes.items()} for p, r in report.runs.items()} == {
        p: c for p, c in ref["counts"].items()
    }
    assert report.matrix == ref["matrix"]
    assert [(s.platform, s.reason, s.count) for s in report.skips] == ref["skips"]
    assert [(f.platform, f.nodeid, f.outcome, f.reason) for f in report.failures] == ref["failures"]
    sqnr = {
        (p, s, r): v
        for p, s, r, v in report.sqnr[["platform", "scheme", "run_id", "sqnr_db"]].itertuples(
            index=False
        )
        if r in {run.run_id for run in report.runs.values()} and not pd.isna(s)
    }
    assert sqnr.keys() == ref["sqnr"].keys()
    for key, value in ref["sqnr"].items():  # NaN never reaches the plot; inf is a median
        assert value == sqnr[key] or (math.isnan(value) and math.isnan(sqnr[key])), key
    peaks = report.peaks.groupby(["scheme", "platform"])["peak_bytes"].max().to_dict()
    assert peaks == ref["peaks"]
    reported = {run.run_id for run in report.runs.values()}
    benchmarks = sorted(
        (str(p), str(n), float(m))
        for p, n, m, r in report.benchmarks[
            ["platform", "nodeid", "bench_mean_s", "run_id"]
        ].itertuples(index=False)
        if r in reported
    )
    assert benchmarks == ref["benchmarks"]
    # optional fields missing never reach a renderer as NA or NaN
    text = full_markdown(report)
    assert "<NA>" not in text
    assert "nan" not in text.split("## Failures")[1]  # regressions may say NaN: SQNR is news
    for failure in report.failures:
        assert failure.reason is None or isinstance(failure.reason, str)


def _passing_run(root: Path, count: int) -> Path:
    records = [
        {"nodeid": f"suites/test_linear.py::t[{i}]", "suite": "linear", "scheme": "fp8",
         "path": "emulated", "outcome": "passed", "reason": None,
         "metrics": {"sqnr_db": 30.0 + i % 7, "peak_bytes": 4096}}
        for i in range(count)
    ] + [{"nodeid": "suites/test_linear.py::bad", "suite": "linear", "scheme": "fp8",
          "path": "emulated", "outcome": "failed", "reason": "boom"}]  # fmt: skip
    doc = {"schema": SCHEMA, "created": "2026-11-01T00:00:00Z", "exitstatus": 1,
           "platform": {"device": "cpu", "arch": "x86_64", "name": "cpu",
                        "torch_version": "2.13"}, "records": records}  # fmt: skip
    run = root / f"20261101T0000Z-{count}"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(doc))
    return run


def test_a_digest_does_not_grow_with_passing_tests(tmp_path: Path) -> None:
    """A run of 10 and a run of 5,000 passing tests fold to the same aggregates, apart from
    the numbers in them: nothing per passing record is kept."""
    small, large = digest_run(_passing_run(tmp_path, 10)), digest_run(_passing_run(tmp_path, 5000))
    assert small.outcomes["passed"] == 10
    assert large.outcomes["passed"] == 5000
    assert len(large.failures) == len(small.failures) == 1
    size = {d.run_id: len(pickle.dumps(d)) for d in (small, large)}
    assert abs(size[large.run_id] - size[small.run_id]) < 64, size


def test_a_first_night_fleet_reads_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runners with nothing to compare with are reported from their digests alone: no file
    is read again as a frame of its records."""
    runs = []
    for i in range(5):  # five runners, one key each
        (tmp_path / f"r{i}").mkdir()
        run = _passing_run(tmp_path / f"r{i}", 20)
        runs.append(run)
        doc = json.loads((run / "results.json").read_text())
        doc["runner"] = {"key": "k", "label": f"rack{i}"}
        (run / "results.json").write_text(json.dumps(doc))

    def no_frames(run: Path) -> Any:
        raise AssertionError(f"{run} read again as a frame")

    read: list[Path] = []

    def counted(path: Path, each: Any) -> Any:
        read.append(path)
        return stream_results(path, each)

    def whole(path: Path) -> Any:
        raise AssertionError(f"{path} read whole")

    monkeypatch.setattr(nightly, "load_run", no_frames)
    monkeypatch.setattr(digest, "stream_results", counted)
    monkeypatch.setattr(digest, "read_results", whole)
    report = build_report(runs)
    assert sorted(read) == sorted(run / "results.json" for run in runs)
    assert len(report.platforms) == 5
    assert len(report.failures) == 5
    assert all(f.is_new for f in report.failures)


def test_the_report_loads_no_torch() -> None:
    """A fleet report reads JSON and counts: torch (hundreds of MB and seconds to import)
    stays out of the process."""
    code = (
        "import sys\n"
        "import harness.cli\n"
        "from harness.report.model import nightly\n"
        "from harness.report.outputs import annotations, csp, html_page, markdown, text\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HANG_GUARD_S)
