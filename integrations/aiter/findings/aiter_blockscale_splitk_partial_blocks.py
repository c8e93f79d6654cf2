"""aiter gemm_a8w8_blockscale: split-K pieces that are not whole K blocks overlap, so sums
are wrong. Standalone: imports only aiter's Triton modules, triton and torch.

Run: python aiter_blockscale_splitk_partial_blocks.py (on a gfx942/gfx950 GPU; without one
it sets TRITON_INTERPRET=1 and runs the kernels under Triton's interpreter as a gfx950).
Prints the worst relative error per (K, NUM_KSPLIT) against a float64 reference computed
from the same FP8 operands and 128-block scales; exits 0 when a config whose pieces are not
whole 128-wide blocks is wrong (the finding reproduces), 3 when every config is right
(fixed).
"""

import importlib.metadata
import importlib.util
import os
import sys
import types

import torch

if not torch.cuda.is_available():  # no GPU: Triton's interpreter (read when kernels are defined)
    os.environ["TRITON_INTERPRET"] = "1"
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:  # aiter/__init__ probes for ROCm: load the Triton kernels without it
    root = importlib.util.find_spec("aiter").submodule_search_locations[0]
    for name, path in (("aiter", root), ("aiter.ops", os.path.join(root, "ops"))):
        mod = types.ModuleType(name)
        mod.__path__ = [path]
        sys.modules[name] = mod
    import aiter.ops.triton.utils._triton.arch_info as arch_info

    arch_info.get_arch = lambda: "gfx950"
    from triton.runtime import interpreter

    interpreter.interpreter_builder.create_assume = lambda cond: None  # a hint on GPUs
from aiter.ops.triton._triton_kernels.gemm_a8w8_blockscale import _get_config  # noqa: E402
from aiter.ops.triton.gemm_a8w8_blockscale import gemm_a8w8_blockscale  # noqa: E402

print(
    f"amd-aiter {importlib.metadata.version('amd-aiter')}, {'interpreter' if INTERPRET else 'GPU'}"
)
device = "cpu" if INTERPRET else "cuda"
fp8 = torch.float8_e4m3fn
BLOCK = 128  # the scale block (1x128 activation, 128x128 weight) and the kernel's BLOCK_SIZE_K
torch.manual_seed(0)
M, N = 4, 256
blocks = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": BLOCK, "GROUP_SIZE_M": 1}
wrong_partial = False
for K, splits in ((384, 1), (384, 3), (384, 2), (640, 2), (640, 3), (256, 2)):
    x = torch.randn(M, K).to(fp8)
    w = torch.randn(N, K).to(fp8)
    xs = torch.rand(M, K // BLOCK) + 0.5
    ws = torch.rand(N // BLOCK, K // BLOCK) + 0.5
    # aiter's own config for the shape (a copy: the wrapper writes into it), split `splits` ways
    cfg = {**_get_config(M, N, K), **blocks, "NUM_KSPLIT": splits}
    y = gemm_a8w8_blockscale(
        x.to(device), w.to(device), xs.to(device), ws.to(device), torch.float32, config=cfg
    ).cpu()
    xd = x.double() * xs.double().repeat_interleave(BLOCK, 1)
    wd = w.double() * ws.double().repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)
    ref = xd @ wd.t()
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    piece = -(-K // splits)
    whole = piece % BLOCK == 0
    if not whole and not err < 1e-6:  # NaN counts as wrong
        wrong_partial = True
    print(
        f"K={K} ({K // BLOCK} blocks) NUM_KSPLIT={splits} (piece {piece}, "
        f"{'whole' if whole else 'NOT whole'} blocks): max rel error {err:.2e}"
    )
sys.exit(0 if wrong_partial else 3)
