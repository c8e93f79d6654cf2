"""aiter dynamic_per_token_quant_fp8_i8: an all-zero row (or one whose amax / DTYPE_MAX
underflows float32) gets scale 0 and NaN codes; a column-strided input is read as if it
were contiguous. Standalone: aiter's Triton modules, triton and torch only.

Run: TRITON_INTERPRET=1 python per_token_fp8_quant_zero_rows.py   (or on a gfx950 GPU without
TRITON_INTERPRET). The kernel computes scale = amax / 448 and codes = (x * (1 / scale)).to(fp8):
for a zero row 1 / 0 = inf and 0 * inf = NaN, on any hardware. It addresses row r at
r * x.stride(0) + column, so a view whose columns are not adjacent (a transpose) is read
from the wrong elements; the wrapper does not check x.stride(1) == 1.
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
    from triton.runtime import interpreter

    interpreter.interpreter_builder.create_assume = lambda cond: None  # a hint on GPUs
from aiter.ops.triton.quant import dynamic_per_token_quant_fp8_i8  # noqa: E402

device = "cpu" if INTERPRET else "cuda"
FP8 = torch.float8_e4m3fn


def run(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    qx = torch.empty(x.shape, dtype=FP8, device=device)
    scale = torch.empty(x.shape[0], dtype=torch.float32, device=device)
    dynamic_per_token_quant_fp8_i8(qx, x.to(device), scale)
    return qx.cpu(), scale.cpu()


x = torch.tensor([[0.0] * 8, [1e-45] + [0.0] * 7, [448.0, 1.0] + [0.0] * 6])
qx, scale = run(x)
for r, name in enumerate(("all-zero row", "row [1e-45, 0, ...]", "row [448, 1, 0, ...]")):
    codes = qx[r].view(torch.uint8).tolist()
    cast = (x[r, :3] * (1 / scale[r])).tolist()  # what the kernel casts to FP8, float32
    print(f"{name:22}: scale {float(scale[r]):.3g}, x * (1 / scale) = {cast}, "
          f"codes {[hex(c) for c in codes[:3]]}")  # fmt: skip
print(
    "(a GPU casts NaN to the NaN code and saturates or NaNs Inf; Triton's interpreter "
    "converts both to finite codes of its own: its artifact, not aiter's)"
)

torch.manual_seed(0)
base = torch.randn(8, 4) * 10
view = base.t()  # [4, 8], stride (1, 4): a transpose
q_view, s_view = run(view)
q_copy, s_copy = run(view.contiguous())
print("transposed view vs its contiguous copy: scales equal", torch.equal(s_view, s_copy),
      "| codes equal", torch.equal(q_view.view(torch.uint8), q_copy.view(torch.uint8)))  # fmt: skip
