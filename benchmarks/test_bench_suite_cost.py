"""The suites' own cost per test, so that growth shows in the nightly benchmark history.

    python -m pytest benchmarks/test_bench_suite_cost.py --benchmark-only \
        --benchmark-json=reports/bench-suite.json

Each benchmark runs a fixed sample of one suite's tests serially in a fresh pytest process and
records, in ``extra_info``, how many tests ran and the mean test time (setup + call +
teardown, from pytest's JUnit XML), which excludes the process's start-up. The whole default
suite is timed by `python -m harness run --workers 0` (README, "How long the suites take").
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# suite file -> a -k expression selecting a fixed, representative sample of its tests
# (test_linear.py: `test_linear` cases only, the same sample as before the file gained
# operand and designed-input cases)
SAMPLES = {
    "test_linear.py": "test_linear[ and w_mxfp4_a_mxfp4- and 8x128x256",
    "test_moe.py": "w_mxfp8_a_mxfp8-emulated",
    "test_loading.py": "fp8_per_tensor-unfused",
    "test_memory.py": "fp8_per_channel-emulated",
    "test_mx_scales.py": "e2m1",
}


@pytest.mark.parametrize("suite", sorted(SAMPLES))
def test_suite_cost_per_test(benchmark: Any, suite: str, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    cmd = [
        sys.executable, "-m", "pytest", str(REPO_ROOT / "suites" / suite), "-q",
        "-p", "no:cacheprovider", "-p", "no:benchmark", "-k", SAMPLES[suite],
        f"--junitxml={junit}", f"--qharness-results={tmp_path / 'results.json'}",
    ]  # fmt: skip

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)

    done = benchmark.pedantic(run, rounds=1, iterations=1)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cases = ET.parse(junit).getroot().iter("testcase")
    times = [float(case.get("time", 0.0)) for case in cases]
    assert times, f"the sample {SAMPLES[suite]!r} selected no test in {suite}"
    benchmark.extra_info["tests"] = len(times)
    benchmark.extra_info["seconds_per_test"] = sum(times) / len(times)
    benchmark.extra_info["test_seconds"] = sum(times)
