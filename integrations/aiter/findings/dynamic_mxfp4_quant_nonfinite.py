"""aiter dynamic_mxfp4_quant on blocks at the edges of float32: NaN elements are left out of
the block amax (a finite scale; the NaN becomes the code +-6), an Inf amax gives scale 2^127
(0xFE), and an amax whose "even" rounding carries past float32's exponent range (>= 1.75 *
2^127) gives 2^127 instead of 2^126. OCP MX v1.0: a block holding NaN or Inf gets the NaN
scale 0xFF; the even rule rounds 1.75 * 2^127 up to 2^128, scale exponent 128 - emax 2 = 126.
Standalone: aiter's Triton modules, triton, torch.

Run: TRITON_INTERPRET=1 python dynamic_mxfp4_quant_nonfinite.py (or on a GPU without it).
"""

import importlib.util
import os
import sys
import types

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:
    root = importlib.util.find_spec("aiter").submodule_search_locations[0]
    for name, path in (("aiter", root), ("aiter.ops", os.path.join(root, "ops"))):
        mod = types.ModuleType(name)
        mod.__path__ = [path]
        sys.modules[name] = mod
    import aiter.ops.triton.utils._triton.arch_info as arch_info

    arch_info.get_arch = lambda: "gfx950"
from aiter.ops.triton.quant import dynamic_mxfp4_quant  # noqa: E402

device = "cpu" if INTERPRET else "cuda"
F32_MAX = torch.finfo(torch.float32).max
rows = {  # block -> (first element, the E8M0 byte OCP MX / the even rule gives)
    "NaN with 1.0": (float("nan"), 255),
    "+Inf with 1.0": (float("inf"), 255),
    "float32 max": (F32_MAX, 253),
    "1.75 * 2^127": (1.75 * 2.0**127, 253),
}
x = torch.ones(len(rows), 32)
for i, (first, _) in enumerate(rows.values()):
    x[i, 0] = first
packed, scale = dynamic_mxfp4_quant(x.to(device))
packed, scale = packed.cpu(), scale.cpu()
for i, (name, (_, want)) in enumerate(rows.items()):
    code0 = int(packed[i, 0]) & 0xF
    print(
        f"{name:14}: scale byte {int(scale[i, 0]):3} (expected {want}), element 0 code {code0:#x}"
    )
