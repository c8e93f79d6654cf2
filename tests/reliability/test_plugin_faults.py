"""A faulty plugin is named, with its entry point, and never hangs or passes for a qharness bug.

Each probe installs one fake distribution (a module and a ``*.dist-info`` with
``entry_points.txt``) on PYTHONPATH and runs the CLI as a user would: `platform`, and
`run` serially and with workers. Faults: the module hangs at import, raises at import,
calls ``sys.exit``, or gives a path whose ``name`` property raises; a path whose
``supports`` raises is a fault of the plugin too, not an internal error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.hang_guard import HANG_GUARD_S

MODULES = {
    "hangs": "import time\ntime.sleep(3600)\n",
    "raises": "raise ImportError('vendor library libfoo.so not found')\n",
    "exits": "import sys\nsys.exit(3)\n",
    "bad_name": textwrap.dedent(
        """
        from harness.linear.paths.emulated import EmulatedPath

        class Path_(EmulatedPath):
            @property
            def name(self):
                raise RuntimeError("no device handle")
        """
    ),
    "bad_supports": textwrap.dedent(
        """
        from harness.linear.paths.emulated import EmulatedPath

        class Path_(EmulatedPath):
            name = "vendor_bad_supports"

            def supports(self, scheme, problem, platform):
                raise RuntimeError("driver query failed")
        """
    ),
}
LOAD_LIMIT_S = 3  # QHARNESS_PLUGIN_TIMEOUT for the probes; the hang must end soon after


def _install(root: Path, fault: str) -> dict[str, str]:
    module = f"vendor_{fault}"
    (root / f"{module}.py").write_text(MODULES[fault])
    dist = root / f"{module.replace('_', '-')}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    target = f"{module}:Path_" if "Path_" in MODULES[fault] else module
    (dist / "entry_points.txt").write_text(f"[qharness.paths]\n{module} = {target}\n")
    return {
        **os.environ,
        "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "QHARNESS_PLUGIN_TIMEOUT": str(LOAD_LIMIT_S),
    }


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_GUARD_S,  # a hang with no time limit fails here
    )


def _assert_names_the_plugin(done: subprocess.CompletedProcess[str], fault: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert f"vendor_{fault}" in errors[0]
    assert "qharness.paths" in errors[0]  # the entry-point group
    assert "internal error" not in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("fault", ["hangs", "raises", "exits", "bad_name", "bad_supports"])
def test_platform_names_a_faulty_plugin(tmp_path: Path, fault: str) -> None:
    done = _cli(_install(tmp_path, fault), "platform")
    _assert_names_the_plugin(done, fault)
    if fault == "hangs":
        assert f"did not finish loading in {LOAD_LIMIT_S} s" in done.stderr
        assert "still waiting for plugin entry point 'vendor_hangs'" in done.stderr
    if fault == "exits":
        assert "sys.exit(3)" in done.stderr


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("fault", ["hangs", "raises"])
def test_run_stops_before_pytest_on_a_faulty_plugin(
    tmp_path: Path, fault: str, workers: str
) -> None:
    """Same exit and message serially and with workers, and no (partial) run directory."""
    reports = tmp_path / "reports"
    env = _install(tmp_path, fault)
    done = _cli(env, "run", "--reports-dir", str(reports), "--workers", workers, "-k", "x")
    _assert_names_the_plugin(done, fault)
    assert not reports.exists() or not any(reports.iterdir())
