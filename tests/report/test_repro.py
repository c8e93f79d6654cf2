"""A failing numeric check leaves a repro bundle that `harness repro` re-runs to the same verdict.

A third-party path that drops the bias (installed through the ``qharness.paths`` entry
points, as in test_external_path) fails the linear suite; its bundle, re-run in a fresh
process, fails the same check, and passes it with ``--path emulated``, which points at the
path as the culprit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.store.repro import ReproError, bundle_filename, read_bundle
from tests.conftest import REPO_ROOT
from tests.hang_guard import HANG_GUARD_S
from tests.paths.test_external_path import ONE, _install_fake_distribution

NODEID = f"suites/test_linear.py::test_linear[fp8_per_tensor-vendor_nobias-{ONE}-bias-bf16]"


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_GUARD_S,
    )


def test_failing_case_bundle_reproduces_its_failure(tmp_path: Path) -> None:
    _install_fake_distribution(
        tmp_path, "[qharness.paths]\nnobias = vendor_paths:DroppedBiasPath\n"
    )
    repro = tmp_path / "repro"
    suite = _run(
        tmp_path, "-m", "pytest", "-p", "no:cacheprovider", NODEID, f"--qharness-repro={repro}"
    )
    assert suite.returncode == 1, suite.stdout[-2000:]
    bundle = repro / bundle_filename(NODEID)
    data = read_bundle(bundle)
    assert data.meta["nodeid"] == NODEID
    assert data.meta["case"]["path"] == "vendor_nobias"
    assert data.meta["platform"]["device"] == "cpu"
    assert "vs golden reference" in data.meta["failure"]
    assert {"x", "w_codes", "w_scale", "bias", "y", "reference", "bound"} <= set(data.tensors)

    again = _run(tmp_path, "-m", "harness", "repro", str(bundle))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "FAIL: path vendor_nobias" in again.stdout
    assert "vs_golden          fail: vendor_nobias vs golden reference" in again.stdout
    assert "identical to the bundle's" in again.stdout
    fixed = _run(tmp_path, "-m", "harness", "repro", str(bundle), "--path", "emulated")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "PASS: path emulated" in fixed.stdout

    # on a machine without the plugin (the documented "any machine" case), and a typo
    elsewhere = _run(tmp_path / "absent", "-m", "harness", "repro", str(bundle))
    assert elsewhere.returncode == 2, elsewhere.stdout + elsewhere.stderr
    assert "'vendor_nobias' is not installed here" in elsewhere.stderr
    assert "--path emulated" in elsewhere.stderr
    typo = _run(tmp_path, "-m", "harness", "repro", str(bundle), "--path", "emulatd")
    assert typo.returncode == 2, typo.stdout + typo.stderr
    assert "--path 'emulatd'" in typo.stderr
    assert "internal error" not in elsewhere.stderr + typo.stderr


def test_passing_tests_write_no_bundle(tmp_path: Path) -> None:
    node = NODEID.replace("vendor_nobias", "emulated")
    done = _run(
        tmp_path,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        node,
        f"--qharness-repro={tmp_path / 'r'}",
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert not (tmp_path / "r").exists()


def test_a_file_that_is_not_a_bundle_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.safetensors"
    bad.write_bytes(b"\x00" * 16)
    done = _run(tmp_path, "-m", "harness", "repro", str(bad))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_directory_or_fifo_as_a_bundle_says_what_it_is(tmp_path: Path) -> None:

    fifo = tmp_path / "fifo.safetensors"
    os.mkfifo(fifo)
    for path, what in ((tmp_path, "is a directory"), (fifo, "not a regular file")):
        with pytest.raises(ReproError, match=what):
            read_bundle(path)


def test_designed_input_failures_leave_bundles_that_reproduce(tmp_path: Path) -> None:
    """test_linear_design and test_linear_designed keep their tensors as test_linear does:
    every failed case has a bundle, and one re-runs to the same failure."""
    _install_fake_distribution(tmp_path, "[qharness.paths]\nscaled = vendor_paths:ScaledPath\n")
    repro, results = tmp_path / "repro", tmp_path / "results.json"
    keyword = "vendor_scaled and fp8_per_block and not fnuz and (long_k or small_weight) and bf16"
    suite = _run(
        tmp_path, "-m", "pytest", "-p", "no:cacheprovider", "suites/test_linear.py", "-k",
        keyword, f"--qharness-repro={repro}", f"--qharness-results={results}",
    )  # fmt: skip
    assert suite.returncode == 1, suite.stdout[-2000:]
    records = json.loads(results.read_text())["records"]
    failed = [r["nodeid"] for r in records if r["outcome"] == "failed"]
    assert len(failed) == len(records), [r["outcome"] for r in records]
    assert {n.split("[")[0].split("::")[1] for n in failed} == {
        "test_linear_design",
        "test_linear_designed",
    }, failed
    for nodeid in failed:
        assert (repro / bundle_filename(nodeid)).is_file(), nodeid
    designed = next(n for n in failed if "test_linear_designed[" in n)
    again = _run(tmp_path, "-m", "harness", "repro", str(repro / bundle_filename(designed)))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "FAIL: path vendor_scaled" in again.stdout
    assert "identical to the bundle's" in again.stdout
