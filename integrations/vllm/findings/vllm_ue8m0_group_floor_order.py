"""vLLM QuantFP8 with use_ue8m0: the minimum-scale floor is applied after the scale is
rounded up to a power of two, so a group with a tiny amax gets 1 / (448 * 512), which is not
a power of two (UE8M0 cannot hold it). Standalone: vLLM (CPU build) and torch only.

Run: python vllm_ue8m0_group_floor_order.py   Exit 0: reproduces; 3: behaves as the fix
(vllm-project/vllm#58032: floor, then round up) says.
"""

import math
import sys

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.quantization.input_quant_fp8 import QuantFP8
from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape

with set_current_vllm_config(VllmConfig()):
    quant = QuantFP8(static=False, group_shape=GroupShape(1, 128), use_ue8m0=True)

torch.manual_seed(0)
x = torch.randn(3, 256)
x[1, :128] *= 1e-9  # group (1, 0): amax / 448 far below 1 / (448 * 512)
x[2, 128:] = 0.0  # group (2, 1): all zero
_, scales = quant.forward_native(x.to(torch.bfloat16))
floor = float(torch.tensor(1.0) / torch.tensor(448.0 * 512))  # float32, as vLLM computes it
for (row, group), what in (((0, 0), "ordinary group"), ((1, 0), "tiny group"), ((2, 1), "zero group")):
    s = float(scales[row, group])
    pow2 = math.log2(s).is_integer()
    print(f"{what:15}: scale {s!r} = 2^{math.log2(s):.4f}  power of two: {pow2}")
tiny = float(scales[1, 0])
expected = 2.0 ** math.ceil(math.log2(floor))  # floor first, then round up: 2^-17
print(f"floor 1/(448*512) = {floor!r}; floor then round up = {expected!r}")
sys.exit(0 if not math.log2(tiny).is_integer() else 3)
