"""`harness run`'s junit.xml holds one testsuite per suite file, each counting its own
cases, instead of pytest's single testsuite named "pytest"."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.report.outputs.junit_suites import split_by_file, suite_file
from tests.conftest import run_cli

PROJECT_TESTS = """
import pytest


def test_ok(record_property):
    record_property("k", "v")


def test_bad():
    assert 1 == 2


@pytest.mark.skip(reason="not here")
def test_skipped():
    pass


class TestGroup:
    def test_in_class(self):
        pass
"""


def _pytest_junit(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "test_a.py").write_text(PROJECT_TESTS)
    (tmp_path / "pkg" / "test_b.py").write_text("def test_b():\n    pass\n")
    junit = tmp_path / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--junitxml={junit}", "-o", "junit_suite_name=pytest", "pkg"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    return junit


def test_a_pytest_junit_file_is_split_per_file_and_recounted(tmp_path: Path) -> None:
    junit = _pytest_junit(tmp_path)
    before = ET.parse(junit).getroot()
    assert [s.get("name") for s in before.iter("testsuite")] == ["pytest"]
    assert split_by_file(junit, tmp_path) == 2
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["pkg/test_a.py", "pkg/test_b.py"]
    a, b = suites["pkg/test_a.py"], suites["pkg/test_b.py"]
    assert (a.get("tests"), a.get("failures"), a.get("errors"), a.get("skipped")) == (
        "4", "1", "0", "1",
    )  # fmt: skip
    assert (b.get("tests"), b.get("failures"), b.get("skipped")) == ("1", "0", "0")
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("5", "1", "1")
    names = sorted(c.get("name") for c in root.iter("testcase"))
    assert names == ["test_b", "test_bad", "test_in_class", "test_ok", "test_skipped"]
    ok = next(c for c in a.iter("testcase") if c.get("name") == "test_ok")
    assert ok.find("properties/property").attrib == {"name": "k", "value": "v"}
    assert split_by_file(junit, tmp_path) == 0  # already split: left as it is


def test_a_test_class_belongs_to_its_file(tmp_path: Path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_x.py").write_text("")
    assert suite_file("suites.test_x.TestGroup", tmp_path) == "suites/test_x.py"
    assert suite_file("suites.test_x", tmp_path) == "suites/test_x.py"
    assert suite_file("nowhere.test_y", tmp_path) == "nowhere.test_y"


def test_run_writes_one_testsuite_per_suite_file(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    done = run_cli(
        "run", "--workers", "0", "--reports-dir", str(reports), "-k",
        "fp8_per_tensor and emulated and (8x128x256 and bias-bf16 or test_forward_memory)",
    )  # fmt: skip
    junit = reports / "latest" / "junit.xml"
    assert junit.is_file(), done.stdout + done.stderr
    suites = ET.parse(junit).getroot().findall("testsuite")
    names = [s.get("name") for s in suites]
    assert "pytest" not in names
    assert len(names) == len(set(names)) >= 2, names
    assert all(n.startswith("suites/test_") and n.endswith(".py") for n in names), names
    for suite in suites:
        files = {c.get("classname", "").split(".")[1] for c in suite.iter("testcase")}
        assert files == {suite.get("name").split("/")[1][:-3]}
        assert int(suite.get("tests")) == len(suite.findall("testcase"))
