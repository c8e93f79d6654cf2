"""torchao nvfp4_quantize: NVFP4 block scales are clamped at E4M3's smallest normal, not its smallest subnormal

Standalone: imports only torchao and torch.

Why the expected value is right:
NVFP4 stores each 16-element block's scale as the E4M3 value nearest to
(block amax / 6) / per-tensor scale. E4M3 has subnormals: its smallest positive value is
2^-9 (finfo(float8_e4m3fn).smallest_subnormal), its smallest normal 2^-6 (finfo.tiny).
A block whose quotient is 3 * 2^-9 holds exactly the E4M3 subnormal 3 * 2^-9, so that is
its scale, and its largest element, amax = 6 * 3 * 2^-9 * per-tensor scale, is coded as
E2M1's 6 (amax / (scale * global) = 6). torchao clamps the quotient from below at
E4M3_EPS = torch.finfo(torch.float8_e4m3fn).tiny = 2^-6 before the cast, so that block
gets 2^-6, 8/3 times too large, and its elements land on coarser E2M1 codes (6 becomes
2.25 -> 2, the small ones flush to 0).
"""

import sys
from importlib.metadata import version

import torch
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def main() -> int:
    print("torchao", version("torchao"), "torch", torch.__version__)
    # block 0 holds the tensor's amax 2688 (global scale 2688 / (448 * 6) = 1, block scale
    # 448); block 1's amax is 6 * 3 * 2^-9, so its ideal block scale is 3 * 2^-9
    x = torch.zeros(1, 32, dtype=torch.float32)
    x[0, :16] = torch.linspace(-2688.0, 2688.0, 16)
    x[0, 16:] = torch.tensor([6.0, -3.0, 1.5, 0.5] * 4) * 3 * 2.0**-9
    g = per_tensor_amax_to_scale(x.abs().amax())
    t = NVFP4Tensor.to_nvfp4(x, 16, per_tensor_scale=g)
    scales = t.scale.view(torch.float8_e4m3fn).float().flatten().tolist()
    got = t.dequantize(torch.float32)[0, 16:20].tolist()
    expected_scale = 3 * 2.0**-9
    print(f"per-tensor scale {g.item()!r}; block scales {scales}")
    print(f"block 1: expected scale {expected_scale!r} (E4M3 subnormal 0x03), actual {scales[1]!r}")
    print(f"block 1 dequantized: expected {x[0, 16:20].tolist()}, actual {got}")
    if scales[1] == expected_scale and got == x[0, 16:20].tolist():
        print("FIXED: the engine keeps the subnormal block scale")
        return 3
    print("REPRODUCES")
    return 0


if __name__ == "__main__":
    sys.exit(main())
