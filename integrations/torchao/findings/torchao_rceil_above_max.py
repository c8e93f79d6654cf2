"""torchao to_mx RCEIL: a block one float32 step above 448 * 2^4 gets scale 2^4, not 2^5

Standalone: imports only torchao, torch and numpy. Written by the qharness findings
repro generator (scripts/findings_repro.py); expected values come from the qharness
reference quantizer and are embedded below as float32 bit patterns.

Why the expected value is right:
RCEIL is "the smallest power of two with amax / scale <= max" (torchao's docstring
points to cuBLAS's definition, which its SM100 path implements with cvt.rp.ue8m0).
amax = nextafter(448 * 16) = 7168.0005; 7168.0005 / 2^4 = 448.00003 > 448, so the scale is
2^5 (7168.0005 / 32 = 224.00002 <= 448). The float32 fallback computes
ceil(log2(amax / 448)) = ceil(log2(16.000001)) and log2 rounds to exactly 4.0.
Dequantized values agree here (448 saturated * 2^4 = 224 * 2^5); the scale byte and the
element codes do not, so a CPU/eager run and the definition (or an SM100 compiled run)
disagree bit for bit. Affected: k >= 4 or k <= -5, every element format.
"""

import sys
from importlib.metadata import version

import numpy as np
import torch
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import MXTensor

X_BITS = [1172307969, 1065353216, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
SHAPE = (1, 32)
EXPECTED_SCALE_BITS = [1107296256]
EXPECTED_VALUE_BITS = [1172307968, 1065353216, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
ZERO_TILES = []  # tiles of zeros: any positive finite scale is right for them


def f32(bits):
    return torch.tensor(np.array(bits, dtype=np.uint32).view(np.float32))


def engine(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m = MXTensor.to_mx(x, torch.float8_e4m3fn, 32, ScaleCalculationMode.RCEIL)
    return m.scale.float().flatten(), m.dequantize(torch.float32)


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
