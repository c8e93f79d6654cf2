"""vLLM's routers as routing paths (`qharness_vllm.router`): registered, and the CPU
router's finding declared for the cases it covers and no others.

The routing itself is checked by suites/test_moe_routing.py (the vllm stage runs it); here
one DeepSeek-V3 row worked by hand, and the finding's case predicate.

Skips, counted and with the reason, where the vLLM adapter is not installed.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip(
    "qharness_vllm",
    reason="vLLM adapter not installed (python scripts/engine.py vllm installs it in its own venv)",
)

from qharness_vllm.router import VllmCpuRouter, VllmGroupedTopkRouter

from harness.moe.paths import moe_paths, routes_itself
from harness.moe.routing import RoutingSpec
from harness.moe.routing_cases import design_cases
from harness.paths.findings import known_finding

ROUTERS = ("vllm_grouped_topk", "vllm_cpu_router", "vllm_fused_topk")


def test_routers_are_registered_and_route_themselves() -> None:
    paths = moe_paths()
    assert all(name in paths and routes_itself(paths[name]) for name in ROUTERS)


@pytest.mark.parametrize("path", [VllmGroupedTopkRouter(), VllmCpuRouter()], ids=lambda p: p.name)
def test_deepseek_v3_row_by_hand(path: object) -> None:
    """8 experts in 4 groups of 2, 2 groups, top-2, sigmoid + bias, renormalized, x2.5.
    Biased scores: group 0 (0.88 + 0, 0.5 - 1) sums 0.38, group 1 (0.73, 0.62 - 1) 0.35,
    groups 2 and 3 about -3.9: groups {0, 1}, experts {0, 2}; weights from the unbiased
    scores sigmoid(2) and sigmoid(1), renormalized, times 2.5."""
    logits = torch.tensor([[2.0, 0.0, 1.0, 0.5, -3.0, -3.0, -3.0, -3.0]])
    bias = (0.0, -1.0, 0.0, -1.0, -2.0, -2.0, -2.0, -2.0)
    spec = RoutingSpec(
        2,
        True,
        "sigmoid",
        n_group=4,
        topk_group=2,
        correction_bias=bias,
        routed_scaling_factor=2.5,
    )
    got = path.route(logits, spec, torch.zeros(1, 4))  # type: ignore[attr-defined]
    order = torch.argsort(got.ids[0])
    assert got.ids[0][order].tolist() == [0, 2]
    s0, s2 = (
        torch.sigmoid(torch.tensor(2.0, dtype=torch.float64)),
        torch.sigmoid(torch.tensor(1.0, dtype=torch.float64)),
    )
    want = torch.tensor([s0, s2]) / (s0 + s2) * 2.5
    assert torch.allclose(got.weights[0][order].double(), want, rtol=2**-20, atol=0)


def test_cpu_router_finding_covers_exactly_the_ungrouped_bias_cases() -> None:
    path = VllmCpuRouter()
    for case in design_cases():
        spec = case.spec
        expected = spec.correction_bias is not None and not spec.grouped
        assert (known_finding(path, case.finding_case()) is not None) == expected, case.id
