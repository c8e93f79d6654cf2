"""Triton's interpreter reads FP8 NaN codes as finite numbers: an artifact of the
interpreter, not of aiter. Standalone: imports only aiter's Triton modules, triton, torch
and numpy.

Run: TRITON_INTERPRET=1 python interpreter_fp8_nan_codes.py [gfx942|gfx950]   (or on that
GPU without TRITON_INTERPRET). aiter's gemm_a8w8 multiplies an FP8 activation whose row 1
holds the format's NaN code (e4m3fn 0x7F on gfx950, e4m3fnuz 0x80 on gfx942) by an FP8
weight, scales 1. The formats define those codes as NaN (OCP FP8; the fnuz formats' 0x80),
so row 1 of the product is NaN and the other rows are finite. Under the interpreter the
kernel's `tl.dot` widens its operands with the interpreter's bit conversion, which knows no
NaN encodings (0x7F reads as 480, 0x80 as -0): row 1 comes out finite. With that one
widening corrected (NaN codes to NaN, every other code unchanged), row 1 is NaN and the
other rows are unchanged, bit for bit: the kernel propagates the NaN.
"""

import importlib.util
import os
import sys
import types

import numpy as np
import torch

ARCH = sys.argv[1] if len(sys.argv) > 1 else "gfx950"
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:  # aiter/__init__ probes for ROCm: load the Triton kernels without it
    root = importlib.util.find_spec("aiter").submodule_search_locations[0]
    for name, path in (("aiter", root), ("aiter.ops", os.path.join(root, "ops"))):
        mod = types.ModuleType(name)
        mod.__path__ = [path]
        sys.modules[name] = mod
    import aiter.ops.triton.utils._triton.arch_info as arch_info

    arch_info.get_arch = lambda: ARCH
from aiter.ops.triton.gemm_a8w8 import gemm_a8w8  # noqa: E402

FP8 = {"gfx950": torch.float8_e4m3fn, "gfx942": torch.float8_e4m3fnuz}[ARCH]
device = "cpu" if INTERPRET else "cuda"
M, N, K = 4, 128, 256
gen = torch.Generator().manual_seed(0)
x = (torch.randn(M, K, generator=gen) * 3).to(FP8)
w = (torch.randn(N, K, generator=gen) * 3).to(FP8)
x[1, 5] = torch.tensor(float("nan")).to(FP8)
print(f"{ARCH}: activation code at [1, 5]: {int(x[1, 5].view(torch.uint8)):#04x} (NaN in {FP8})")
ones_m = torch.ones(M, 1, device=device)
ones_n = torch.ones(1, N, device=device)


def run() -> torch.Tensor:
    return gemm_a8w8(x.to(device), w.to(device), ones_m, ones_n, None, torch.float32).cpu()


y = run()
print(f"row 1: {int(y[1].isnan().sum())}/{N} NaN (expected {N}/{N}); first {float(y[1, 0])}")
print(f"other rows: {int(y[[0, 2, 3]].isnan().sum())} NaN (expected 0)")
if INTERPRET:
    from triton.runtime import interpreter

    original = interpreter._convert_float
    nan_code = {"fp8e4nv": lambda b: (b & 0x7F) == 0x7F, "fp8e4b8": lambda b: b == 0x80}
    nan_bits = {"fp16": (np.uint16, 0x7E00), "fp32": (np.uint32, 0x7FC00000)}

    def convert_float(data, src, dst, rounding):  # the interpreter's, NaN codes to NaN
        out = original(data, src, dst, rounding)
        if str(src) not in nan_code or str(dst) not in nan_bits:
            return out
        codes = np.frombuffer(data.tobytes(), dtype=np.uint8).reshape(out.shape)
        dtype, bits = nan_bits[str(dst)]
        return np.where(nan_code[str(src)](codes), dtype(bits), out).astype(out.dtype)

    interpreter._convert_float = convert_float
    y_nan = run()
    interpreter._convert_float = original
    keep = [0, 2, 3]
    print(
        f"with NaN codes widened to NaN: row 1 {int(y_nan[1].isnan().sum())}/{N} NaN; other "
        f"rows bit-identical to the interpreter's own: {torch.equal(y_nan[keep], y[keep])}"
    )
