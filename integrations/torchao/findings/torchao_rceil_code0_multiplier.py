"""torchao to_mx RCEIL: a block with scale code 0x00 (2^-127) is multiplied by 1

Standalone: imports only torchao, torch and numpy. Written by the qharness findings
repro generator (scripts/findings_repro.py); expected values come from the qharness
reference quantizer and are embedded below as float32 bit patterns.

Why the expected value is right:
With amax = 448 * 2^-127 the RCEIL scale is 2^-127 (E8M0 code 0x00), and the block's
elements are amax / 2^-127 = 448 (code 0x7E) and so on; dequantized, the block comes back
as itself. _to_mx_rceil sets the reciprocal to 1.0 where the exponent code is 0 (meant
for all-zero blocks), so the elements are x * 1, which round to 0 in e4m3fn, while the
stored scale still says 2^-127: every element of the block dequantizes to 0.
"""

import sys
from importlib.metadata import version

import numpy as np
import torch
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import MXTensor

X_BITS = [73400320, 2212495360, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
SHAPE = (1, 32)
EXPECTED_SCALE_BITS = [4194304]
EXPECTED_VALUE_BITS = [73400320, 2212495360, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
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
