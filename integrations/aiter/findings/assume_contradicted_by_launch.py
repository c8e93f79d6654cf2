"""aiter's split-K GEMM wrappers launch kernels with arguments that contradict the kernels'
own `tl.assume` statements. Standalone: imports only aiter's Triton modules, triton, torch.

Run: TRITON_INTERPRET=1 python assume_contradicted_by_launch.py
Triton's interpreter evaluates tl.assume as an assertion; on a GPU it is an llvm.assume hint,
whose violation is undefined behaviour the compiler may exploit (not observed to miscompute).
Prints, per wrapper, the first false assumption the interpreter meets.
"""

import importlib.util
import os
import sys
import types

import torch

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
root = importlib.util.find_spec("aiter").submodule_search_locations[0]
for name, path in (("aiter", root), ("aiter.ops", os.path.join(root, "ops"))):
    mod = types.ModuleType(name)
    mod.__path__ = [path]
    sys.modules[name] = mod
import aiter.ops.triton.utils._triton.arch_info as arch_info  # noqa: E402

arch_info.get_arch = lambda: "gfx942"
from aiter.ops.triton.gemm_a8w8_blockscale import gemm_a8w8_blockscale  # noqa: E402
from aiter.ops.triton.gemm_a8w8_per_token_scale import gemm_a8w8_per_token_scale  # noqa: E402

fp8 = torch.float8_e4m3fnuz
M, N, K = 8, 128, 256
x = torch.randn(M, K).to(fp8)
w = torch.randn(N, K).to(fp8)
cases = {
    "gemm_a8w8_blockscale (NUM_KSPLIT=1: stride_ck=0, kernel assumes stride_ck > 0)": lambda: (
        gemm_a8w8_blockscale(x, w, torch.ones(M, K // 128), torch.ones(N // 128, K // 128))
    ),
    "gemm_a8w8_per_token_scale (NUM_KSPLIT=1: stride_ck=0)": lambda: gemm_a8w8_per_token_scale(
        x, w, torch.ones(M, 1), torch.ones(N, 1)
    ),
    "gemm_a8w8_per_token_scale (NUM_KSPLIT=2: reduce kernel assumes pid_m > 0)": lambda: (
        gemm_a8w8_per_token_scale(
            x,
            w,
            torch.ones(M, 1),
            torch.ones(N, 1),
            config={
                "BLOCK_SIZE_M": 16,
                "BLOCK_SIZE_N": 32,
                "BLOCK_SIZE_K": 64,
                "GROUP_SIZE_M": 1,
                "NUM_KSPLIT": 2,
                "num_warps": 4,
                "num_stages": 2,
                "waves_per_eu": 2,
                "matrix_instr_nonkdim": 16,
                "cache_modifier": None,
            },
        )
    ),
}
for label, run in cases.items():
    try:
        run()
        print(f"{label}: no false assumption")
    except Exception as exc:  # the interpreter's InterpreterError
        print(f"{label}: {type(exc).__name__}: {exc}")
