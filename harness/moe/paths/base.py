"""The MoE path protocol: one way of executing a quantized MoE block on a platform.

The shared pieces (`Support`, `Numerics`, `PathBase` with its defaults, the kernel contract)
are harness.paths.base; this module adds only what is MoE's: the problem and the protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from harness.core.schemes import Scheme
from harness.moe.model import MoELayer, MoETrace, Routing
from harness.moe.routing import RoutingSpec
from harness.paths.base import Numerics, Support
from harness.platform.info import PlatformInfo


@dataclass(frozen=True)
class MoEProblem:
    """The shape of one MoE call: T tokens of width H, E experts, top-k, intermediate I;
    ``bias``: the layer has per-expert biases on its GEMMs."""

    tokens: int
    experts: int
    top_k: int
    hidden: int
    intermediate: int
    bias: bool = False


@runtime_checkable
class MoEPath(Protocol):
    """What an MoE path provides. Built-ins in harness.moe.paths, others by entry point.

    ``forward`` returns a `MoETrace`: the output and the intermediate (before and after
    quantization) it fed to the second GEMM, in canonical (token, slot) row order, so the
    suites can check each stage and account for intermediate codes that differ. Optional
    members (``is_reference``, ``kernel_name``, ``uses_capabilities``) default as in
    `harness.paths.base.PathBase`, which built-ins inherit.
    """

    name: str

    def supports(self, scheme: Scheme, problem: MoEProblem, platform: PlatformInfo) -> Support:
        """Say whether this path can run the problem here; the reason is reported."""
        ...

    def numerics(self, scheme: Scheme, platform: PlatformInfo) -> Numerics:
        """How this path's grouped GEMMs round for ``scheme`` (the suites derive bounds)."""
        ...

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        """Run the block on x [T, H] with the given routing; output float32 [T, H]."""
        ...


@runtime_checkable
class SelfRoutingMoEPath(MoEPath, Protocol):
    """An MoE path that routes itself, as fused-MoE kernels do: given router logits and a
    `RoutingSpec` it scores, selects and weights the experts, runs the block, and returns
    its trace with ``trace.routing`` set to the routing it used (ids [T, k] int64 in its
    slot order, weights float32 [T, k]); the trace's rows follow that slot order.

    Optional members: ``supports_routing(spec, platform) -> Support`` (default: every
    spec), ``ranks_slots`` (default True: slots come in the reference's order, descending
    score with ties to the lower index, and the suite checks the order; False: only each
    token's set of experts and their weights are checked), ``tie_break`` (default: the
    spec's rule; "any": exactly equal scores may be taken in any order, as a router built
    on torch.topk, which promises none, declares). Paths without
    ``route_and_forward`` are handed the suite's routing through ``forward``, as before.
    """

    def route_and_forward(
        self,
        layer: MoELayer,
        x: torch.Tensor,
        logits: torch.Tensor,
        spec: RoutingSpec,
        platform: PlatformInfo,
    ) -> MoETrace:
        """Route x [T, H] by ``logits`` [T, E] as ``spec`` says and run the block."""
        ...


def routes_itself(path: object) -> bool:
    """Whether ``path`` takes router logits (`SelfRoutingMoEPath.route_and_forward`)."""
    return callable(getattr(path, "route_and_forward", None))


def routing_support(path: object, spec: RoutingSpec, platform: PlatformInfo) -> Support:
    """The path's ``supports_routing`` answer for ``spec``, or yes when it has none."""
    supports = getattr(path, "supports_routing", None)
    if not routes_itself(path):
        return Support.no(f"MoE path {getattr(path, 'name', path)!r} does not route itself")
    return Support.yes() if supports is None else supports(spec, platform)


def tie_break(path: object, spec: RoutingSpec) -> str:
    """The tie-break rule the path declares (default: the spec's)."""
    return str(getattr(path, "tie_break", spec.tie_break))


def ranks_slots(path: object) -> bool:
    """Whether the path's routing slots are in the reference's order (default True)."""
    return bool(getattr(path, "ranks_slots", True))
