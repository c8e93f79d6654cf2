"""No output lets a hostile name or reason through: tags, headings, terminal escapes, bidi.

A results file whose platform, scheme, path, test ids and reasons carry raw HTML, a newline
that would start a heading, terminal escape sequences (colour, OSC 8 hyperlink, bell) and
bidi overrides goes through the whole pipeline of a run (summary.md, report.html, the text
report `run` prints) and of `report` (text report, Markdown, HTML, summary); none of them
may hold any of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import finish_run
from harness.report.model.escape import html_text, md_inline, one_line
from harness.report.reading.results import SCHEMA
from harness.report.reading.rundir import create_run_dir
from tests.conftest import run_cli

HOSTILE = (
    "<script>alert(1)</script><img src=x onerror=alert(2)>"
    "\n# Injected heading\n"
    "\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07link\x1b]8;;\x07 \x07"
    " \u202egnp.exe\u202c \u2066isolate\u2069 zero\u200bwidth"
)
FORBIDDEN = ("<script", "<img src=x", "\x1b", "\x07", "\u202e", "\u202c", "\u2066", "\u200b")


def _doc() -> dict[str, object]:
    records = []
    for i, outcome in enumerate(("failed", "skipped", "passed", "error")):
        records.append(
            {
                "nodeid": f"suites/test_x.py::test_{i}[{HOSTILE}]",
                "suite": "linear",
                "scheme": f"scheme{HOSTILE}",
                "path": f"path{HOSTILE}",
                "outcome": outcome,
                "reason": None if outcome == "passed" else f"reason {HOSTILE}",
                "metrics": {"kernel": HOSTILE, "sqnr_db": 30.0, "peak_bytes": 1000},
            }
        )
    platform = {"device": "cpu", "arch": "x86_64", "name": f"box{HOSTILE}", "torch_version": "2"}
    return {
        "schema": SCHEMA,
        "created": "2026-12-01T03:00:00Z",
        "exitstatus": 1,
        "platform": platform,
        "records": records,
    }


def _assert_inert(text: str, where: str, markdown: bool = True) -> None:
    for bad in FORBIDDEN:
        assert bad not in text, f"{where}: {bad!r} got through"
    if markdown:
        assert "\n# Injected" not in text, f"{where}: a name started a heading"


@pytest.mark.parametrize("escape", [one_line, md_inline, html_text])
def test_every_escaping_function_neutralizes_all_of_it(escape: object) -> None:
    out = escape(HOSTILE)  # type: ignore[operator]
    _assert_inert(out, getattr(escape, "__name__", "?"))
    assert "\n" not in out
    assert "\\u202e" in out  # shown, not dropped: the reader sees something was there


def test_every_output_of_run_and_report_is_inert(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    run = create_run_dir(reports, "20261201T0300Z-cpu-aaaa")
    run.results.write_text(json.dumps(_doc()))

    printed = finish_run(run, reports, out=None)
    _assert_inert(printed, "text report printed by run")
    _assert_inert(run.summary.read_text(), "summary.md")
    _assert_inert(run.html.read_text(), "report.html", markdown=False)

    legacy = run_cli("report", "--results", str(run.results))
    assert legacy.returncode == 0, legacy.stderr
    _assert_inert(legacy.stdout, "report --results")
    out, html, short = tmp_path / "r.md", tmp_path / "r.html", tmp_path / "s.md"
    merged = run_cli(
        "report", str(run.path), "--out", str(out), "--html", str(html), "--summary", str(short)
    )
    assert merged.returncode == 0, merged.stderr
    _assert_inert(out.read_text(), "report --out")
    _assert_inert(short.read_text(), "report --summary")
    _assert_inert(html.read_text(), "report --html", markdown=False)


def test_report_under_an_ascii_only_output_encoding(tmp_path: Path) -> None:
    """A non-ASCII plugin name printed where stdout is ASCII-only: shown escaped, no crash."""
    path = tmp_path / "r.json"
    doc = _doc()
    doc["records"] = [
        {"nodeid": "suites/t.py::t[π]", "scheme": "fp8", "path": "путь", "outcome": "failed"}
    ]
    path.write_text(json.dumps(doc))
    done = run_cli("report", "--results", str(path), env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert "\\u043f" in done.stdout  # "п", the path's first letter, as an escape
