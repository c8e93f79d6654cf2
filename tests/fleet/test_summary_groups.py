"""summary.md groups regressions and failures by platform, scheme and path before tests, so
no platform's regressions vanish behind a cut list, and shows no absolute runner paths."""

from __future__ import annotations

import re
from pathlib import Path

from harness.report.model.nightly import build_report
from harness.report.outputs.markdown import summary_markdown
from harness.report.reading.runs import add_runs, open_history
from harness.store.repro import bundle_filename
from tests.fleet.night import record, results_doc, write_run


def _records(broken: set[str], count: int) -> list[dict[str, object]]:
    records = []
    for scheme in ("fp8_per_tensor", "w_mxfp4", "mxfp8"):
        for i in range(count):
            r = record(scheme, "native", "failed" if scheme in broken else "passed")
            r["nodeid"] = r["nodeid"].replace("1x16x256", f"{i}x16x256")
            records.append(r)
    return records


def test_every_platform_scheme_and_path_is_counted_before_tests(tmp_path: Path) -> None:
    history = open_history(tmp_path / "history")
    old = [
        write_run(tmp_path / "old", "20261201T0300Z-gfx942-a1b2",
                  results_doc("gfx942", "2026-12-01T03:00:00Z", _records(set(), 30))),
        write_run(tmp_path / "old", "20261201T0300Z-sm_90-c3d4",
                  results_doc("sm_90", "2026-12-01T03:00:00Z", _records(set(), 30))),
    ]  # fmt: skip
    add_runs(history, old)
    gfx = write_run(tmp_path / "runner", "20261202T0300Z-gfx942-a1b2",
                    results_doc("gfx942", "2026-12-02T03:00:00Z",
                                _records({"fp8_per_tensor", "w_mxfp4"}, 30)))  # fmt: skip
    cuda = write_run(
        tmp_path / "runner",
        "20261202T0300Z-sm_90-c3d4",
        results_doc("sm_90", "2026-12-02T03:00:00Z", _records({"mxfp8"}, 30)),
    )
    failing = "suites/test_linear.py::test_linear[mxfp8-native-0x16x256-bf16]"
    (cuda / "repro").mkdir()
    (cuda / "repro" / bundle_filename(failing)).write_bytes(b"x")
    summary = summary_markdown(build_report([gfx, cuda], history))
    assert "### Regressions (90)" in summary
    for row in (  # Markdown escapes _ in names
        "| gfx942 | fp8\\_per\\_tensor | native | 30 | pass -> fail 30 |",
        "| gfx942 | w\\_mxfp4 | native | 30 | pass -> fail 30 |",
        "| sm\\_90 | mxfp8 | native | 30 | pass -> fail 30 |",
    ):
        assert row in summary
    assert "**sm\\_90 · mxfp8 · native** (30)" in summary
    assert "- ... and 25 more in this group" in summary
    assert str(tmp_path) not in summary
    bundle = bundle_filename(failing).replace("_", "\\_")
    assert f"20261202T0300Z-sm\\_90-c3d4/repro/{bundle}" in summary


def _vanished_plugin_night(tmp_path: Path) -> tuple[Path, Path]:
    """Two nights of one runner; the second lacks every test of the `plugin_native` path
    (its plugin was not installed)."""
    both = [
        record(s, p) for s in ("fp8_per_tensor", "mxfp8") for p in ("emulated", "plugin_native")
    ]
    old = write_run(tmp_path, "20261201T0300Z-sm_90-a1b2",
                    results_doc("sm_90", "2026-12-01T03:00:00Z", both))  # fmt: skip
    tonight = [r for r in both if r["path"] != "plugin_native"]
    new = write_run(tmp_path, "20261202T0300Z-sm_90-a1b2",
                    results_doc("sm_90", "2026-12-02T03:00:00Z", tonight))  # fmt: skip
    return old, new


def test_a_vanished_plugins_tests_are_grouped_under_their_scheme_and_path(tmp_path: Path) -> None:
    old, new = _vanished_plugin_night(tmp_path)
    report = build_report([new], baseline=old)
    summary = summary_markdown(report)
    assert "- · -" not in summary
    for scheme in ("fp8\\_per\\_tensor", "mxfp8"):
        assert f"| sm\\_90 | {scheme} | plugin\\_native | 1 | missing 1 |" in summary


def test_the_page_groups_regressions_by_runner_scheme_and_path(tmp_path: Path) -> None:
    from harness.report.outputs.html_page import render_html

    old, new = _vanished_plugin_night(tmp_path)
    page = render_html(build_report([new], baseline=old), tmp_path / "report.html")
    section = page.split("<h2>Regressions (2)</h2>", 1)[1].split("<h2>", 1)[0]
    heads = re.findall(r'<th colspan="6">([^<]*)</th>', section)
    assert heads == [
        "sm_90 · fp8_per_tensor · plugin_native (1)",
        "sm_90 · mxfp8 · plugin_native (1)",
    ]
    assert "<td>sm_90</td><td>mxfp8</td><td>plugin_native</td>" in section
