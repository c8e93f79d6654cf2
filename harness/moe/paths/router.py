"""An engine's router as an MoE path: its routing in front of the emulated block.

Fused-MoE paths are handed the suite's routing, so an engine's router code never runs
there. A `RouterMoEPathBase` subclass supplies only ``route(logits, spec, x) -> Routing``
(the engine's own router function, called as the engine calls it) and, where the router
does not cover every `RoutingSpec`, ``supports_routing``; the block under that routing
is the emulated path's (exact float32), so the routing suite's checks of ids, order and
weights are about the router alone, and the block checks still hold the experts to the
float64 reference under it. It runs the routing schemes only (`ROUTER_SCHEMES`): the
block is the emulated path's, which the MoE suite already runs for every scheme.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from harness.core.schemes import Scheme
from harness.moe.model import MoELayer, MoETrace, Routing, run_moe
from harness.moe.routing import ROUTING_SCHEMES, RoutingSpec
from harness.paths.base import EXACT_FP32, Numerics, PathBase, Support
from harness.platform.info import PlatformInfo

from .base import MoEProblem
from .emulated import per_expert_gemm


class RouterMoEPathBase(PathBase):
    """An engine's router (``route``) in front of the emulated block (module docstring)."""

    name = "router"
    ranks_slots = True  # False where the router returns its top-k unsorted

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        """The engine's routing of ``logits`` [T, E] under ``spec`` (x: the tokens, which
        some routers take for their count)."""
        raise NotImplementedError

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        return Support.yes()

    def supports(self, scheme: Scheme, problem: MoEProblem, platform: PlatformInfo) -> Support:
        if scheme.name not in ROUTING_SCHEMES:
            return Support.no(
                f"{self.name} checks a router; its block is the emulated path's, run for the "
                f"routing schemes {', '.join(ROUTING_SCHEMES)} only"
            )
        return Support.yes()

    def numerics(self, scheme: Scheme, platform: PlatformInfo) -> Numerics:
        return EXACT_FP32

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
        """Route with the engine's router, then run the emulated block under its routing."""
        got = self.route(logits, spec, x)
        routing = Routing(
            got.ids.to(x.device).long(), got.weights.to(x.device).float(), got.num_experts
        )
        return replace(self.forward(layer, x, routing, platform), routing=routing)
