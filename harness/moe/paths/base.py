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
from harness.paths.base import Numerics, Support
from harness.platform.info import PlatformInfo


@dataclass(frozen=True)
class MoEProblem:
    """The shape of one MoE call: T tokens of width H, E experts, top-k, intermediate I."""

    tokens: int
    experts: int
    top_k: int
    hidden: int
    intermediate: int


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
