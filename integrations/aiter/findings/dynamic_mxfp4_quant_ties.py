"""aiter dynamic_mxfp4_quant: FP4 element ties round away from zero, not to even. The kernel's
comment says so ("rounding nearest with tie breaking up"), but aiter's tracker calls it a
bug (ROCm/aiter#974, fixed on main by #975), so it is a finding, no longer a convention.
Standalone: aiter's Triton modules, triton, torch.

Run: TRITON_INTERPRET=1 python dynamic_mxfp4_quant_ties.py (or on a GPU without it).
One block of 32 with amax 6 (scale 2^0 under every rule) holding every e2m1 tie.
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
VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # e2m1 magnitudes, code = index
ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
x = torch.zeros(1, 32)
x[0, 0] = 6.0  # amax: scale 2^0
x[0, 1 : 1 + len(ties)] = torch.tensor(ties)
x[0, 8 : 8 + len(ties)] = -torch.tensor(ties)
packed, scale = dynamic_mxfp4_quant(x.to(device))
packed = packed.cpu()
codes = torch.stack([packed & 0xF, packed >> 4], -1).flatten(-2)[0]
print("scale byte", int(scale.cpu()[0, 0]), "(127 = 2^0)")
for i, t in enumerate(ties):
    got = VALUES[int(codes[1 + i]) & 7]
    below, above = max(v for v in VALUES if v < t), min(v for v in VALUES if v > t)
    even = below if VALUES.index(below) % 2 == 0 else above
    print(
        f"{t:5} -> {got:4}   round-to-nearest-even: {even:4}   "
        f"neg: {-VALUES[int(codes[8 + i]) & 7]}"
    )
