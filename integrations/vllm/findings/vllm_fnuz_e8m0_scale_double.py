"""vLLM normalize_e4m3fn_to_e4m3fnuz doubles the weight scale with a plain multiply, which
torch has no kernel for on float8_e8m0fnu: a block-FP8 checkpoint whose power-of-two (UE8M0)
scales vLLM holds as E8M0 bytes (its FP8 method's ``is_scale_e8m0`` parameters) cannot be
normalized for an e4m3fnuz (ROCm gfx942) platform. Standalone: vLLM (CPU build) and torch.

Run: python vllm_fnuz_e8m0_scale_double.py   Exit 0: reproduces; 3: behaves as the fix
(vllm-project/vllm#42247: double through float32) says.
"""

import sys

import torch
from vllm.model_executor.layers.quantization.utils.w8a8_utils import (
    normalize_e4m3fn_to_e4m3fnuz,
)

torch.manual_seed(0)
weight = (torch.randn(128, 128) * 100).to(torch.float8_e4m3fn)  # one 128x128 block
scale = torch.tensor([[2.0**-7]]).to(torch.float8_e8m0fnu)  # its UE8M0 block scale
print(
    f"torch {torch.__version__}; weight {tuple(weight.shape)} {weight.dtype}, scale "
    f"{float(scale)} {scale.dtype}"
)
try:
    _, doubled, _ = normalize_e4m3fn_to_e4m3fnuz(weight.clone(), scale.clone())
except (RuntimeError, NotImplementedError) as exc:
    print(f"normalize_e4m3fn_to_e4m3fnuz: {type(exc).__name__}: {exc}")
    sys.exit(0)
expected = float(scale) * 2
print(f"normalized scale {float(doubled)} {doubled.dtype}; expected {expected}")
sys.exit(3 if doubled.dtype == scale.dtype and float(doubled) == expected else 1)
