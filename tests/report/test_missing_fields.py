"""Optional fields left out or null never reach a renderer as pandas' NA or NaN.

A results record needs only ``nodeid`` and ``outcome``; every other field (reason, suite,
scheme, path, shape, duration, metrics) may be null or absent, and a failure may or may not
have a repro bundle. The whole report pipeline of a run (summary.md, report.html, the text
report `run` prints, the ``latest`` pointer) and of `report` (Markdown, HTML, summary) must
render such records, with no ``nan``, ``<NA>`` or ``None`` in what it writes.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

from harness.cli import finish_run
from harness.report.reading.results import OUTCOMES, SCHEMA
from harness.report.reading.rundir import RunDir, create_run_dir, resolve_latest
from harness.store.repro import bundle_filename
from tests.conftest import run_cli

MISSING_MARKERS = re.compile(r"\b(nan|NaN|<NA>|None|NaT)\b")
OPTIONAL = ("suite", "scheme", "path", "shape", "reason", "duration_s", "metrics")


def _records() -> list[dict[str, Any]]:
    """Every outcome twice: once with each optional field absent, once with it null."""
    records = []
    for outcome in OUTCOMES:
        records.append({"nodeid": f"suites/test_x.py::test_absent[{outcome}]", "outcome": outcome})
        records.append(
            {
                "nodeid": f"suites/test_x.py::test_null[{outcome}]",
                "outcome": outcome,
                **dict.fromkeys(OPTIONAL),
            }
        )
    return records


def _write_run(reports: Path, run_id: str, created: str) -> RunDir:
    run = create_run_dir(reports, run_id)
    doc = {
        "schema": SCHEMA,
        "created": created,
        "exitstatus": 1,
        "platform": {"device": "cpu", "arch": "x86_64", "name": "x86_64", "torch_version": "2"},
        "records": _records(),
    }
    run.results.write_text(json.dumps(doc))
    # one failure has a repro bundle, the others have none
    run.repro.mkdir()
    (run.repro / bundle_filename("suites/test_x.py::test_null[failed]")).write_bytes(b"x")
    return run


def _assert_clean(text: str, where: str) -> None:
    found = MISSING_MARKERS.search(text)
    assert found is None, f"{where}: {found[0]!r} near {text[max(0, found.start() - 80) :][:160]!r}"


def test_run_pipeline_renders_records_with_every_optional_field_missing(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    older = _write_run(reports, "20261130T0300Z-cpu-aaaa", "2026-11-30T03:00:00Z")
    run = _write_run(reports, "20261201T0300Z-cpu-aaaa", "2026-12-01T03:00:00Z")

    printed = finish_run(run, reports, out=None)  # what `run` does once pytest has finished

    assert resolve_latest(reports) == run
    assert (reports / "latest.json").read_bytes() == run.results.read_bytes()
    summary, page = run.summary.read_text(), run.html.read_text()
    _assert_clean(summary, "summary.md")
    _assert_clean(page, "report.html")
    _assert_clean(printed, "text report")
    assert "no bundle" in page
    assert bundle_filename("suites/test_x.py::test_null[failed]") in page
    # Markdown-escaped node ids of the new failures
    assert r"test\_absent\[failed\]" in summary
    assert r"test\_null\[error\]" in summary

    # `report` over both runs (history of one platform), every output at once
    out, html, short = tmp_path / "r.md", tmp_path / "r.html", tmp_path / "s.md"
    done = run_cli(
        "report", str(older.path), str(run.path),
        "--out", str(out), "--html", str(html), "--summary", str(short),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for path in (out, html, short):
        _assert_clean(path.read_text(), path.name)
    assert "(no reason given)" in out.read_text()  # the skips without a reason are counted
    assert "failing since 20261130T0300Z-cpu-aaaa" in out.read_text()


def test_run_with_a_known_finding_on_a_raising_path_writes_its_report(tmp_path: Path) -> None:
    """The reported case: a path's ``known_findings`` covers a case its forward raises on,
    so the run's records are xfails with ``reason: null``."""
    (tmp_path / "vendor_kf.py").write_text(
        textwrap.dedent(
            """
            from harness.linear.paths.emulated import EmulatedPath

            class KnownFindingPath(EmulatedPath):
                name = "vendor_kf"
                known_findings = {"*": "this kernel raises on every case"}

                def forward(self, layer, x, out_dtype):
                    raise RuntimeError("kernel launch failed")
            """
        )
    )
    dist = tmp_path / "vendor_kf-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-kf\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[qharness.paths]\nvendor_kf = vendor_kf:KnownFindingPath\n"
    )
    reports = tmp_path / "reports"
    done = run_cli(
        "run", "--reports-dir", str(reports), "--workers", "0",
        "-k", "test_linear and vendor_kf and fp8_per_tensor and not fnuz and 1x16x256",
        env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    latest = resolve_latest(reports)
    assert latest is not None
    assert latest.summary.is_file()
    assert latest.html.is_file()
    doc = json.loads(latest.results.read_text())
    # (a suite module skipped at collection, e.g. the model suite without vLLM, is counted too)
    assert {r["outcome"] for r in doc["records"] if "vendor_kf" in r["nodeid"]} == {"xfailed"}
    _assert_clean(latest.summary.read_text(), "summary.md")
    assert "internal error" not in done.stderr
