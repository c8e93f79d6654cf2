"""selftest runs every step whatever failed before it, then names each step's outcome.

A slow runner once timed out the pytest step and, because the first failure stopped the
run, the canaries never ran: the red job said nothing about them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.cli.selftest import run_steps
from harness.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK


def _step(label: str, status: int, mark: Path) -> tuple[str, list[str]]:
    """A stand-in step that leaves ``mark/label`` and exits with ``status``."""
    code = f"import pathlib, sys; pathlib.Path({str(mark / label)!r}).touch(); sys.exit({status})"
    return label, [sys.executable, "-c", code]


def test_every_step_runs_after_a_failure_and_the_summary_names_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = [
        _step("lint", 1, tmp_path),
        _step("tests", 0, tmp_path),
        _step("canaries", 0, tmp_path),
    ]
    assert run_steps(steps, cwd=tmp_path) == EXIT_FAILED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["canaries", "lint", "tests"]
    err = capsys.readouterr().err
    lines = {line.split()[-1]: line for line in err.splitlines() if line.startswith("  ")}
    assert "failed (exit 1)" in lines["lint"]
    assert err.count("passed") == 2
    assert "1 of 3 steps failed" in err


def test_a_pytest_step_with_no_tests_fails_and_keeps_its_own_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pytest step's status is mapped as pytest's (5, no tests ran, is a failure), and the
    first failing step decides the exit status."""
    no_tests = ("pytest", [sys.executable, "-m", "pytest", str(tmp_path / "empty")])
    (tmp_path / "empty").mkdir()
    status = run_steps([no_tests, _step("canaries", 0, tmp_path)], cwd=tmp_path)
    assert status == EXIT_FAILED
    assert (tmp_path / "canaries").exists()
    assert "no tests ran" in capsys.readouterr().err


def test_every_step_passing_is_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_steps([_step("a", 0, tmp_path), _step("b", 0, tmp_path)], cwd=tmp_path) == EXIT_OK
    assert "every step passed" in capsys.readouterr().out


def test_an_interrupted_step_stops_the_run_and_names_what_did_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = [
        _step("lint", 0, tmp_path),
        _step("tests", 130, tmp_path),
        _step("canaries", 0, tmp_path),
    ]
    assert run_steps(steps, cwd=tmp_path) == EXIT_INTERRUPTED
    assert not (tmp_path / "canaries").exists()
    err = capsys.readouterr().err
    lines = {line.split()[-1]: line for line in err.splitlines() if line.startswith("  ")}
    assert "not run (interrupted)" in lines["canaries"]


def test_selftest_runs_the_platform_dependent_tests_once_per_simulated_arch() -> None:
    from harness.cli.selftest import PLATFORM_DEPENDENT_TESTS, simulated_steps
    from harness.platform.simulate import SIMULATED_ARCHS

    steps, envs = simulated_steps()
    assert len(steps) == len(SIMULATED_ARCHS)
    for (label, cmd), arch in zip(steps, SIMULATED_ARCHS, strict=True):
        assert envs[label] == {"QHARNESS_SIMULATE": f"torch:{arch}"}  # no triton needed
        assert set(PLATFORM_DEPENDENT_TESTS) <= set(cmd)
        assert f"torch:{arch}" in label  # the summary counts each arch's step apart
    for test in PLATFORM_DEPENDENT_TESTS:
        assert (Path(__file__).resolve().parents[2] / test.split("::")[0]).is_file(), test
