"""The native MoE path: the platform's grouped GEMM kernel, chosen by the dispatch table.

For a scheme on a platform the path looks up the table (harness.moe.dispatch) with the
rule linear's native path uses too (`harness.paths.dispatch.choose`), then checks the
chosen kernel's contract, its capability probe and the problem's shapes; any "no"
becomes the skip reason. A scheme is only ever handed to the kernel the table names, and
only when that kernel's own contract accepts it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from harness.core.schemes import Scheme
from harness.moe.dispatch import MOE_DISPATCH_HOME, MOE_NATIVE_DISPATCH, DispatchRow
from harness.moe.model import MoELayer, MoETrace, Routing, run_moe
from harness.paths.base import Numerics, PathBase, Support
from harness.paths.dispatch import choose
from harness.platform import capabilities
from harness.platform.info import PlatformInfo, native_dispatch_key
from harness.platform.simulate import TORCH_KERNELS_AS_ARCH, not_the_simulated_arch

from .base import MoEProblem
from .kernels import MOE_KERNELS, GroupedKernel


class NativeMoEPath(PathBase):
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
        key = native_dispatch_key(platform)
        choice = choose(self.table, self.kernels, key, scheme, "MoE dispatch", MOE_DISPATCH_HOME)
        return choice.kernel, choice.reason

    def supports(self, scheme: Scheme, problem: MoEProblem, platform: PlatformInfo) -> Support:
        if platform.simulated and platform.simulated not in TORCH_KERNELS_AS_ARCH:
            return Support.no(not_the_simulated_arch(self.name, platform.simulated, platform.arch))
        if problem.bias:
            return Support.no("the native grouped kernels take no bias (torch grouped_mm has none)")
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

    def numerics(self, scheme: Scheme, platform: PlatformInfo) -> Numerics:
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
