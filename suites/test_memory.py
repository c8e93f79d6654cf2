"""Memory: every scheme x path x shape holds exactly the modelled weight bytes, and two
consecutive forward calls stay within the documented budget (harness.memory.budget),
leave nothing alive and attach nothing to the layer (harness.memory.check)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import torch

from harness.core.inputs import bias_vector, scaled_normal
from harness.core.quantize import quantize_linear
from harness.core.schemes import SCHEMES, get_scheme
from harness.linear.paths import get_path, linear_paths
from harness.memory.budget import (
    HELD,
    IDEAL,
    PACKED,
    forward_budget,
    full_precision_weight_bytes,
    held_layer_bytes,
    layer_bytes,
    tensor_bytes,
)
from harness.memory.check import MEMORY_SHAPES, check_forward_memory
from harness.memory.tracker import peak_not_meaningful
from harness.paths import LinearProblem
from harness.paths.base import memory_not_judged
from harness.paths.case import Case
from harness.platform.info import PlatformInfo
from harness.plugin import RecordResult


@dataclass(frozen=True)
class MemoryCase(Case):
    SUITE = "memory"
    ID = ("scheme", "path", "shape")
    RECORD = ("scheme", "path", "shape")

    scheme: str
    path: str
    shape: tuple[int, int, int]

    @property
    def problem(self) -> LinearProblem:
        m, n, k = self.shape
        return LinearProblem(m, n, k, bias=True, out_dtype=torch.bfloat16)


def memory_cases() -> Iterator[MemoryCase]:
    for scheme in sorted(SCHEMES):
        for path in linear_paths():
            for shape in MEMORY_SHAPES:
                yield MemoryCase(scheme, path, shape)


@pytest.mark.parametrize("case", list(memory_cases()), ids=lambda c: c.id)
def test_forward_memory(
    case: MemoryCase, qh_platform: PlatformInfo, record_result: RecordResult
) -> None:
    if qh_platform.simulated:
        pytest.skip(peak_not_meaningful(qh_platform))
    scheme = get_scheme(case.scheme)
    path = get_path(case.path)
    support = path.supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    unjudged = memory_not_judged(path)
    if unjudged:  # the path's own declaration: a counted skip with its reason, never a pass
        pytest.skip(f"memory not judged for path {case.path!r}: {unjudged}")
    m, n, k = case.shape
    base = f"memory/{case.scheme}/{case.id}"
    x = scaled_normal(f"{base}/x", m, k, scheme.activation)
    w = scaled_normal(f"{base}/w", n, k, scheme.weight)
    layer = quantize_linear(w, bias_vector(f"{base}/bias", n), scheme, calibration=x)
    device = qh_platform.torch_device
    layer, x = layer.to(device), x.to(device)
    del w

    # The layer as every path receives it holds exactly the modelled bytes.
    model = layer_bytes(scheme, n, k, bias=True, layout=HELD)
    held = held_layer_bytes(layer)
    model_weight = model["weight_codes"] + model["weight_scales"]
    assert held["weight"] == model_weight, (
        f"{case.scheme}: loaded weight holds {held['weight']} bytes, the held-layout model "
        f"says {model_weight} (codes {model['weight_codes']} + scales {model['weight_scales']})"
    )
    assert held["layer"] == sum(model.values()), (
        f"{case.scheme}: loaded layer holds {held['layer']} bytes, model {model}"
    )

    budget = forward_budget(case.path, scheme, case.problem, qh_platform)
    full_copy = full_precision_weight_bytes(n, k)
    if not budget.allows_full_precision_weight and budget.total >= full_copy:
        pytest.fail(
            f"{case.id}: the budget ({budget.total} bytes) is not below a bf16 weight copy "
            f"({full_copy}); this shape cannot show a copy: use a larger N/M ratio",
            pytrace=False,
        )

    result = check_forward_memory(path, layer, x, case.problem, qh_platform)
    record_result(
        peak_bytes=result.peak_bytes,
        retained_bytes=result.retained_bytes,
        layer_growth_bytes=result.layer_growth_bytes,
        budget_bytes=result.budget.total,
        weight_bytes=held["weight"],
        weight_bytes_packed=tensor_bytes(scheme.weight, (n, k), PACKED).total,
        weight_bytes_ideal=tensor_bytes(scheme.weight, (n, k), IDEAL).total,
    )
    assert result.ok, "; ".join(result.violations)
