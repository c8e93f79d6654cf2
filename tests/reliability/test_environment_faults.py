"""Faults of the caller's environment: a deleted working directory, a closed stdout pipe.

Both are the caller's, not bugs of qharness: a one-line error before torch's import (which
dies in a deleted directory naming no cause), or, for a reader that left, the shell's
SIGPIPE status with no message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import EXIT_BROKEN_PIPE, EXIT_OK, EXIT_USAGE
from harness.report.reading.results import SCHEMA
from tests.hang_guard import HANG_GUARD_S


def _results_file(path: Path) -> Path:
    record = {"nodeid": "suites/test_x.py::test_a", "outcome": "passed", "reason": None}
    doc = {
        "schema": SCHEMA,
        "created": "2026-12-01T03:00:00Z",
        "exitstatus": 0,
        "platform": {"device": "cpu", "arch": "x", "name": "x", "torch_version": "2"},
        "records": [record],
    }
    path.write_text(json.dumps(doc))
    return path


def _run_in_deleted_directory(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m harness ARGS`` started in a folder removed after the shell entered it."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    return subprocess.run(
        ["sh", "-c", script, "sh", str(gone), sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


def test_report_with_an_absolute_results_path_runs_from_a_deleted_directory(
    tmp_path: Path,
) -> None:
    results = _results_file(tmp_path / "run.json")
    done = _run_in_deleted_directory(tmp_path, "report", "--results", str(results))
    assert done.returncode == EXIT_OK, done.stderr
    assert "(created 2026-12-01T03:00:00Z, pytest exit 0)" in done.stdout


def test_a_relative_path_from_a_deleted_directory_is_one_line(tmp_path: Path) -> None:
    done = _run_in_deleted_directory(tmp_path, "report", "--results", "run.json")
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.splitlines() == [
        "error: the working directory no longer exists (deleted after the shell entered it); "
        "cd to an existing directory and rerun"
    ]


@pytest.mark.parametrize("command", [["schemes"], ["platform"]])
def test_a_torch_command_names_the_deleted_directory_before_importing_torch(
    tmp_path: Path, command: list[str]
) -> None:
    done = _run_in_deleted_directory(tmp_path, *command)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "the working directory no longer exists" in done.stderr


@pytest.mark.parametrize("command", [["schemes"], ["schemes", "--json"]])
def test_a_closed_stdout_pipe_is_the_sigpipe_status_with_no_message(command: list[str]) -> None:
    """The pipe's read end is closed before qharness writes, so every write fails:
    deterministic, unlike racing a real ``| head -c 10``."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness", *command],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=HANG_GUARD_S,
        )
    finally:
        os.close(write_end)
    assert done.returncode == EXIT_BROKEN_PIPE, done.stderr
    assert done.stderr == ""
