"""aiter gemm_afp4wfp4: for which K and BLOCK_SIZE_K the unmasked E8M0 scale loads read
past a row's scales, derived from the kernel and measured. Standalone: aiter's Triton
modules, triton and torch only.

Run: TRITON_INTERPRET=1 python afp4wfp4_scale_loads_scope.py   (or on a gfx950 GPU without
TRITON_INTERPRET).

From `_gemm_afp4_wfp4_kernel` (NUM_KSPLIT=1, where the wrapper sets SPLITK_BLOCK_SIZE = K):
the loop runs cdiv(K, BLOCK_SIZE_K) times and each pass loads BLOCK_SIZE_K / 32 scale
columns with no mask, so a row's scales are read up to column
cdiv(K, BLOCK_SIZE_K) * BLOCK_SIZE_K / 32, while the row holds cdiv(K, 32) of them. The
excess, cdiv(K, BLOCK_SIZE_K) * BLOCK_SIZE_K / 32 - cdiv(K, 32), is non-zero exactly when
BLOCK_SIZE_K does not divide K rounded up to 32 (the kernel's EVEN_K is then false and the
element loads are masked to 0, so what those bytes multiply is 0: a finite byte changes
nothing, 0xFF (E8M0 NaN) makes the output NaN). The scales are passed as views of wider
buffers whose extra columns hold 0xFF, so what the kernel reads past them is known.
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
M, N = 16, 32
PAD = 8  # extra 0xFF scale columns beside each row


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def excess_columns(k: int, block_k: int) -> int:
    return cdiv(k, block_k) * block_k // 32 - cdiv(k, 32)


def run(k: int, block_k: int) -> tuple[int, int]:
    torch.manual_seed(0)
    codes = torch.tensor([0x2, 0xA], dtype=torch.uint8)  # e2m1 +1.0 and -1.0
    x = codes[torch.randint(0, 2, (M, k))]
    w = codes[torch.randint(0, 2, (N, k))]
    x_packed = x[:, 0::2] | (x[:, 1::2] << 4)
    w_packed = w[:, 0::2] | (w[:, 1::2] << 4)
    cols = cdiv(k, 32)
    xs = torch.full((M, cols + PAD), 0xFF, dtype=torch.uint8, device=device)
    ws = torch.full((N, cols + PAD), 0xFF, dtype=torch.uint8, device=device)
    xs[:, :cols] = 127  # 2^0
    ws[:, :cols] = 127
    # aiter's tuned config for the shape (the wrapper's own lookup, packed K), with the
    # blocks set: the qharness tail config of this kernel is BLOCK_SIZE_M=16,
    # BLOCK_SIZE_N=32, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, NUM_KSPLIT=1
    config = {
        **_get_config(M, N, k // 2),
        "BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": block_k, "GROUP_SIZE_M": 1,
        "NUM_KSPLIT": 1,
    }  # fmt: skip
    y = gemm_afp4wfp4(
        x_packed.to(device), w_packed.to(device), xs[:, :cols], ws[:, :cols],
        torch.float32, config=config,
    ).cpu()  # fmt: skip
    ref = x.eq(0x2).float().mul(2).sub(1) @ w.eq(0x2).float().mul(2).sub(1).t()
    assert float((y - ref).nan_to_num(0).abs().max()) == 0.0
    return int(y.isnan().sum()), y.numel()


if __name__ == "__main__":
    for k in (128, 176, 256):
        tuned = _get_config(37, N, k // 2)
        print(f"tuned config M=37 N={N} K={k}: BLOCK_SIZE_K {tuned['BLOCK_SIZE_K']}, "
              f"NUM_KSPLIT {tuned['NUM_KSPLIT']}")  # fmt: skip
    for k, block_k in ((128, 256), (384, 256), (256, 256), (176, 128), (176, 64), (160, 64)):
        nan, total = run(k, block_k)
        print(
            f"K={k:3} BLOCK_SIZE_K={block_k:3}: scale columns past the row "
            f"(derived) {excess_columns(k, block_k)}; NaN outputs with 0xFF there {nan} of "
            f"{total}"
        )
