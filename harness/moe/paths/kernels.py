"""Grouped GEMM kernels the native MoE path dispatches to, each with its own contract.

Each is a `harness.paths.base.KernelContract` (the protocol linear kernel modes share): it
states what it can run (`accepts`, from the scheme's QuantSpec fields, never its name) and
which capability probe gates it; on top, what problem shapes it takes, how it rounds
(`Numerics`) and its grouped GEMM. Which scheme goes to which kernel on which platform is
the table in harness.moe.dispatch.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from harness.core.formats import get_format
from harness.core.scale_formats import FP32
from harness.core.schemes import WHOLE, Scheme
from harness.moe.dispatch import GROUPED_BF16, SCALED_GROUPED_ROWWISE
from harness.moe.model import Operand, QuantizedExperts
from harness.ops.grouped import grouped_mm_bf16, scaled_grouped_mm_rowwise
from harness.paths.base import KernelContract, Numerics, OperandContract, Support
from harness.paths.kernel import ANY_OPERANDS, ContractedKernel, Kernel
from harness.platform.info import PlatformInfo

from .base import MoEProblem


@runtime_checkable
class GroupedKernel(KernelContract, Protocol):
    """A kernel contract (``name``, ``accepts``, ``capability``) plus what MoE needs."""

    def fits(self, problem: MoEProblem, platform: PlatformInfo) -> Support:
        """Whether the problem's shapes meet the kernel's layout rules."""
        ...

    def numerics(self, scheme: Scheme) -> Numerics:
        """How the grouped GEMM rounds ``scheme`` (the suites derive bounds from it)."""
        ...

    def gemm(self, a: Operand, row_experts: torch.Tensor, w: QuantizedExperts) -> torch.Tensor:
        """y[r] = a[r] @ W[expert[r]]^T as float32 [M, N]."""
        ...


def _strides_fit(problem: MoEProblem, align: int, op: str) -> Support:
    """Grouped GEMMs need 16-byte row strides: H and I multiples of ``align`` elements."""
    dims = {"H": problem.hidden, "I": problem.intermediate}
    bad = {k: v for k, v in dims.items() if v % align}
    if bad:
        return Support.no(f"{op} needs 16-byte strides: {bad} not multiples of {align}")
    return Support.yes()


def sort_by_expert(
    row_experts: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stable row order grouping rows by expert, and the rows per expert (empty ones too)."""
    order = torch.argsort(row_experts, stable=True)
    return order, torch.bincount(row_experts, minlength=num_experts)


def unsort(sorted_rows: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(sorted_rows)
    out[order] = sorted_rows
    return out


class Bf16GroupedKernel(ContractedKernel):
    """Dequantize weights and activations to bf16, then torch.nn.functional.grouped_mm.

    Runs any scheme (it computes on dequantized values); operands are rounded to bf16
    (exact for MX, whose E8M0-scaled elements fit bf16; not for float32-scaled FP8).
    """

    contract = Kernel(GROUPED_BF16, ANY_OPERANDS, probe="grouped_mm.bf16")
    _ALIGN = 8  # 16-byte strides in bf16

    def fits(self, problem: MoEProblem, platform: PlatformInfo) -> Support:
        return _strides_fit(problem, self._ALIGN, "grouped_mm")

    def numerics(self, scheme: Scheme) -> Numerics:
        return Numerics(operand_dtype=torch.bfloat16, out_dtype=torch.bfloat16)

    def gemm(self, a: Operand, row_experts: torch.Tensor, w: QuantizedExperts) -> torch.Tensor:
        order, counts = sort_by_expert(row_experts, w.num_experts)
        a_sorted = a.values[order].to(torch.bfloat16)
        y = grouped_mm_bf16(a_sorted, w.dequantize().to(torch.bfloat16), counts)
        return unsort(y.float(), order)


_ROWWISE_BLOCKS = frozenset({(WHOLE, WHOLE), (1, WHOLE)})  # per-tensor or per-row scales
# FP8 e4m3 codes of one flavour on both operands, float32 per-tensor or per-row scales.
FP8_ROWWISE_OPERANDS = OperandContract(
    formats=frozenset({"e4m3fn", "e4m3fnuz"}),
    scale_format=FP32.name,
    weight_blocks=_ROWWISE_BLOCKS,
    activation_blocks=_ROWWISE_BLOCKS,
)


class Fp8RowwiseGroupedKernel(ContractedKernel):
    """FP8 codes through torch._scaled_grouped_mm with row-wise float32 scales.

    Per-tensor scales are expanded to rows (the same value repeated, exact).
    """

    contract = Kernel(
        SCALED_GROUPED_ROWWISE,
        FP8_ROWWISE_OPERANDS,
        probe="scaled_grouped_mm.rowwise",
        probe_per_format=True,
    )
    _ALIGN = 16  # 16-byte strides in FP8

    def fits(self, problem: MoEProblem, platform: PlatformInfo) -> Support:
        return _strides_fit(problem, self._ALIGN, "scaled grouped mm")

    def numerics(self, scheme: Scheme) -> Numerics:
        # Codes are exact; the two float32 scales are applied in the epilogue, then bf16 out.
        return Numerics(operand_dtype=None, out_dtype=torch.bfloat16, epilogue_roundings=2)

    def gemm(self, a: Operand, row_experts: torch.Tensor, w: QuantizedExperts) -> torch.Tensor:
        q = a.quantized
        if q is None:
            raise ValueError("the FP8 row-wise grouped kernel needs quantized activations")
        dtype = get_format(w.spec.format).to_torch_dtype()
        m, (e, n) = q.codes.shape[0], w.codes.shape[:2]
        scale_a = q.scale.float().reshape(-1)
        scale_a = scale_a.expand(m) if scale_a.numel() == 1 else scale_a
        scale_w = w.scale.float().reshape(e, -1)
        scale_w = scale_w.expand(e, n) if scale_w.shape[1] == 1 else scale_w
        order, counts = sort_by_expert(row_experts, e)
        y = scaled_grouped_mm_rowwise(
            q.codes[order].view(dtype), scale_a[order], w.codes.view(dtype), scale_w, counts
        )
        return unsort(y.float(), order)


MOE_KERNELS: dict[str, GroupedKernel] = {
    k.name: k for k in (Bf16GroupedKernel(), Fp8RowwiseGroupedKernel())
}
