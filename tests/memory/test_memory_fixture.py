"""The ``measure_memory`` fixture puts the measured peak into the test's result record."""

from __future__ import annotations

import json

import pytest

from harness.memory.tracker import cuda_allocator_size
from harness.platform.info import detect

pytest_plugins = ["pytester"]


def test_measure_memory_records_peak_bytes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import torch

        def test_region(measure_memory, qh_platform):
            device = qh_platform.torch_device
            with measure_memory():
                a = torch.empty(1000, device=device)  # 4000 bytes
                b = torch.empty(500, device=device)  # 2000 bytes: peak 6000
                del a, b
        """
    )
    results = pytester.path / "results.json"
    # in-process run under an xdist worker: benchmarks would only warn that they are off
    run = pytester.runpytest("-p", "no:benchmark", f"--qharness-results={results}")
    run.assert_outcomes(passed=1)
    (record,) = json.loads(results.read_text())["records"]
    platform = detect()
    # On CUDA/ROCm the allocator counts 512-byte blocks: 4096 + 2048.
    size = cuda_allocator_size if platform.is_cuda_alike else int
    assert record["metrics"]["peak_bytes"] == size(4000) + size(2000)
    method = "cuda_allocator" if platform.is_cuda_alike else "storage_tracker"
    assert record["metrics"]["peak_method"] == method
