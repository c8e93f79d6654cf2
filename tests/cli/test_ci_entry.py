""".ci/run calls the README's test command exactly, and any failing step fails the run.

The entry point runs in a scratch copy whose scripts are stand-ins that fail or succeed on
demand, so these tests check the shell logic of .ci/run itself (a failed bootstrap once
skipped selftest and let the engine stages decide the exit status).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CI_RUN = REPO_ROOT / ".ci" / "run"


def _readme_commands() -> list[str]:
    """The commands of the README's first two shell blocks (main job, tests)."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO_ROOT / "README.md").read_text(), re.S)
    return [block.strip() for block in blocks[:2]]


def test_ci_runs_the_readme_test_command_exactly() -> None:
    _, tests = _readme_commands()
    assert "selftest" in tests, f"the README's second command is not the tests: {tests!r}"
    lines = [line.strip() for line in CI_RUN.read_text().splitlines()]
    assert any(line.startswith(tests) for line in lines), f".ci/run does not call {tests!r}"


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _scratch_ci(tmp_path: Path, bootstrap: int, selftest: int) -> tuple[Path, Path]:
    """A copy of .ci/run beside stand-ins exiting with the given statuses; the engine-stage
    stand-in leaves a mark when it runs."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(CI_RUN, tmp_path / ".ci" / "run")
    mark = tmp_path / "stages-ran"
    _executable(tmp_path / "scripts" / "bootstrap.py", f"import sys\nsys.exit({bootstrap})\n")
    _executable(
        tmp_path / "scripts" / "engine.py",
        f"import pathlib\npathlib.Path({str(mark)!r}).touch()\n",
    )
    _executable(tmp_path / ".venv" / "bin" / "python", f"#!/bin/sh\nexit {selftest}\n")
    return tmp_path / ".ci" / "run", mark


@pytest.mark.parametrize(
    ("bootstrap", "selftest"), [(3, 0), (0, 5), (0, 1)], ids=["bootstrap", "no-tests", "tests"]
)
def test_a_failing_step_fails_ci_before_the_stages(
    tmp_path: Path, bootstrap: int, selftest: int
) -> None:
    run, mark = _scratch_ci(tmp_path, bootstrap, selftest)
    env = {k: v for k, v in os.environ.items() if not k.startswith("QHARNESS")}
    done = subprocess.run(["bash", str(run)], capture_output=True, text=True, env=env)
    assert done.returncode != 0, done.stdout + done.stderr
    assert not mark.exists(), "the engine stages ran after a failed step"


def test_ci_passes_when_every_step_passes(tmp_path: Path) -> None:
    run, mark = _scratch_ci(tmp_path, 0, 0)
    done = subprocess.run(["bash", str(run)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert mark.exists(), "the engine stages did not run"
