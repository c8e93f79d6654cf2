"""The nightly workflow end to end: real runs, a doctored one and two other platforms give
one merged report whose regressions are exactly the doctored ones.

Two small real `harness run`s (a `-k` subset) go into a history together with a copy of the
second run that was doctored three ways (SQNR made worse, a pass turned into a failure, a
native case turned into a fallback); results for two GPU platforms are made from the real
run with the platform fields changed. The report over the doctored run and the two GPU runs
must show a 3-platform matrix, exactly three regressions, and exit 1 under
``--fail-on-regression``.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.report.model.nightly import build_report
from harness.report.reading.runs import open_history
from tests.hang_guard import HANG_GUARD_S

# The suites' linear cases of one shape, and (with --bench) the same scheme's benchmarks.
SUBSET = "test_linear and fp8_per_tensor and not fnuz and (1x16x256 or forward)"
NATIVE = "suites/test_linear.py::test_linear[fp8_per_tensor-native-1x16x256-bias-bf16]"
EMULATED = "suites/test_linear.py::test_linear[fp8_per_tensor-emulated-1x16x256-bias-bf16]"
OTHER_NATIVE = "suites/test_linear.py::test_linear[fp8_per_tensor-native-1x16x256-nobias-fp16]"
GPU_PLATFORMS = {
    "gfx942": {"device": "rocm", "arch": "gfx942", "name": "AMD Instinct MI300X",
               "hip_version": "6.4", "fp8_format": "e4m3fnuz", "fp8_dtype": "float8_e4m3fnuz",
               "is_cuda_alike": True},
    "sm_90": {"device": "cuda", "arch": "sm_90", "name": "NVIDIA H100", "cuda_version": "12.8",
              "is_cuda_alike": True},
}  # fmt: skip


def _records(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["nodeid"]: r for r in doc["records"]}


def _later(created: str, minutes: int) -> str:
    moment = _dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ") + _dt.timedelta(minutes=minutes)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _copy_run(source: Path, reports: Path, run_id: str, edit: Any) -> Path:
    target = reports / run_id
    shutil.copytree(source, target)
    doc = json.loads((target / "results.json").read_text())
    edit(doc)
    (target / "results.json").write_text(json.dumps(doc))
    return target


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:

    reports = tmp_path_factory.mktemp("fleet") / "reports"
    runs = []
    for extra in (["--bench"], ["--out", "copy/results.json"]):
        cmd = [sys.executable, "-m", "harness", "run", "--reports-dir", str(reports), *extra]
        done = subprocess.run(
            [*cmd, "--workers", "0", "--", "-k", SUBSET],
            cwd=reports.parent,  # relative paths are the caller's
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        runs.append((reports / "latest").resolve())
    first, second = runs
    assert first != second
    assert json.loads((first / "benchmark.json").read_text())["benchmarks"]
    copy = reports.parent / "copy" / "results.json"
    assert copy.read_bytes() == (second / "results.json").read_bytes()

    def doctor(doc: dict[str, Any]) -> None:
        doc["created"] = _later(doc["created"], 60)
        records = _records(doc)
        records[EMULATED]["metrics"]["sqnr_db"] -= 5.0
        records[OTHER_NATIVE].update(outcome="failed", reason="bias dropped\n## Regressions (0)")
        records[NATIVE].update(outcome="skipped", reason="<script>alert(1)</script> no kernel")
        records[NATIVE]["metrics"] = {}

    doctored = _copy_run(second, reports, "29990101T0300Z-cpu-dddd", doctor)
    gpus = []
    for key, fields in GPU_PLATFORMS.items():

        def move(doc: dict[str, Any], fields: dict[str, Any] = fields) -> None:
            doc["platform"].update(fields)

        gpus.append(_copy_run(first, reports, f"29990101T0300Z-{key}-eeee", move))
    return {"reports": reports, "runs": runs, "doctored": doctored, "gpus": gpus}


def test_history_add_is_idempotent_and_skips_bad_runs(
    fleet: dict[str, Any], tmp_path: Path
) -> None:
    from tests.conftest import run_cli

    history = tmp_path / "history"
    bad = tmp_path / "broken.json"
    bad.write_text("{ not json")
    partial = tmp_path / "partial" / "results.json"
    partial.parent.mkdir()
    doc = json.loads((fleet["runs"][0] / "results.json").read_text())
    partial.write_text(json.dumps({**doc, "partial": True}))
    runs = [*map(str, fleet["runs"]), str(fleet["doctored"])]
    first = run_cli("history", "add", *runs, "--history", str(history))
    assert first.returncode == 0, first.stderr
    again = run_cli("history", "add", runs[0], str(bad), str(partial), "--history", str(history))
    assert again.returncode == 0, again.stderr
    assert "already present" in again.stdout
    assert "broken.json: skipped" in again.stderr
    assert "partial run" in again.stderr
    assert "Traceback" not in again.stderr
    assert open_history(history).run_ids() == sorted(Path(r).name for r in runs)


def test_report_flags_exactly_the_doctored_regressions(
    fleet: dict[str, Any], tmp_path: Path
) -> None:
    from tests.conftest import run_cli

    history = tmp_path / "history"
    added = run_cli(
        "history",
        "add",
        *map(str, fleet["runs"]),
        str(fleet["doctored"]),
        "--history",
        str(history),
    )
    assert added.returncode == 0, added.stderr
    current = [fleet["doctored"], *fleet["gpus"]]
    report = build_report(current, open_history(history))
    assert report.platforms == ["cpu", "gfx942", "sm_90"]
    assert report.baselines["cpu"] == fleet["runs"][1].name
    found = {(r.nodeid, r.kind) for r in report.regressions}
    assert found == {
        (EMULATED, "SQNR down"),
        (OTHER_NATIVE, "pass -> fail"),
        (NATIVE, "native -> emulated fallback"),
    }
    assert all(r.first_run == fleet["doctored"].name for r in report.regressions)
    cells = report.matrix[("fp8_per_tensor", "native")]
    assert cells["cpu"].verdict == "fail"
    assert cells["gfx942"].verdict == "pass"
    assert cells["sm_90"].verdict == "pass"

    html, summary = tmp_path / "report.html", tmp_path / "summary.md"
    args = [*map(str, current), "--history", str(history), "--html", str(html)]
    done = run_cli("report", *args, "--summary", str(summary), "--fail-on-regression")
    assert done.returncode == 1, done.stderr
    page = html.read_text()
    # SQNR and benchmarks; no peak-memory plot: it shows the memory suite's forward-call peaks,
    # and this subset runs only linear cases
    assert page.count("data:image/png;base64,") == 2
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    text = summary.read_text()
    assert "### Regressions (3)" in text
    assert "\n## Regressions (0)" not in text  # a reason cannot forge a section
    assert len(text) < 10_000
    ok = run_cli(
        "report", *map(str, fleet["gpus"]), "--history", str(history), "--fail-on-regression"
    )
    assert ok.returncode == 0, ok.stderr


def test_run_refuses_to_write_its_own_latest_json(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    reports = tmp_path / "reports"
    done = run_cli("run", "--reports-dir", str(reports), "--out", str(reports / "latest.json"))
    assert done.returncode == 2
    assert "keeps" in done.stderr
    assert not (reports / "latest.json").exists()


def test_report_refuses_to_overwrite_a_results_file(fleet: dict[str, Any]) -> None:
    from tests.conftest import run_cli

    results = fleet["runs"][0] / "results.json"
    before = results.read_bytes()
    done = run_cli("report", "--results", str(results), "--out", str(results))
    assert done.returncode == 2
    assert "refusing" in done.stderr
    assert results.read_bytes() == before
