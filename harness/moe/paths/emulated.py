"""The emulated MoE path: per-expert dequantize and float32 matmul, a loop over experts.

It also routes itself (`SelfRoutingMoEPath`) with the reference router, so the suite's
routing cases run on every platform and the reference's routing contract is exercised.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from harness.core.schemes import Scheme
from harness.moe.model import MoELayer, MoETrace, Operand, QuantizedExperts, Routing, run_moe
from harness.moe.routing import RoutingSpec, reference_route
from harness.ops.matmul import full_fp32_matmul
from harness.paths.base import EXACT_FP32, Numerics, PathBase, Support
from harness.platform.info import PlatformInfo

from .base import MoEProblem


def per_expert_gemm(a: Operand, row_experts: torch.Tensor, w: QuantizedExperts) -> torch.Tensor:
    """y[r] = a[r] @ dequant(W[expert[r]])^T in float32, one matmul per expert with rows."""
    out = torch.zeros(
        a.values.shape[0], w.codes.shape[1], dtype=torch.float32, device=a.values.device
    )
    with full_fp32_matmul():
        for e in torch.unique(row_experts).tolist():
            rows = (row_experts == e).nonzero().squeeze(1)
            out[rows] = a.values[rows].float() @ w.expert(int(e)).dequantize().t()
    return out


class EmulatedMoEPath(PathBase):
    """Runs every scheme anywhere: the float32 model of what kernels should compute."""

    name = "emulated"
    is_reference = True  # the model other paths are compared against

    def supports(self, scheme: Scheme, problem: MoEProblem, platform: PlatformInfo) -> Support:
        return Support.yes()

    def numerics(self, scheme: Scheme, platform: PlatformInfo) -> Numerics:
        return EXACT_FP32

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        """What runs (recorded with each result): per-expert float32 matmuls."""
        return "emulated"

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        return run_moe(layer, x, routing, per_expert_gemm)

    def route_and_forward(
        self,
        layer: MoELayer,
        x: torch.Tensor,
        logits: torch.Tensor,
        spec: RoutingSpec,
        platform: PlatformInfo,
    ) -> MoETrace:
        """Route with `reference_route` (on the device), then run the block."""
        routing = reference_route(logits, spec)
        return replace(run_moe(layer, x, routing, per_expert_gemm), routing=routing)
