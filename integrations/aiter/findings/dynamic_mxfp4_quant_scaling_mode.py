"""aiter dynamic_mxfp4_quant: `scaling_mode` is accepted but not passed to the kernel, so
Quark's "floor" and "ceil" rules give "even" scales. Standalone: aiter's Triton modules,
triton, torch.

Run: TRITON_INTERPRET=1 python dynamic_mxfp4_quant_scaling_mode.py (or on a GPU without it).
Two blocks of 32: amax 7 = 1.75 * 2^2 and amax 5 = 1.25 * 2^2. With e2m1's emax 2, Quark's
rules (quark.torch.quantization.observer: even_round, floor(log2 amax) - emax,
ceil(log2 amax) - emax) give scale exponents even 1 / 0, floor 0 / 0, ceil 1 / 1: E8M0
bytes 128 / 127, 127 / 127, 128 / 128.
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
x = torch.ones(1, 64)
x[0, 0], x[0, 32] = 7.0, 5.0
expected = {"even": [128, 127], "floor": [127, 127], "ceil": [128, 128]}
for mode, want in expected.items():
    _, scale = dynamic_mxfp4_quant(x.to(device), scaling_mode=mode)
    got = scale.cpu()[0, :2].tolist()
    print(f"scaling_mode={mode!r}: scale bytes {got}, Quark's rule gives {want}")
