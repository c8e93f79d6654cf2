"""GEMM outputs element by element: exact where the bound fixes the rounding; 1 ULP caught."""

from __future__ import annotations

import torch
from moe_helpers import W_MXFP4_A_MXFP6, small_moe

from harness.moe.agreement import gemm_agreement, grouped_gemm_interval
from harness.moe.bounds import EXACT_FP32
from harness.moe.model import MoELayer, Operand, quantize_operand, route
from harness.moe.paths.emulated import EmulatedMoEPath, per_expert_gemm
from harness.moe.paths.kernels import Bf16GroupedKernel
from harness.moe.paths.native import NativeMoEPath
from harness.platform.info import detect


def _gemm1_operands() -> tuple[MoELayer, torch.Tensor, torch.Tensor]:
    """MX weights and activations (dequantized values exact in bf16): layer, a1 rows, experts."""
    layer, x, logits = small_moe(W_MXFP4_A_MXFP6)
    routing = route(logits, 2, renormalize=False)
    a1 = quantize_operand(x, W_MXFP4_A_MXFP6.activation, None).values
    return layer, a1[routing.row_tokens()], routing.row_experts()


def test_bf16_kernel_agrees_with_emulation_where_determined_and_one_ulp_is_caught() -> None:
    layer, a, experts = _gemm1_operands()
    w = layer.w13.dequantize()
    kernel = Bf16GroupedKernel()
    numerics = kernel.numerics(W_MXFP4_A_MXFP6)
    op = Operand(a, None)
    y = kernel.gemm(op, experts, layer.w13)
    ref = per_expert_gemm(op, experts, layer.w13)
    found = gemm_agreement(y, a, w, experts, numerics, (ref, a, EXACT_FP32))
    assert found.ok, found.describe()
    assert found.comparable == y.numel()  # bf16 rounding leaves MX operands unchanged
    assert found.determined > y.numel() // 2  # not vacuous: the bound fixes most outputs

    interval = grouped_gemm_interval(a, w, experts, numerics, (EXACT_FP32,))
    i = int(interval.determined.reshape(-1).nonzero()[0])
    bumped = y.to(torch.bfloat16)
    one_up = torch.nextafter(bumped, torch.tensor(torch.inf, dtype=torch.bfloat16))
    bumped.view(-1)[i] = one_up.view(-1)[i]
    caught = gemm_agreement(bumped.float(), a, w, experts, numerics, (ref, a, EXACT_FP32))
    assert (caught.outside_own, caught.mismatched) == (1, 1), caught.describe()


def test_rows_with_different_operands_are_not_compared() -> None:
    layer, a, experts = _gemm1_operands()
    other = a.clone()
    other[0, 0] = torch.nextafter(other[0, 0], torch.tensor(torch.inf))  # row 0 differs
    y = per_expert_gemm(Operand(a, None), experts, layer.w13)
    y_other = per_expert_gemm(Operand(other, None), experts, layer.w13)
    w = layer.w13.dequantize()
    found = gemm_agreement(y, a, w, experts, EXACT_FP32, (y_other, other, EXACT_FP32))
    assert found.comparable == y.numel() - y.shape[1]
    assert found.outside_own == 0


def test_interval_ends_are_float32_values_inside_the_bound() -> None:
    a = torch.tensor([[1.0, 2.0**-30]])
    w = torch.tensor([[[1.0, 1.0]]])
    interval = grouped_gemm_interval(a, w, torch.tensor([0]), EXACT_FP32)
    # exact 1 + 2^-30: float32 cannot hold it; the bound (gamma_2 u32) brackets it tightly
    assert float(interval.lo) <= 1.0 + 2.0**-30 <= float(interval.hi)
    assert float(interval.hi) - float(interval.lo) <= 2.0**-21


def test_paths_say_which_is_the_reference_and_which_kernel_runs() -> None:
    platform = detect()
    assert EmulatedMoEPath.is_reference is True
    assert NativeMoEPath.is_reference is False
    assert EmulatedMoEPath().kernel_name(W_MXFP4_A_MXFP6, platform) == "emulated"
    kernel, _ = NativeMoEPath().kernel_for(W_MXFP4_A_MXFP6, platform)
    if kernel is not None:
        assert NativeMoEPath().kernel_name(W_MXFP4_A_MXFP6, platform) == kernel.name
