"""Smaller items of a fleet's night: JUnit properties are JSON, `--help` names the program
it was started as, `selftest` says what to install when its tools are missing, failures and
regressions become GitHub annotations."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness import cli
from tests.hang_guard import HANG_GUARD_S


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_junit_properties_are_json(tmp_path: Path, workers: list[str]) -> None:
    (tmp_path / "test_p.py").write_text(
        "def test_p(record_result):\n"
        "    record_result(sqnr_db=31.5, kernel='k', checks={'a': 'pass'})\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--qharness",
         "--junitxml", "junit.xml", *workers],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(tmp_path / "junit.xml").getroot().iter("property")
    }
    assert json.loads(props["qharness"]) == {
        "sqnr_db": 31.5,
        "kernel": "k",
        "checks": {"a": "pass"},
    }


@pytest.mark.parametrize(
    ("argv0", "prog"), [("/usr/bin/qharness", "qharness"), ("-m", "python -m harness")]
)
def test_help_names_the_program_it_was_started_as(
    argv0: str, prog: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", [argv0, "--help"])
    parser = cli.build_parser()
    assert parser.prog == prog
    shown = " ".join(parser.format_help().split())  # as wrapped for any terminal width
    other = {"qharness": "python -m harness", "python -m harness": "qharness <"}[prog]
    assert other not in shown  # nor in the description under the usage line
    assert f"{prog} <command> --help" in shown


def test_selftest_names_what_to_install_when_its_tools_are_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ruff" else real(name, *a)
    )
    monkeypatch.setattr(subprocess, "call", lambda *a, **k: pytest.fail("a step was started"))
    assert cli.main(["selftest"]) == 2
    err = capsys.readouterr().err
    assert "ruff" in err
    assert "pip install" in err


def test_regressions_and_failures_become_github_annotations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.report.reading.runs import add_runs, open_history
    from tests.fleet.night import record, results_doc, write_run

    history = tmp_path / "history"
    old = results_doc("gfx942", "2026-12-01T03:00:00Z", [record("fp8_per_tensor", "native")])
    add_runs(open_history(history), [write_run(tmp_path, "20261201T0300Z-gfx942-a1b2", old)])
    bad = record("fp8_per_tensor", "native", "failed")
    bad["reason"] = "vs_golden: 3/16, 50% off\nnext line"
    new = results_doc("gfx942", "2026-12-02T03:00:00Z", [bad])
    run = write_run(tmp_path, "20261202T0300Z-gfx942-a1b2", new)
    status = cli.main(
        ["report", str(run), "--history", str(history), "--github-annotations",
         "--fail-on-regression"]
    )  # fmt: skip
    assert status == 1
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("::")]
    assert lines[0].startswith(
        "::error title=qharness regressions%3A gfx942 fp8_per_tensor native::1 regressions "
        "(pass -> fail 1)"
    )
    assert lines[1].startswith("::error title=qharness new failures%3A gfx942 fp8_per_tensor")
    assert "50%25 off%0Anext line" in lines[1]


def test_xdist_brings_up_its_nodes_in_one_line(tmp_path: Path) -> None:
    """With -q on a pipe, as `run` starts pytest, xdist's "bringing up nodes..." shows once."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nqharness = true\n")
    (tmp_path / "test_p.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    assert done.stdout.count("bringing up nodes...") == 1, done.stdout
