"""What linear canaries share: a kernel model with one hook per step, so each bug is one override.

`KernelModelPath` computes exactly what the emulated path computes (quantize the activation
as the scheme says, dequantize the weight, float32 matmul, float32 bias, one rounding) but
as a vendor kernel would present itself: not the reference, so the suites compare it with
`emulated`. `quantize_with` is `harness.core.quantize.quantize` with its parts injectable.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.core.formats import ElementFormat, Specials, decode, encode, get_format
from harness.core.quantize import (
    QuantizedLinear,
    QuantizedTensor,
    expand_scale,
    quantize_activation,
    tile_amax,
)
from harness.core.scales import compute_scale
from harness.core.schemes import QuantSpec
from harness.linear.paths.emulated import EmulatedPath
from harness.ops.matmul import full_fp32_matmul

Encode = Callable[[torch.Tensor, str, float | None], torch.Tensor]


def quantize_with(
    x: torch.Tensor,
    spec: QuantSpec,
    scale: torch.Tensor | None = None,
    *,
    encode_fn: Callable[..., torch.Tensor] = encode,
    scale_fn: Callable[[torch.Tensor, QuantSpec], torch.Tensor] = compute_scale,
    amax_fn: Callable[[torch.Tensor, QuantSpec], torch.Tensor] = tile_amax,
    expand_fn: Callable[..., torch.Tensor] = expand_scale,
) -> QuantizedTensor:
    """The reference quantizer, step by step; with the defaults it is bit-identical to it."""
    x32 = x.float()
    if scale is None:
        scale = scale_fn(amax_fn(x32, spec), spec)
    scale = scale.float().to(x.device)
    codes = encode_fn(x32 / expand_fn(scale, spec, x.shape), spec.format, spec.clamp_max)
    return QuantizedTensor(codes, scale, spec)


def dequantize_with(
    q: QuantizedTensor,
    *,
    decode_fn: Callable[..., torch.Tensor] = decode,
    expand_fn: Callable[..., torch.Tensor] = expand_scale,
) -> torch.Tensor:
    """`QuantizedTensor.dequantize` in float32 with its parts injectable."""
    codes = decode_fn(q.codes, q.spec.format).float()
    return codes * expand_fn(q.scale.float(), q.spec, q.codes.shape)


def encode_ties_away(
    x: torch.Tensor, fmt: ElementFormat | str, clamp_max: float | None = None
) -> torch.Tensor:
    """RNE everywhere except exact ties, which go away from zero (400 -> 416 in e4m3)."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    codes = encode(x, fmt, clamp_max)
    step_up = torch.where(codes == fmt.sign_bit, codes - fmt.sign_bit, codes) + 1
    up = step_up.clamp(max=255).to(torch.uint8)
    mag = decode(codes & (fmt.sign_bit - 1), fmt).double()
    mag_up = decode(up & (fmt.sign_bit - 1), fmt).double()
    a = x.double().abs()
    tie_below = (a - mag) == (mag_up - a)
    bound = fmt.max_finite if clamp_max is None else clamp_max
    away = tie_below & (a > mag) & (mag_up <= bound) & torch.isfinite(mag_up)
    if fmt.specials is Specials.FNUZ:
        away = away & (codes != fmt.sign_bit)
    return torch.where(away, codes + 1, codes).to(torch.uint8)


class KernelModelPath(EmulatedPath):
    """A vendor kernel modelled in float32: the emulated computation, one hook per step."""

    name = "kernel_model"
    is_reference = False  # a kernel under test, compared with emulated

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        """The activation as the kernel multiplies it (dequantized, float32)."""
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        return x.float() if xq is None else xq.dequantize()

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        """The weight as the kernel multiplies it (dequantized, float32)."""
        return layer.weight.dequantize()

    def matmul(self, a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """float32 accumulation of a @ w^T."""
        with full_fp32_matmul():
            return a @ w.t()

    def epilogue(
        self, y: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype
    ) -> torch.Tensor:
        """Bias in float32, then one rounding to the output dtype."""
        if bias is not None:
            y = y + bias.float()
        return y.to(out_dtype)

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        y = self.matmul(self.activation(x, layer), self.weight(layer))
        return self.epilogue(y, layer.bias, out_dtype)
