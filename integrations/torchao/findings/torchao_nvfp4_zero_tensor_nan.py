"""torchao NVFP4Tensor.to_nvfp4 with its own per-tensor scale: an all-zero tensor comes back NaN

Standalone: imports only torchao and torch.

Why the expected value is right:
A tensor of zeros has amax 0, so every element must dequantize to 0 whatever its scales
(NVFP4: E2M1 codes times an E4M3 block scale times an FP32 per-tensor scale). torchao's
per_tensor_amax_to_scale(0) returns 0 (amax / (448 * 6) with no floor), and to_nvfp4 divides
each block's amax / 6 by it: 0 / 0 = NaN, stored as the E4M3 NaN byte, so dequantize gives
NaN for every element. The same tensor with per_tensor_scale=None (one level) gives zeros.
"""

import sys
from importlib.metadata import version

import torch
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale


def main() -> int:
    print("torchao", version("torchao"), "torch", torch.__version__)
    x = torch.zeros(2, 32, dtype=torch.float32)
    g = per_tensor_amax_to_scale(x.abs().amax())
    t = NVFP4Tensor.to_nvfp4(x, 16, per_tensor_scale=g)
    got = t.dequantize(torch.float32)
    one_level = NVFP4Tensor.to_nvfp4(x, 16).dequantize(torch.float32)
    print(f"per-tensor scale {g.item()!r}; block scale bytes {t.scale.view(torch.uint8).flatten().tolist()}")
    print(f"dequantized: expected all 0.0, actual {got.flatten()[:4].tolist()} ... "
          f"({int(torch.isnan(got).sum())} of {got.numel()} NaN); one level: "
          f"{int(torch.isnan(one_level).sum())} NaN")
    if bool((got == 0).all()):
        print("FIXED: the engine returns zeros")
        return 3
    print("REPRODUCES")
    return 0


if __name__ == "__main__":
    sys.exit(main())
