"""aiter gemm_a8wfp4: `_get_config` writes each shape's split-K fields into the tuned config
dict it shares between shapes and hands out from an lru_cache, so the config a shape gets
depends on which shapes ran before it. Standalone: imports only aiter's Triton modules,
triton and torch.

Run: TRITON_INTERPRET=1 python a8wfp4_config_state.py   (or on a gfx950 GPU without
TRITON_INTERPRET). Part 1 prints the config for (M=8, N=64, K=4096) before and after a call
for K=128. Part 2 runs gemm_a8wfp4 with aiter's own config (config=None) for K=4096 once
fresh and once after a K=128 call, against a float64 reference from the same operands.
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
from aiter.ops.triton._triton_kernels.gemm_a8wfp4 import _get_config  # noqa: E402
from aiter.ops.triton.gemm_a8wfp4 import gemm_a8wfp4  # noqa: E402

device = "cpu" if INTERPRET else "cuda"
FIELDS = ("BLOCK_SIZE_K", "NUM_KSPLIT", "SPLITK_BLOCK_SIZE")
M, N, BIG, SMALL = 8, 64, 4096, 128

# Part 1: the config object for one shape changes when another shape is asked for.
big = _get_config(M, N, BIG)
print(f"K={BIG} config:", {f: big[f] for f in FIELDS})
small = _get_config(M, N, SMALL)
print(f"K={SMALL} config:", {f: small[f] for f in FIELDS}, "same dict object:", small is big)
again = _get_config(M, N, BIG)
print(f"K={BIG} config again (lru_cache hit):", {f: again[f] for f in FIELDS})
_get_config.cache_clear()
for d in _get_config._config_dict.values():  # undo the mutation for part 2
    d.pop("SPLITK_BLOCK_SIZE", None)
del _get_config._config_dict

# Part 2: the numerical consequence with config=None (aiter picks the config).
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float64)
E2M1 = torch.cat([E2M1, -E2M1])
torch.manual_seed(0)


def operands(k: int) -> tuple[torch.Tensor, ...]:
    x = (torch.randn(M, k) * 4).to(torch.float8_e4m3fn)
    codes = torch.randint(0, 16, (N, k), dtype=torch.uint8)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # element 2i in the low nibble
    w_scales = torch.randint(124, 131, (N, k // 32), dtype=torch.uint8)  # E8M0 2^-3..2^3
    x_scales = torch.rand(M, 1) + 0.5
    w = E2M1[codes.long()] * torch.exp2(w_scales.double() - 127).repeat_interleave(32, dim=1)
    ref = (x.double() @ w.t()) * x_scales.double()
    return x, packed, x_scales, w_scales, ref


def run(k: int) -> float:
    x, packed, x_scales, w_scales, ref = operands(k)
    y = torch.empty(M, N, dtype=torch.float32, device=device)
    dev = [t.to(device) for t in (x, packed, x_scales, w_scales)]
    gemm_a8wfp4(dev[0], dev[1], y, dev[2], dev[3], torch.float32)
    return ((y.cpu().double() - ref).abs().max() / ref.abs().max()).item()


print(f"K={BIG} fresh: max rel error {run(BIG):.2e}")
run(SMALL)
print(f"K={BIG} after a K={SMALL} call: max rel error {run(BIG):.2e}")
