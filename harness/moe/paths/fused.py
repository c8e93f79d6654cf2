"""What every fused-MoE kernel path shares, written once, so an adapter supplies its calls.

A fused-MoE kernel (aiter's `fused_moe` and `fused_moe_mxfp4`, vLLM's `fused_moe_kernel`)
runs each grouped GEMM of the block in one launch over pairs sorted by expert, gathering
each pair's token row itself; the rest of the block is the reference's
(`harness.moe.model.run_fused_moe`). The kernel scales its operands in a few ways, its
*modes*: each is a `Kernel` (its contract), and a dispatch table sends each MoE scheme to a
mode per arch, every other scheme emulated (`harness.paths.dispatch.rest_emulated`).

An adapter's path subclasses `FusedMoEPathBase` and supplies:

- ``modes`` (mode name -> `Kernel`) and ``make_table()`` (usually `rest_emulated` per arch,
  over `MOE_SCHEMES`);
- ``where(platform)``: whether the kernel can run here at all;
- ``prepare(layer, routing, mode, platform)``: the call's config and expert assignment,
  run inside ``launch(platform)``, the context the kernel's calls need (a simulated arch,
  the interpreter's hints);
- ``gemm(prepared, mode, q, w, routing, top_k, platform)``: one grouped GEMM;
- ``numerics`` and ``kernel_name``, as every path does.

vLLM's modular fused-MoE kernel is the pattern: the steps are named once, each kernel
implements its step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, ClassVar

import torch

from harness.core.quantize import QuantizedTensor
from harness.core.schemes import Scheme
from harness.moe.dispatch import MOE_SCHEMES
from harness.moe.model import MoELayer, MoETrace, QuantizedExperts, Routing, run_fused_moe
from harness.moe.paths.base import MoEProblem
from harness.paths.base import PathBase, Support
from harness.paths.dispatch import Choice, DispatchRow, choose
from harness.paths.kernel import Kernel
from harness.platform.info import PlatformInfo, platform_key


class FusedMoEPathBase(PathBase):
    """A fused-MoE kernel as an MoE path: the table, where it runs, the modes' refusals and
    one ``forward`` through `run_fused_moe`; subclasses supply the calls (module doc)."""

    name = "fused_moe"
    small_blocks: ClassVar[bool] = False  # run with small tiles instead of the tuned config
    # whether ``gemm`` takes a ``bias`` keyword (the expert biases [E, N], added by the
    # kernel after dequantization); paths without it refuse biased layers
    takes_bias: ClassVar[bool] = False
    modes: ClassVar[Mapping[str, Kernel]] = {}

    def __init__(self) -> None:
        self.table = self.make_table()
        self.kernels = self.modes

    # ----------------------------------------------------------- what an adapter supplies
    def make_table(self) -> Mapping[str, DispatchRow]:
        raise NotImplementedError

    def where(self, platform: PlatformInfo) -> Support:
        """Whether the kernel runs on ``platform`` at all (a GPU arch it has, Triton)."""
        return Support.yes()

    def dispatch_key(self, platform: PlatformInfo) -> str:
        """The table row that applies on ``platform``."""
        return platform_key(platform)

    def refusal(self, scheme: Scheme, platform: PlatformInfo, choice: Choice[Kernel]) -> str:
        """Why no mode runs ``scheme`` here (the table's reason unless the engine's is known)."""
        return choice.reason

    @contextlib.contextmanager
    def launch(self, platform: PlatformInfo) -> Iterator[None]:
        """The context the kernel's calls run in (none by default)."""
        yield

    def prepare(
        self, layer: MoELayer, routing: Routing, mode: Kernel, platform: PlatformInfo
    ) -> Any:
        """The call's config and expert assignment, handed to each `gemm`."""
        raise NotImplementedError

    def gemm(
        self,
        prepared: Any,
        mode: Kernel,
        q: QuantizedTensor | None,
        w: QuantizedExperts,
        routing: Routing,
        top_k: int,
        platform: PlatformInfo,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One grouped GEMM: row p // top_k of ``q`` times pair p's expert's ``w`` (plus its
        expert's ``bias`` row, passed only where ``takes_bias``); float32 values of the
        kernel's output, canonical pair rows [T * k, N]."""
        raise NotImplementedError

    # ------------------------------------------------------------------- written once
    @property
    def uses_capabilities(self) -> frozenset[str]:
        return frozenset(
            self.modes[mode].capability(MOE_SCHEMES[name])
            for row in self.table.values()
            for mode, names in row.items()
            if mode in self.modes
            for name in names
        )

    def mode(self, scheme: Scheme, platform: PlatformInfo) -> tuple[Kernel | None, str]:
        """The mode the table sends ``scheme`` to here, or None and why not."""
        key = self.dispatch_key(platform)
        home = type(self).__module__  # where the table is, for a missing row
        choice = choose(self.table, self.modes, key, scheme, f"{self.name} dispatch", home)
        if choice.kernel is None:
            return None, self.refusal(scheme, platform, choice)
        return choice.kernel, ""

    def supports(self, scheme: Scheme, problem: MoEProblem, platform: PlatformInfo) -> Support:
        where = self.where(platform)
        if not where.ok:
            return where
        if problem.bias and not self.takes_bias:
            return Support.no(f"{self.name}: the kernel call takes no expert bias")
        mode, reason = self.mode(scheme, platform)
        return Support.yes() if mode is not None else Support.no(f"{self.name}: {reason}")

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        mode, reason = self.mode(layer.scheme, platform)
        if mode is None:
            raise ValueError(f"{self.name} cannot run {layer.scheme.name}: {reason}")
        with self.launch(platform):
            prepared = self.prepare(layer, routing, mode, platform)

            biases = {id(layer.w13): layer.b13, id(layer.w2): layer.b2}

            def gemm(q: QuantizedTensor | None, w: QuantizedExperts, top_k: int) -> torch.Tensor:
                bias = biases[id(w)]
                if bias is None:
                    return self.gemm(prepared, mode, q, w, routing, top_k, platform)
                return self.gemm(prepared, mode, q, w, routing, top_k, platform, bias=bias)

            return run_fused_moe(replace(layer, b13=None, b2=None), x, routing, gemm)
