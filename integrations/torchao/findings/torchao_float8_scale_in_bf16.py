"""torchao _choose_scale_float8: the dynamic scale of a bf16 activation is rounded to bf16

Standalone: imports only torchao, torch and numpy. Written by the qharness findings
repro generator (scripts/findings_repro.py); expected values come from the qharness
reference quantizer and are embedded below as float32 bit patterns.

Why the expected value is right:
The scale is amax / 448 in float32 (scale_dtype=torch.float32 is the function's own
argument, and _quantize_affine_float8 divides in float32): 3 / 448 = 0.0066964286, so the
row's largest element is exactly 448 * scale. _choose_scale_float8 divides while amax is
still bf16, giving bf16(3 / 448) = 0.006683349609375; rounded down, 3.0 exceeds 448 * scale
and saturates (3.0 -> 2.994), and 2.890625 lands on the same code.
"""

import sys
from importlib.metadata import version

import numpy as np
import torch
from torchao.quantization.quant_primitives import _choose_scale_float8, _quantize_affine_float8

X_BITS = [1077936128, 1077477376]
SHAPE = (1, 2)
EXPECTED_SCALE_BITS = [1004236215]
EXPECTED_VALUE_BITS = [1077936128, 1077037349]
ZERO_TILES = []  # tiles of zeros: any positive finite scale is right for them


def f32(bits):
    return torch.tensor(np.array(bits, dtype=np.uint32).view(np.float32))


def engine(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # as a bf16 model hands it over (exact)
    xb = x.bfloat16()
    s = _choose_scale_float8(
        xb, block_size=[1, x.shape[1]], float8_dtype=torch.float8_e4m3fn
    )
    q = _quantize_affine_float8(xb, s, torch.float8_e4m3fn)
    return s.float().flatten(), q.float() * s.float()


def same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Equal values (-0 and +0 apart), NaN equal to NaN."""
    a, b = a.float().flatten(), b.float().flatten()
    both_nan = torch.isnan(a) & torch.isnan(b)
    return both_nan | ((a == b) & (torch.signbit(a) == torch.signbit(b)))


def main() -> int:
    print("torchao", version("torchao"), "torch", torch.__version__)
    x = f32(X_BITS).reshape(SHAPE)
    want_scale = f32(EXPECTED_SCALE_BITS)
    want = f32(EXPECTED_VALUE_BITS).reshape(SHAPE)
    got_scale, got = engine(x)
    got_scale = got_scale.float().flatten()
    ok_scale = same(got_scale, want_scale)
    for i in ZERO_TILES:
        ok_scale[i] = bool(torch.isfinite(got_scale[i])) and bool(got_scale[i] > 0)
    ok = same(got, want).reshape(SHAPE)
    for i in (~ok_scale).nonzero().flatten().tolist()[:4]:
        want_i, got_i = want_scale[i].item(), got_scale[i].item()
        print(f"scale[{i}]: expected {want_i!r}, actual {got_i!r}")
    for r, c in (~ok).nonzero().tolist()[:6]:
        print(
            f"x[{r},{c}] = {x[r, c].item()!r}: dequantized expected "
            f"{want[r, c].item()!r}, actual {got[r, c].item()!r}"
        )
    if bool(ok_scale.all()) and bool(ok.all()):
        print("FIXED: the engine returns the expected scales and values")
        return 3
    print("REPRODUCES")
    return 0


if __name__ == "__main__":
    sys.exit(main())
