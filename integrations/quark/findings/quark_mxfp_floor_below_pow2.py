"""Quark real_quantize_mxfp: amax one float32 step below 8 gets scale 2, not 1 (FP4)

Standalone: imports only amd-quark, torch and numpy. Written by the qharness findings
repro generator (scripts/findings_repro.py); expected values come from the qharness
reference quantizer and are embedded below as float32 bit patterns.

Why the expected value is right:
OCP MX v1.0 section 6.3: the scale is 2^(floor(log2 amax) - emax). amax =
nextafter(8, 0) = 7.9999995 has log2 just below 3, so floor gives 2 and the FP4 scale is
2^(2 - 2) = 1 (the largest element then saturates to 6, the spec's known loss). Quark takes
torch.floor(torch.log2(amax)) in float32, where log2(7.9999995) rounds to 3.0, and picks 2:
one binade high, so small elements land on a grid twice as coarse (0.3 -> 0 instead of
0.5). The same at nextafter(2^n, 0) for every n outside [-1, 2], all FP4/FP6 formats.
"""

import sys
from importlib.metadata import version

import numpy as np
import torch
from quark.torch.kernel.hw_emulation.hw_emulation_interface import real_quantize_mxfp

X_BITS = [1090519039, 1050253722, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
SHAPE = (1, 32)
EXPECTED_SCALE_BITS = [1065353216]
EXPECTED_VALUE_BITS = [1086324736, 1056964608, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
ZERO_TILES = []  # tiles of zeros: any positive finite scale is right for them


def f32(bits):
    return torch.tensor(np.array(bits, dtype=np.uint32).view(np.float32))


def engine(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = real_quantize_mxfp(x, "fp4", -1, 32).float()
    out = out.reshape(x.shape[0], -1, 33)
    scale, values = out[..., 0], out[..., 1:]
    return scale.flatten(), (values * scale[..., None]).reshape(x.shape)


def same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Equal values (-0 and +0 apart), NaN equal to NaN."""
    a, b = a.float().flatten(), b.float().flatten()
    both_nan = torch.isnan(a) & torch.isnan(b)
    return both_nan | ((a == b) & (torch.signbit(a) == torch.signbit(b)))


def main() -> int:
    print("amd-quark", version("amd-quark"), "torch", torch.__version__)
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
