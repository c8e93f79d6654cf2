"""The native MoE path: the platform's grouped GEMM kernel, chosen by the dispatch table.

For a scheme on a platform the path looks up the table (harness.moe.dispatch), then checks
the chosen kernel's contract, its capability probe and the problem's shapes; any "no"
becomes the skip reason. A scheme is only ever handed to the kernel the table names, and
only when that kernel's own contract accepts it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from harness.core.schemes import Scheme
from harness.moe.bounds import GemmNumerics
from harness.moe.dispatch import EMULATE, MOE_NATIVE_DISPATCH, DispatchRow, decision, platform_key
from harness.moe.model import MoELayer, MoETrace, Routing, run_moe
from harness.paths.base import Support
from harness.platform import capabilities
from harness.platform.info import PlatformInfo

from .base import MoEProblem
from .kernels import MOE_KERNELS, GroupedKernel


class NativeMoEPath:
    """Grouped GEMMs on the kernel the dispatch table names for (scheme, platform)."""

    name = "native"
    is_reference = False  # compared against the emulated path, never the other way round

    def __init__(
        self,
        table: Mapping[str, DispatchRow] = MOE_NATIVE_DISPATCH,
        kernels: Mapping[str, GroupedKernel] = MOE_KERNELS,
        probe: bool = True,
    ) -> None:
        self.table = table
        self.kernels = kernels
        self.probe = probe  # False only for self-tests with kernels that have no probe

    @property
    def uses_capabilities(self) -> frozenset[str]:
        """Every probed capability some row of the table can dispatch to."""
        from harness.core.schemes import SCHEMES

        used: set[str] = set()
        for row in self.table.values():
            for dec, names in row.items():
                kernel = self.kernels.get(dec)
                if kernel is not None:
                    used |= {kernel.capability(SCHEMES[n]) for n in names if n in SCHEMES}
        return frozenset(used)

    def kernel_for(
        self, scheme: Scheme, platform: PlatformInfo
    ) -> tuple[GroupedKernel | None, str]:
        """The kernel the table sends ``scheme`` to here, or None and the reason."""
        key = platform_key(platform)
        if key not in self.table:
            return None, (
                f"no MoE dispatch row for platform {key!r}; add one to MOE_NATIVE_DISPATCH "
                "in harness/moe/dispatch.py"
            )
        dec = decision(key, scheme.name, self.table)
        if dec is None:
            return None, f"MoE dispatch row {key!r} has no decision for {scheme.name}"
        if dec == EMULATE:
            return None, f"MoE dispatch table: {scheme.name} is emulated on {key}"
        kernel = self.kernels.get(dec)
        if kernel is None:
            return None, f"MoE dispatch table names unknown kernel {dec!r}"
        ok, reason = kernel.accepts(scheme)
        if not ok:
            return None, f"dispatch table error: {dec} cannot run {scheme.name}: {reason}"
        return kernel, ""

    def supports(self, scheme: Scheme, problem: MoEProblem, platform: PlatformInfo) -> Support:
        kernel, reason = self.kernel_for(scheme, platform)
        if kernel is None:
            return Support.no(reason)
        cap = kernel.capability(scheme)
        if self.probe and not capabilities.has(platform, cap):
            return Support.no(capabilities.why_not(platform, cap))
        return kernel.fits(problem, platform)

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        """The grouped kernel that runs ``scheme`` here (recorded with each result)."""
        kernel, reason = self.kernel_for(scheme, platform)
        if kernel is None:
            raise ValueError(f"native MoE path cannot run {scheme.name}: {reason}")
        return kernel.name

    def numerics(self, scheme: Scheme, platform: PlatformInfo) -> GemmNumerics:
        kernel, reason = self.kernel_for(scheme, platform)
        if kernel is None:
            raise ValueError(f"native MoE path cannot run {scheme.name}: {reason}")
        return kernel.numerics(scheme)

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        kernel, reason = self.kernel_for(layer.scheme, platform)
        if kernel is None:
            raise ValueError(f"native MoE path cannot run {layer.scheme.name}: {reason}")
        return run_moe(layer, x, routing, kernel.gemm)
