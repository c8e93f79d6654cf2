"""aiter gemm_afp4wfp4: the E8M0 scale loads are not masked along K, so a BLOCK_SIZE_K
larger than K (aiter's own tuned config for M<=64, N=16, K=128 on gfx950) reads scale bytes
past each row's K/32. Standalone: imports only aiter's Triton modules, triton and torch.

Run: TRITON_INTERPRET=1 python afp4wfp4_scale_loads_unmasked.py   (or on a gfx950 GPU
without TRITON_INTERPRET). The scales are passed as views of wider buffers whose extra
columns hold 0xFF (NaN in E8M0): a valid strided input, so what the kernel reads past K is
deterministic. A correct kernel never reads them.
"""

import importlib.util
import os
import sys
import types

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:  # aiter/__init__ probes for ROCm: load the Triton kernels without it
    root = importlib.util.find_spec("aiter").submodule_search_locations[0]
    for name, path in (("aiter", root), ("aiter.ops", os.path.join(root, "ops"))):
        mod = types.ModuleType(name)
        mod.__path__ = [path]
        sys.modules[name] = mod
    import aiter.ops.triton.utils._triton.arch_info as arch_info

    arch_info.get_arch = lambda: "gfx950"
from aiter.ops.triton._triton_kernels.gemm_afp4wfp4 import _get_config  # noqa: E402
from aiter.ops.triton.gemm_afp4wfp4 import gemm_afp4wfp4  # noqa: E402

device = "cpu" if INTERPRET else "cuda"
M, N, K = 37, 16, 128
print("tuned config:", {k: _get_config(M, N, K)[k] for k in ("BLOCK_SIZE_K", "NUM_KSPLIT")})
torch.manual_seed(0)
codes = torch.tensor([0x2, 0xA], dtype=torch.uint8)  # e2m1 +1.0 and -1.0
x = codes[torch.randint(0, 2, (M, K))]
w = codes[torch.randint(0, 2, (N, K))]
x_packed = x[:, 0::2] | (x[:, 1::2] << 4)
w_packed = w[:, 0::2] | (w[:, 1::2] << 4)
for pad in (0x7F, 0xFF):  # 0x7F: 2^0, finite; 0xFF: NaN
    xs = torch.full((M, 2 * K // 32), pad, dtype=torch.uint8, device=device)
    ws = torch.full((N, 2 * K // 32), pad, dtype=torch.uint8, device=device)
    xs[:, : K // 32] = 127  # the real scales: 2^0; the views keep the padding beside them
    ws[:, : K // 32] = 127
    y = gemm_afp4wfp4(
        x_packed.to(device), w_packed.to(device), xs[:, : K // 32], ws[:, : K // 32],
        torch.float32,
    ).cpu()  # fmt: skip
    ref = x.eq(0x2).float().mul(2).sub(1) @ w.eq(0x2).float().mul(2).sub(1).t()
    print(
        f"bytes past K/32 = {pad:#04x}: NaN outputs {int(y.isnan().sum())} of {y.numel()}, "
        f"max error on finite outputs {float((y - ref).nan_to_num(0).abs().max())}"
    )
