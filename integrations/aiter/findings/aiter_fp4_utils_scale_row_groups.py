"""aiter fp4_utils.dynamic_mxfp4_quant(shuffle=True) places the scales of rows past the first
32 with the wrong row-group stride when K is not a multiple of 256. Standalone: imports only
aiter's fp4_utils module, triton and torch.

Run: python aiter_fp4_utils_scale_row_groups.py (on a gfx950 GPU; without one it sets
TRITON_INTERPRET=1 and runs the kernel under Triton's interpreter). Quantizes 64 rows with
a different scale per row, once with shuffle=False (row-major scales) and once with
shuffle=True, undoes aiter's own e8m0_shuffle permutation on the latter and counts the
scales that differ, per 32-row group and K; exits 0 when they differ for a K that is not a
multiple of 256 (the finding reproduces), 3 when they agree everywhere (fixed).
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
ROWS = 64  # two 32-row groups of e8m0_shuffle's layout


def unshuffle(shuffled: torch.Tensor) -> torch.Tensor:
    """Row-major bytes from e8m0_shuffle's layout: the shuffle of the positions 0..n-1
    says where each row-major element went."""
    rows, cols = shuffled.shape
    went_to = fp4_utils.e8m0_shuffle(torch.arange(rows * cols).view(rows, cols)).reshape(-1)
    flat = torch.empty(rows * cols, dtype=torch.uint8)
    flat[went_to] = shuffled.reshape(-1)
    return flat.view(rows, cols)


torch.manual_seed(0)
misplaced = False
for k in (64, 256, 320):
    blocks = k // 32
    x = torch.randn(ROWS, k) * 2.0 ** torch.arange(ROWS).remainder(16).unsqueeze(1)
    with torch.no_grad():
        _, plain = fp4_utils.dynamic_mxfp4_quant(x.to(device), shuffle=False)
        _, shuffled = fp4_utils.dynamic_mxfp4_quant(x.to(device), shuffle=True)
    want = plain.view(torch.uint8).cpu()[:ROWS, :blocks]
    got = unshuffle(shuffled.view(torch.uint8).cpu())[:ROWS, :blocks]
    per_group = [int((got[g : g + 32] != want[g : g + 32]).sum()) for g in (0, 32)]
    misplaced |= k % 256 != 0 and sum(per_group) > 0
    print(f"K={k} ({blocks} scale columns): scales differing in rows 0-31, 32-63: {per_group}")
sys.exit(0 if misplaced else 3)
