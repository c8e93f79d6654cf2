"""Throughput of each path on each scheme (pytest-benchmark; run serially, not in CI).

    python -m pytest benchmarks --benchmark-only --benchmark-json=reports/bench.json
    python -m pytest benchmarks --benchmark-only --benchmark-compare --benchmark-compare-fail=min:5%

Speed targets live here, never in the correctness suites: CI machines are noisy.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.schemes import SCHEMES
from harness.linear.cases import LINEAR_SHAPES, OUT_DTYPES, load_linear_case
from harness.linear.paths import linear_paths
from harness.paths import LinearProblem
from harness.platform.info import detect
from harness.store.golden_store import GoldenStore

SHAPE = max(LINEAR_SHAPES)  # the largest M of the suite's shapes, stored in every golden


@pytest.mark.parametrize("path_name", sorted(linear_paths()))
@pytest.mark.parametrize("scheme_name", sorted(SCHEMES))
def test_linear_forward(benchmark: Any, scheme_name: str, path_name: str) -> None:
    platform = detect()
    path = linear_paths()[path_name]
    problem = LinearProblem(*SHAPE, bias=True, out_dtype=OUT_DTYPES["bf16"])
    support = path.supports(SCHEMES[scheme_name], problem, platform)
    if not support.ok:
        pytest.skip(support.reason)
    data = GoldenStore().load(f"linear/{scheme_name}")
    case = load_linear_case(data, scheme_name, SHAPE, bias=True)
    layer, x = case.layer.to(platform.torch_device), case.x.to(platform.torch_device)
    benchmark(path.forward, layer, x, problem.out_dtype)
