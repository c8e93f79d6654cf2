"""A simulated fleet night: two ROCm runners of one architecture with different labels and a
CUDA runner, one night of history each, and a regression on one ROCm runner the next night.
The report must give three columns, each compared with its own previous night, name the
regression under the right runner (summary, HTML, annotations) and exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli
from tests.fleet.night import record, results_doc, write_run

RUNNERS = (("gfx942", "mi300x-rack1", "aaaa"), ("gfx942", "mi300x-rack2", "bbbb"),
           ("sm_90", "h100-a", "cccc"))  # fmt: skip
CASES = [("fp8_per_tensor", "native"), ("fp8_per_tensor", "emulated"),
         ("w_mxfp4", "native"), ("w_mxfp4", "emulated")]  # fmt: skip


def _night(root: Path, day: int, broken: str | None) -> list[Path]:
    runs = []
    for arch, label, host in RUNNERS:
        records = []
        for scheme, path in CASES:
            bad = broken == label and (scheme, path) == ("w_mxfp4", "native")
            records.append(record(scheme, path, "failed" if bad else "passed"))
        doc = results_doc(arch, f"2026-12-0{day}T03:00:00Z", records, label=label, host=host)
        runs.append(write_run(root / label, f"2026120{day}T0300Z-{arch}-{host}", doc))
    return runs


def test_fleet_night(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = str(tmp_path / "history")
    assert (
        cli.main(["history", "add", *map(str, _night(tmp_path, 1, None)), "--history", history])
        == 0
    )
    tonight = _night(tmp_path, 2, broken="mi300x-rack2")
    html, summary = tmp_path / "fleet.html", tmp_path / "fleet.md"
    capsys.readouterr()
    status = cli.main(
        ["report", *map(str, tonight), "--history", history, "--html", str(html),
         "--summary", str(summary), "--fail-on-regression", "--github-annotations"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 1
    assert "1 regression(s)" in err
    text = summary.read_text()
    for key, run in (("gfx942@mi300x-rack1", "20261201T0300Z-gfx942-aaaa"),
                     ("gfx942@mi300x-rack2", "20261201T0300Z-gfx942-bbbb"),
                     ("sm\\_90@h100-a", "20261201T0300Z-sm\\_90-cccc")):  # fmt: skip
        assert f"| {key} |" in text
        assert run in text  # its own baseline
    assert "### Regressions (1)" in text
    assert "| gfx942@mi300x-rack2 | w\\_mxfp4 | native | 1 | pass -> fail 1 |" in text
    assert "### Warnings" not in text  # labelled runners: no shared key, each has a baseline
    assert str(tmp_path) not in text
    page = html.read_text()
    for key in ("gfx942@mi300x-rack1", "gfx942@mi300x-rack2", "sm_90@h100-a"):
        assert f"<th>{key}</th>" in page
    assert page.count('class="cell fail"') == 1
    annotations = [ln for ln in out.splitlines() if ln.startswith("::error")]
    assert len(annotations) == 2  # the regression, and the same test as a new failure
    assert all("gfx942@mi300x-rack2 w_mxfp4 native" in a for a in annotations)
