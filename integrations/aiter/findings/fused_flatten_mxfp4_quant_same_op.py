"""aiter fused_flatten_mxfp4_quant quantizes with the same _mxfp4_quant_op as
dynamic_mxfp4_quant, so it shares that quantizer's edge-block behaviour: NaN elements left
out of the block amax (finite scale), an Inf amax giving scale 2^127 (0xFE), an amax at
or above 1.75 * 2^127 giving 2^127 where the "even" rule gives 2^126 (0xFD), and, at the
bottom of the E8M0 range (scale 2^-127), the element 3.4999998 * 2^-127 coded 4.0 (0x6)
instead of 3.0 (0x5) and 1.7499999 * 2^-127 coded 2.0 (0x4) instead of 1.5 (0x3). This
script runs both entry points on the same blocks and prints their bytes side by side.
Standalone: aiter's Triton modules, triton, torch.

Run: TRITON_INTERPRET=1 python fused_flatten_mxfp4_quant_same_op.py (or on a GPU without it).
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
from aiter.ops.triton.fused_mxfp4_quant import fused_flatten_mxfp4_quant  # noqa: E402
from aiter.ops.triton.quant import dynamic_mxfp4_quant  # noqa: E402

device = "cpu" if INTERPRET else "cuda"
F32_MAX = torch.finfo(torch.float32).max
below_carry = torch.nextafter(torch.tensor(1.75 * 2.0**-126), torch.tensor(0.0)).item()
rows = {  # block -> (first element, the E8M0 byte OCP MX / the even rule gives)
    "NaN with 1.0": (float("nan"), 255),
    "+Inf with 1.0": (float("inf"), 255),
    "float32 max": (F32_MAX, 253),
    "1.75 * 2^127": (1.75 * 2.0**127, 253),
    "nextdown(1.75 * 2^-126)": (below_carry, 0),
}
x = torch.ones(len(rows), 32)
for i, (first, _) in enumerate(rows.values()):
    x[i, 0] = first
# the last block's other elements: 1.7499999 * 2^-127, which rounds to 1.5 (code 0x3)
x[-1, 1:] = below_carry / 2
x = torch.cat([x, torch.randn(3, 32, generator=torch.Generator().manual_seed(0))])

packed_f, scale_f = fused_flatten_mxfp4_quant(x.unsqueeze(1).to(device))
packed_d, scale_d = dynamic_mxfp4_quant(x.to(device))
packed_f, scale_f, packed_d, scale_d = (t.cpu() for t in (packed_f, scale_f, packed_d, scale_d))
print(
    "codes identical:",
    torch.equal(packed_f, packed_d),
    "scales identical:",
    torch.equal(scale_f.contiguous(), scale_d[:, : scale_f.shape[1]].contiguous()),
)
for i, (name, (_, want)) in enumerate(rows.items()):
    code0 = int(packed_f[i, 0]) & 0xF
    code1 = int(packed_f[i, 0]) >> 4
    print(
        f"{name:24}: fused scale byte {int(scale_f[i, 0]):3} (dynamic {int(scale_d[i, 0]):3},"
        f" expected {want}), element 0 code {code0:#x}, element 1 code {code1:#x}"
    )
