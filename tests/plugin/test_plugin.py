"""The pytest plugin as another repository sees it: fixtures, records, xdist merging."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.hang_guard import HANG_GUARD_S

OTHER_REPO_TEST = """
import pytest


class Case:
    def __init__(self, n):
        self.n = n

    def record_fields(self):
        return {"suite": "other", "scheme": f"s{self.n}", "path": "p"}


@pytest.mark.parametrize("case", [Case(n) for n in range(6)], ids=lambda c: f"c{c.n}")
def test_uses_fixtures(case, qh_platform, golden_store, record_result):
    assert qh_platform.device in ("cpu", "cuda", "rocm")
    record_result(value=case.n * 10)
    if case.n == 4:
        pytest.skip("case 4 needs an op this platform lacks")
    assert case.n != 5, "case 5 is wrong on purpose"
"""


def _run_in_other_repo(
    tmp_path: Path, test_source: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict]:
    """Run pytest on ``test_source`` in a fresh directory; return its status and results."""
    (tmp_path / "test_other.py").write_text(textwrap.dedent(test_source))
    results = tmp_path / "results.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--qharness-results={results}",
            *args,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=HANG_GUARD_S,
    )
    assert results.exists(), proc.stdout + proc.stderr
    return proc.returncode, json.loads(results.read_text())


def _check(doc: dict) -> None:
    records = {r["nodeid"].split("[")[1].rstrip("]"): r for r in doc["records"]}
    assert sorted(records) == [f"c{n}" for n in range(6)]
    assert records["c1"]["outcome"] == "passed"
    assert records["c1"]["metrics"] == {"value": 10}
    assert records["c1"]["scheme"] == "s1"
    assert records["c4"]["outcome"] == "skipped"
    assert records["c4"]["reason"] == "case 4 needs an op this platform lacks"
    assert records["c5"]["outcome"] == "failed"
    assert "case 5 is wrong on purpose" in records["c5"]["reason"]
    assert doc["summary"]["outcomes"] == {"failed": 1, "passed": 4, "skipped": 1}


def test_fixtures_and_records_in_another_repository(tmp_path: Path) -> None:
    status, doc = _run_in_other_repo(tmp_path, OTHER_REPO_TEST)
    assert status == 1
    _check(doc)


def test_records_from_xdist_workers_are_merged(tmp_path: Path) -> None:
    status, doc = _run_in_other_repo(tmp_path, OTHER_REPO_TEST, "-n", "2", "-p", "no:benchmark")
    assert status == 1
    _check(doc)


def test_each_xdist_worker_is_pinned_to_one_gpu() -> None:
    from harness.plugin import pin_worker_gpu

    env = {"QHARNESS_GPUS": "3, 5", "PYTEST_XDIST_WORKER": "gw2"}
    assert pin_worker_gpu(env) == "3"  # round robin: gw2 -> third of two -> first
    assert env["CUDA_VISIBLE_DEVICES"] == env["HIP_VISIBLE_DEVICES"] == "3"
    env = {"QHARNESS_GPUS": "3,5", "PYTEST_XDIST_WORKER": "gw1"}
    assert pin_worker_gpu(env) == "5"
    untouched = {"PYTEST_XDIST_WORKER": "gw0"}
    assert pin_worker_gpu(untouched) is None
    assert "CUDA_VISIBLE_DEVICES" not in untouched
    assert pin_worker_gpu({"QHARNESS_GPUS": "0"}) is None  # not an xdist worker


PINNED_TEST = """
import os


def test_sees_its_gpu(record_result):
    record_result(gpu=os.environ["CUDA_VISIBLE_DEVICES"], hip=os.environ["HIP_VISIBLE_DEVICES"])
"""


def test_workers_are_pinned_before_tests_run(tmp_path: Path) -> None:
    status, doc = _run_in_other_repo(
        tmp_path, PINNED_TEST, "-n", "2", "-p", "no:benchmark", env={"QHARNESS_GPUS": "7"}
    )
    assert status == 0, doc["records"]
    (record,) = doc["records"]
    assert record["metrics"] == {"gpu": "7", "hip": "7"}


THREADS_TEST = """
import torch


def test_threads(record_result):
    record_result(threads=torch.get_num_threads())
"""


def test_xdist_workers_share_the_cores_instead_of_multiplying_threads(tmp_path: Path) -> None:
    from harness.platform.threads import THREAD_VARIABLES, usable_cores

    clean = {name: "" for name in THREAD_VARIABLES}
    status, doc = _run_in_other_repo(
        tmp_path, THREADS_TEST, "-n", "2", "-p", "no:benchmark", env=clean
    )
    assert status == 0, doc["records"]
    assert doc["records"][0]["metrics"] == {"threads": max(1, usable_cores() // 2)}
    # An explicit thread count is the user's: the worker keeps what torch makes of it.
    users = {**os.environ, "OMP_NUM_THREADS": "3"}
    probe = [sys.executable, "-c", "import torch; print(torch.get_num_threads())"]
    own = int(subprocess.run(probe, env=users, capture_output=True, text=True).stdout)
    status, doc = _run_in_other_repo(
        tmp_path, THREADS_TEST, "-n", "2", "-p", "no:benchmark", env={"OMP_NUM_THREADS": "3"}
    )
    assert doc["records"][0]["metrics"] == {"threads": own}


MODULE_SKIP_TEST = """
import pytest

pytest.skip("this module needs an engine that is not installed", allow_module_level=True)


def test_never_collected():
    pass
"""


def test_module_level_skips_are_recorded_serially_and_under_xdist(tmp_path: Path) -> None:
    (tmp_path / "test_runs.py").write_text("def test_runs(record_result):\n    pass\n")
    for args in ((), ("-n", "2", "-p", "no:benchmark")):
        status, doc = _run_in_other_repo(tmp_path, MODULE_SKIP_TEST, *args)
        assert status == 0
        records = {r["nodeid"]: r for r in doc["records"]}
        assert set(records) == {"test_other.py", "test_runs.py::test_runs"}, args
        skipped = records["test_other.py"]
        assert skipped["outcome"] == "skipped"
        assert skipped["reason"] == "this module needs an engine that is not installed"
        assert doc["summary"]["outcomes"] == {"passed": 1, "skipped": 1}
