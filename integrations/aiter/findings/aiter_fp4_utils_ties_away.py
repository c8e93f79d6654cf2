"""aiter fp4_utils.dynamic_mxfp4_quant (the asm-layout MXFP4 quantizer,
_dynamic_mxfp4_quant_kernel_asm_layout) rounds FP4 ties away from zero. Standalone: imports
only aiter's fp4_utils module, triton and torch.

Run: python aiter_fp4_utils_ties_away.py (on a gfx950 GPU; without one it sets
TRITON_INTERPRET=1 and runs the kernel under Triton's interpreter). One 1x32 block of amax 6
(scale 1 under every E8M0 rule) holding the E2M1 ties 0.25, 1.25, 2.5 and 5: prints each
element's code against round-to-nearest-even's; exits 0 when a tie is rounded away from
zero (the finding reproduces), 3 when every code is the even one (fixed).
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
if INTERPRET:  # aiter/__init__ probes for ROCm: load its modules without it, as a gfx950
    root = importlib.util.find_spec("aiter").submodule_search_locations[0]
    for name in ("aiter", "aiter.jit", "aiter.jit.utils", "aiter.utility"):
        mod = types.ModuleType(name)
        mod.__path__ = [os.path.join(root, *name.split(".")[1:])]
        sys.modules[name] = mod
    chip_info = types.ModuleType("aiter.jit.utils.chip_info")
    chip_info.get_gfx = lambda: "gfx950"  # what rocminfo would say
    sys.modules["aiter.jit.utils.chip_info"] = chip_info

import triton.language as tl  # noqa: E402
from triton.language import core  # noqa: E402

# The kernel indexes its scalar column id as pid_n[None, :]. Triton 3.9 rejects that (its
# rank check ignores the dimension the None adds; triton-lang/triton#6122, #10429 keeps it
# valid): give such an index the shape [1] it had before, every other index unchanged.
_getitem = core.tensor.__getitem__


@core.builtin
def _none_then_slice(self, slices, _semantic=None):
    items = slices.values if isinstance(slices, core.tuple) else slices
    items = list(items) if isinstance(items, (tuple, list)) else [items]
    if len(self.shape) == 0 and [core._unwrap_if_constexpr(s) is None for s in items] == [
        True,
        False,
    ]:
        ret = _semantic.expand_dims(self, 0)
        if ret.dtype == tl.int1 and INTERPRET:  # the interpreter splats int1 as int32
            ret.handle.data = ret.handle.data.astype(bool)
        return ret
    return _getitem(self, slices, _semantic=_semantic)


core.tensor.__getitem__ = _none_then_slice
from aiter.utility import fp4_utils  # noqa: E402

print(
    f"amd-aiter {importlib.metadata.version('amd-aiter')}, {'interpreter' if INTERPRET else 'GPU'}"
)
device = "cpu" if INTERPRET else "cuda"
GRID = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # E2M1 magnitudes by code


def nearest_even(v: float) -> int:
    """The E2M1 code of |v| rounded to nearest, ties to the even code."""
    return min(range(8), key=lambda c: (abs(GRID[c] - abs(v)), c % 2))


values = [6.0, 0.25, 1.25, 2.5, 5.0, 0.75, 1.75, 3.5] + [0.0] * 24
x = torch.tensor([values])
with torch.no_grad():
    packed, _ = fp4_utils.dynamic_mxfp4_quant(x.to(device), shuffle=True)
b = packed.view(torch.uint8).cpu()[0]
codes = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(-1).tolist()
away = 0
for v, code in zip(values[:8], codes[:8], strict=True):
    want = nearest_even(v)
    away += code != want
    print(f"{v:5}: code {code} ({GRID[code & 7]}), nearest even {want} ({GRID[want]})")
sys.exit(0 if away else 3)
