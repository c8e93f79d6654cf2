"""aiter gemm_a8w8_per_token_scale: split-K pieces that are not whole BLOCK_SIZE_K blocks give
wrong sums. Standalone: imports only aiter's Triton modules, triton and torch.

Run: TRITON_INTERPRET=1 python per_token_scale_splitk_tail.py   (or on a gfx942/gfx950 GPU
without TRITON_INTERPRET). Prints the worst relative error per config against a float64
reference computed from the same FP8 operands and scales.
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

    arch_info.get_arch = lambda: "gfx942"
    from triton.runtime import interpreter

    interpreter.interpreter_builder.create_assume = lambda cond: None  # a hint on GPUs
from aiter.ops.triton.gemm_a8w8_per_token_scale import gemm_a8w8_per_token_scale  # noqa: E402

device = "cpu" if INTERPRET else "cuda"
fp8 = torch.float8_e4m3fnuz
torch.manual_seed(0)
M, N = 3, 144
base = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 32,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 2,
    "waves_per_eu": 2,
    "matrix_instr_nonkdim": 16,
    "cache_modifier": None,
}
for K, bk, splits in ((176, 64, 1), (176, 64, 2), (256, 64, 2), (192, 64, 2), (160, 64, 2)):
    x = torch.randn(M, K).to(fp8)
    w = torch.randn(N, K).to(fp8)
    xs = torch.rand(M, 1) + 0.5
    ws = torch.rand(N, 1) + 0.5
    cfg = {**base, "BLOCK_SIZE_K": bk, "NUM_KSPLIT": splits}
    y = gemm_a8w8_per_token_scale(
        x.to(device), w.to(device), xs.to(device), ws.to(device), torch.float32, config=cfg
    ).cpu()
    ref = (x.double() @ w.double().t()) * xs.double() * ws.double().t()
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    piece = -(-K // splits)
    print(
        f"K={K} BLOCK_SIZE_K={bk} NUM_KSPLIT={splits} (piece {piece}, "
        f"{'whole' if piece % bk == 0 else 'NOT whole'} blocks): max rel error {err:.2e}"
    )
