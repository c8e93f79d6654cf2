"""Threads per xdist worker: cores divided among workers, the user's explicit count kept."""

from __future__ import annotations

import pytest

from harness.platform.threads import threads_per_worker


@pytest.mark.parametrize(
    ("workers", "cores", "expected"), [("2", 2, 1), ("2", 16, 8), ("3", 16, 5), ("8", 2, 1)]
)
def test_cores_are_divided_among_workers(workers: str, cores: int, expected: int) -> None:
    assert threads_per_worker({"PYTEST_XDIST_WORKER_COUNT": workers}, cores) == expected


@pytest.mark.parametrize(
    "environ",
    [
        {},  # not an xdist worker: torch's default
        {"PYTEST_XDIST_WORKER_COUNT": "2", "OMP_NUM_THREADS": "4"},
        {"PYTEST_XDIST_WORKER_COUNT": "2", "MKL_NUM_THREADS": "1"},
        {"PYTEST_XDIST_WORKER_COUNT": "zero"},
        {"PYTEST_XDIST_WORKER_COUNT": "0"},
    ],
)
def test_left_alone(environ: dict[str, str]) -> None:
    assert threads_per_worker(environ, 8) is None
