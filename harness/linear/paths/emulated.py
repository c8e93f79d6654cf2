"""The emulated path: dequantize, compute in float32, add bias, round once to the output."""

from __future__ import annotations

import torch

from harness.core.quantize import QuantizedLinear, quantize_activation
from harness.core.schemes import Scheme
from harness.ops.matmul import full_fp32_matmul
from harness.paths.base import LinearPathBase, LinearProblem, Numerics, Support
from harness.paths.operands import QuantizedOperands
from harness.platform.info import PlatformInfo


class EmulatedPath(LinearPathBase):
    """Runs every scheme anywhere: the high-precision model of what kernels should compute."""

    name = "emulated"
    is_reference = True  # the model other paths are compared with

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """One rounding to the output dtype: bias is added in float32 before it."""
        return Numerics(out_dtype=problem.out_dtype)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        return Support.yes()

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        """The activation as the harness's quantizer (fast codecs) makes it, the loaded
        weight: what `forward` dequantizes and multiplies."""
        return QuantizedOperands(
            quantize_activation(x, layer.scheme, layer.input_scale), layer.weight
        )

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        operands = self.quantized_operands(layer, x, out_dtype)
        w = operands.weight.dequantize()
        xq = operands.activation
        a = x.float() if xq is None else xq.dequantize()
        with full_fp32_matmul():
            y = a @ w.t()
        if layer.bias is not None:
            y = y + layer.bias.float()
        return y.to(out_dtype)
