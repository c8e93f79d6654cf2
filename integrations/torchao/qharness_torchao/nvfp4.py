"""torchao's NVFP4 (`NVFP4Tensor`, CPU) as a qharness quantizer and a weight-only linear path.

Quantizer `torchao_to_nvfp4`: torchao's own `NVFP4Tensor.to_nvfp4` computes the E4M3
block scales and the packed E2M1 data, with the per-tensor scale torchao's
`per_tensor_amax_to_scale` gives from the tensor's amax (or the calibrated one, for a
static activation). The adapter only converts layouts: FP4 unpacked (element 0 in the low
nibble), E4M3 scale bytes decoded to float32, the per-tensor scale as the [1, 1] global.

Conventions declared (harness.core.conventions), each read from torchao's `nvfp4_quantize`:
an Inf block's scale 448 (`e4m3_inf_block_scale_448`), elements multiplied by
(1 / global) / block (`two_level_reciprocal_scale`). The global scale amax / (448 * 6) is
the reference's. Its block scales clamped below at E4M3's smallest normal 2^-6 instead of
its smallest subnormal 2^-9 are a finding (`BLOCK_SCALE_MIN_NORMAL`, reported upstream as a
bug), scoped by its rule `e4m3_block_scale_min_normal`. Limits of the API, not findings: K
a multiple of 16, contiguous input.

Path `torchao_nvfp4_linear`: ``F.linear(x, weight)`` with ``weight`` an `NVFP4Tensor` built
from the checkpoint's codes and scales; with no activation config torchao dequantizes the
weight (``per_tensor_scale * scale`` times the codes, float32) to the activation's dtype
and calls ``F.linear`` in it: weight-only NVFP4 (`w_nvfp4`). Its W4A4 path needs
``torch._scaled_mm`` on FP4 (SM100 GPUs) and does not run here.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

from harness import (
    E4M3_X_FP32,
    NVFP4_BLOCK,
    KnownFinding,
    LinearPathBase,
    LinearProblem,
    Numerics,
    PlatformInfo,
    QuantizedLinear,
    QuantizedOperands,
    QuantizedTensor,
    QuantSpec,
    Scheme,
    Support,
    pack_fp4,
    unpack_fp4,
)
from qharness_torchao import ENGINE


def _spec_problem(spec: QuantSpec | None) -> str:
    if spec is None:
        return "not quantized"
    if spec.scale_fmt is not E4M3_X_FP32 or spec.block != (1, NVFP4_BLOCK):
        return f"not NVFP4 (1x{NVFP4_BLOCK} E4M3 x FP32 scales), {spec.scale_format} scales"
    if spec.format != "e2m1":
        return f"NVFP4 elements are e2m1, not {spec.format}"
    return ""


ZERO_TENSOR_NAN = (
    "torchao to_nvfp4 with per_tensor_amax_to_scale: an all-zero tensor gets per-tensor "
    "scale 0 (amax / (448 * 6), no floor), each block scale is 0 / 0 = NaN (E4M3 byte 0xFF) "
    "and every element dequantizes to NaN; a zero block inside a non-zero tensor, and the "
    "one-level form (per_tensor_scale=None), give zeros "
    "(integrations/torchao/findings/torchao_nvfp4_zero_tensor_nan.py)"
)


BLOCK_SCALE_MIN_NORMAL = (
    "torchao nvfp4_quantize: block scales are clamped below at E4M3_EPS = "
    "torch.finfo(torch.float8_e4m3fn).tiny, E4M3's smallest normal 2^-6, not its smallest "
    "subnormal 2^-9, so a block whose scale (amax / 6) / global lies in E4M3's subnormal "
    "range gets 2^-6, up to 8 times too large, and its elements lose up to three binades "
    "(E2M1 codes flushed to 0 or coarser); reported as pytorch/pytorch#179111 (open) "
    "against torchao's file (integrations/torchao/findings/torchao_nvfp4_block_scale_min_normal.py)"
)


class ToNVFP4Quantizer:
    name = "torchao_to_nvfp4"
    engine = ENGINE
    conventions = frozenset({"e4m3_inf_block_scale_448", "two_level_reciprocal_scale"})
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            ZERO_TENSOR_NAN, suites=frozenset({"quantizers"}), cases=frozenset({"degenerate"})
        ),
        KnownFinding(
            BLOCK_SCALE_MIN_NORMAL,
            suites=frozenset({"quantizers"}),
            behaves_as=frozenset({"e4m3_block_scale_min_normal"}),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        problem = _spec_problem(spec)
        return Support.no(f"torchao to_nvfp4: {problem}") if problem else Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        # nvfp4_quantize asserts "K dim must be divisible by block_size" (an API limit)
        if shape[-1] % NVFP4_BLOCK:
            return Support.no(
                f"torchao to_nvfp4: K={shape[-1]} is not a multiple of {NVFP4_BLOCK} "
                "(no partial NVFP4 blocks)"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        hp = x.float().contiguous()
        per_tensor = (
            per_tensor_amax_to_scale(hp.abs().amax())
            if scale is None
            else scale.float().reshape(())
        )
        t = NVFP4Tensor.to_nvfp4(hp, NVFP4_BLOCK, per_tensor_scale=per_tensor)
        codes = unpack_fp4(t.qdata.view(torch.uint8)).reshape(hp.shape)
        blocks = t.scale.view(torch.float8_e4m3fn).float().reshape(hp.shape[0], -1)
        return QuantizedTensor(codes, blocks, spec, per_tensor.float().reshape(1, 1))


def nvfp4_weight(weight: QuantizedTensor, dtype: torch.dtype) -> NVFP4Tensor:
    """The checkpoint's weight [N, K] as an `NVFP4Tensor` (linear scale layout)."""
    if weight.global_scale is None:
        raise ValueError("an NVFP4 weight has a per-tensor global scale")
    n, k = weight.codes.shape
    scale = weight.scale.to(torch.float8_e4m3fn).reshape(n, k // NVFP4_BLOCK)
    return NVFP4Tensor(
        pack_fp4(weight.codes).contiguous(),
        scale,
        NVFP4_BLOCK,
        dtype,
        weight.global_scale.float().reshape(()),
    )


class TorchaoNVFP4LinearPath(LinearPathBase):
    """``F.linear`` with a torchao `NVFP4Tensor` weight (weight-only: dequantize, F.linear)."""

    name = "torchao_nvfp4_linear"
    activation_in_model_dtype = (
        "the adapter hands torchao the activation in the model (output) dtype, as a bf16 "
        "model's linear layers receive it: x.to(out_dtype) before torchao quantizes it"
    )
    engine = ENGINE

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        return "torchao NVFP4Tensor linear (weight-only: dequantize, F.linear)"

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """The weight is dequantized to the activation's dtype (float32: code times
        fp32(global * block), as the emulated path), then one F.linear in that dtype."""
        return Numerics(out_dtype=problem.out_dtype, operand_dtype=problem.out_dtype)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        problem_text = _spec_problem(scheme.weight)
        if problem_text:
            return Support.no(f"torchao NVFP4 linear: weight {problem_text}")
        if scheme.activation is not None:
            return Support.no(
                "torchao NVFP4 linear: NVFP4 activations run torch._scaled_mm on FP4, which "
                "needs an SM100 GPU; only weight-only NVFP4 runs here"
            )
        if problem.out_dtype != torch.float32:
            return Support.no(
                "torchao NVFP4 linear: the weight is dequantized to the activation's dtype; "
                "only float32 keeps the checkpoint's values exact (bf16/fp16 round them)"
            )
        if problem.k % NVFP4_BLOCK:
            return Support.no(
                f"torchao NVFP4: K={problem.k} is not a multiple of {NVFP4_BLOCK} "
                "(no partial NVFP4 blocks)"
            )
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        weight = nvfp4_weight(layer.weight, out_dtype)
        bias = None if layer.bias is None else layer.bias.to(out_dtype)
        return F.linear(x.to(out_dtype).contiguous(), weight, bias)

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        """Weight-only: no quantized activation; the `NVFP4Tensor` weight `forward` builds,
        read back (FP4 unpacked, E4M3 block-scale bytes decoded, the per-tensor scale)."""
        w = nvfp4_weight(layer.weight, out_dtype)
        n, k = layer.weight.codes.shape
        codes = unpack_fp4(w.qdata.view(torch.uint8)).reshape(n, k)
        blocks = w.scale.view(torch.float8_e4m3fn).float().reshape(n, k // NVFP4_BLOCK)
        glob = None if w.per_tensor_scale is None else w.per_tensor_scale.float().reshape(1, 1)
        return QuantizedOperands(None, QuantizedTensor(codes, blocks, layer.weight.spec, glob))
