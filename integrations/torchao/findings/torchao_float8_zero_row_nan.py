"""torchao Float8Tensor.from_hp per row: an all-zero row comes back NaN

Standalone: imports only torchao, torch and numpy. Written by the qharness findings
repro generator (scripts/findings_repro.py); expected values come from the qharness
reference quantizer and are embedded below as float32 bit patterns.

Why the expected value is right:
A row of zeros has amax 0; any positive scale quantizes it to zero codes, which
dequantize to 0 (the harness's reference uses scale 1 for a zero tile). _choose_scale_float8
returns amax / 448 = 0 with no floor and _quantize_affine_float8 divides by it: 0 / 0 = NaN.
pytorch/ao#4713 (open).
"""

import sys
from importlib.metadata import version

import numpy as np
import torch
from torchao.quantization.granularity import PerRow
from torchao.quantization.quantize_.common import KernelPreference
from torchao.quantization.quantize_.workflows.float8.float8_tensor import Float8Tensor

X_BITS = [1065353216, 3221225472, 1056964608, 1077936128, 0, 0, 0, 0]
SHAPE = (2, 4)
EXPECTED_SCALE_BITS = [1004236215, 1065353216]
EXPECTED_VALUE_BITS = [1064754030, 3220626286, 1056365422, 1077936128, 0, 0, 0, 0]
ZERO_TILES = [1]  # tiles of zeros: any positive finite scale is right for them


def f32(bits):
    return torch.tensor(np.array(bits, dtype=np.uint32).view(np.float32))


def engine(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    t = Float8Tensor.from_hp(
        x, granularity=PerRow(), kernel_preference=KernelPreference.TORCH
    )
    return t.scale.float().flatten(), t.qdata.float() * t.scale.float()


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
