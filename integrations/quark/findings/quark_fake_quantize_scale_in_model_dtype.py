"""Quark fake_quantize_fp8_e4m3_per_channel_with_scale: per-token scales cast to the model dtype.

Standalone: imports only amd-quark, torch and numpy. Hand-written (not a quantizer of the
generator's table): QParamsLinear's dynamic per-token input quantizer fake-quantizes a
bf16/fp16 activation with `scaled_fake_quantize`, which for FP8 per channel calls
`fake_quantize_fp8_per_channel_with_scale`: ``scale = scale.to(inputs_dtype)`` and
``inputs / scale`` in that dtype, before the FP8 cast. Quark's own FP8 quantizer,
`real_quantize_fp8_e4m3`, divides by the float32 scale in float32.

Why the expected value is right: the checkpoint's (and Quark's own quantizer's) scale is
the float32 amax / 448; FP8 quantization is round(x / scale) in float32 (x is exact in
float32), so the codes are those of `real_quantize_fp8_e4m3` on the same x and scale. The
fake-quantize rounds the scale to 8 bits (bf16) first and the quotient to bf16 before the
FP8 cast (two roundings), so some codes move by one.

Exit 0: reproduces; 3: fixed (codes equal); the sweep line gives the measured scope.
"""

import sys
from importlib.metadata import version

import torch
from quark.torch.kernel.hw_emulation.hw_emulation_interface import (
    fake_quantize_fp8_e4m3_per_channel_with_scale,
    real_quantize_fp8_e4m3,
)

REPRODUCES, FIXED = 0, 3


def codes_both_ways(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(fake-quantized values / float32 scale as FP8 codes, real_quantize codes, scale)."""
    scale = x.float().abs().amax(dim=1) / 448.0  # float32, per token (row)
    fake = fake_quantize_fp8_e4m3_per_channel_with_scale(x, scale, 0)
    # the fake-quantized value is code * bf16(scale); its code is value / bf16(scale)
    fake_codes = (fake.float() / scale.to(x.dtype).float()[:, None]).to(torch.float8_e4m3fn)
    real = real_quantize_fp8_e4m3(x.float(), scale, axis=0, qscheme="per_channel")
    return fake_codes.view(torch.uint8), real.view(torch.uint8), scale


def main() -> int:
    print("amd-quark", version("amd-quark"), "torch", torch.__version__)
    # smallest: one bf16 token [3.0, 1.015625]; float32 scale 3 / 448 = 0.0066964286, and
    # 1.015625 / 0.0066964286 = 151.67 -> e4m3fn 144 (code 113). In bf16 the scale is
    # 0.006683349609375, 1.015625 / it = 151.96, rounded to bf16 152.0: a tie between 144
    # and 160, which goes to 160 (code 114).
    x = torch.tensor([[3.0, 1.015625]], dtype=torch.bfloat16)
    fake, real, scale = codes_both_ways(x)
    print("x", x.float().tolist(), "float32 scale", scale.tolist())
    print("fake-quantize codes", fake.tolist(), "real_quantize codes", real.tolist())
    # measured scope: 64 tokens x 256 of seeded normal values, per model dtype
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        xs = (torch.randn(64, 256, generator=g) * 2).to(dtype)
        f, r, _ = codes_both_ways(xs)
        diff = f != r
        print(
            f"sweep {dtype}: {int(diff.sum())} of {diff.numel()} codes differ, "
            f"{int(diff.any(1).sum())} of 64 tokens"
        )
    xs32 = torch.randn(64, 256, generator=g) * 2
    f, r, _ = codes_both_ways(xs32)
    print(f"sweep float32: {int((f != r).sum())} codes differ")
    if bool((fake == real).all()):
        print("FIXED: the fake-quantize gives real_quantize's codes")
        return FIXED
    print("REPRODUCES")
    return REPRODUCES


if __name__ == "__main__":
    sys.exit(main())
