"""Installable anywhere: the built wheel, installed into a fresh venv, runs a shipped suite
against the shipped goldens from an empty directory and writes ``./reports/``.

The fresh venv gets the wheel (no dependencies fetched) and sees this venv's third-party
packages (torch, pandas, ...) through a directory of links that leaves out this checkout's
own editable install, so `harness` can only come from the wheel; like this venv, it also
sees the system site-packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.hang_guard import HANG_GUARD_S

SUBSET = "test_linear and fp8_per_tensor and not fnuz and 1x16x256 and bias-bf16"


def _sh(*cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_GUARD_S,
    )


def _third_party_only(target: Path) -> Path:
    """Links to this venv's packages, without this checkout's own (editable) install."""
    target.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.startswith(("qharness", "__editable__", "harness")) or entry.suffix == ".pth":
            continue
        (target / entry.name).symlink_to(entry)
    return target


@pytest.mark.slow
def test_wheel_runs_a_shipped_suite_outside_the_checkout(tmp_path: Path) -> None:
    built = _sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                "-q", "-w", tmp_path / "dist", REPO_ROOT, cwd=tmp_path)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("qharness-*.whl")

    fresh = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False, system_site_packages=True).create(fresh)
    python = fresh / "bin" / "python"
    purelib = _sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                  cwd=tmp_path).stdout.strip()  # fmt: skip
    deps = _third_party_only(tmp_path / "deps")
    (Path(purelib) / "third_party.pth").write_text(f"{deps}\n")
    installed = _sh(sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    purelib, wheel, cwd=tmp_path)  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]

    empty = tmp_path / "empty"
    empty.mkdir()
    where = _sh(python, "-c", "import harness; print(harness.__file__)", cwd=empty)
    assert where.stdout.startswith(purelib), where.stdout + where.stderr
    run = _sh(python, "-m", "harness", "run", "--workers", "0", "--", "-k", SUBSET, cwd=empty)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    latest = empty / "reports" / "latest"
    doc = json.loads((latest / "results.json").read_text())
    outcomes = {r["outcome"] for r in doc["records"]}
    assert doc["summary"]["total"] >= 2
    assert outcomes == {"passed"}, doc["summary"]
    assert (latest / "junit.xml").is_file()
    assert (latest / "report.html").is_file()
    assert (empty / "reports" / "latest.json").is_file()
    assert f"{purelib}/harness/_shipped/suites" in run.stdout  # the shipped copy ran
