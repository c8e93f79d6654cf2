"""SGLang 0.5.23 per_token_group_quant_fp8 (Triton, as on ROCm) on groups holding NaN or Inf:
non-finite elements never become an FP8 NaN code, which SGLang's maintainers state as the
kernel family's contract (sgl-project/sglang#31712 review, #32296). The Triton kernel
``_per_token_group_quant_8bit`` takes the group amax with ``tl.max`` (NaN left out) and
clamps with ``tl.clamp`` (``propagate_nan=NONE``: a NaN becomes the lower bound), so:

- a NaN element: finite scale from the other elements, code -fp8_max (0xFE);
- an Inf element: scale Inf, the Inf element -fp8_max (Inf * 0 is NaN, then clamped), its
  finite neighbours 0.

A reference that propagates NaN (x / scale in float32, NaN -> the format's NaN code) gives
the NaN code and a NaN scale instead. Standalone: SGLang's fp8_kernel module (imported
without SGLang's serving stack, a few platform probes stubbed), triton, torch.

Run: python sglang_nonfinite_group_quant.py (on a CPU it sets TRITON_INTERPRET=1 and
simulates a gfx950, e4m3fn; on a ROCm GPU it runs there). Exit 0: the contract holds as
above; 3: a non-finite element reached an FP8 NaN code (changed); 4: cannot run here.
"""

import importlib.metadata
import importlib.util
import os
import sys
import types

import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
spec = importlib.util.find_spec("sglang")
if spec is None:
    print("sglang is not installed")
    sys.exit(4)
if not ON_GPU:  # import fp8_kernel without sglang's __init__s (they pull the serving stack)
    root = spec.submodule_search_locations[0]
    for name in (
        "sglang",
        "sglang.srt",
        "sglang.kernels",
        "sglang.kernels.ops",
        "sglang.kernels.ops.quantization",
        "sglang.kernels.jit",
    ):
        mod = types.ModuleType(name)
        mod.__path__ = [os.path.join(root, *name.split(".")[1:])]
        sys.modules[name] = mod
    utils = types.ModuleType("sglang.srt.utils")
    utils.__path__ = [os.path.join(root, "srt", "utils")]
    utils.is_hip = lambda: True  # a ROCm GPU
    utils.is_cuda = utils.is_musa = utils.is_xpu = lambda: False
    utils.ceil_align = lambda x, y: (x + y - 1) // y * y
    sys.modules["sglang.srt.utils"] = utils
    patch = types.ModuleType("sglang.srt.utils.patch_torch")
    patch.register_fake_if_exists = lambda name: lambda fn: fn
    sys.modules["sglang.srt.utils.patch_torch"] = patch
    jit = types.ModuleType("sglang.kernels.jit.utils")
    jit.is_arch_support_pdl = lambda: False
    jit.is_hip_runtime = lambda: True
    jit.is_musa_runtime = lambda: False
    jit.get_jit_cuda_arch = lambda: None  # CUDA only: never called here
    sys.modules["sglang.kernels.jit.utils"] = jit
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        gcnArchName="gfx950"
    )
from sglang.kernels.ops.quantization import fp8_kernel  # noqa: E402

device = "cuda" if ON_GPU else "cpu"
torch.manual_seed(0)
x = torch.randn(3, 128)
x[1, 5] = float("nan")
x[2, 5] = float("inf")
q, s = fp8_kernel.per_token_group_quant_fp8(x.to(device), 128)
q, s = q.cpu(), s.cpu()
codes = q.view(torch.uint8)
neg_max = int(torch.tensor([-fp8_kernel.fp8_max]).to(fp8_kernel.fp8_dtype).view(torch.uint8))
nan_code = int(torch.tensor([float("nan")]).to(fp8_kernel.fp8_dtype).view(torch.uint8))
version = importlib.metadata.version("sglang")
print(f"sglang {version}, {fp8_kernel.fp8_dtype}, fp8_max {fp8_kernel.fp8_max}")
print(f"finite row : scale {float(s[0, 0]):.6g}")
print(
    f"NaN at [5] : scale {float(s[1, 0]):.6g} (reference: NaN), element 5 code "
    f"{int(codes[1, 5]):#04x} (reference: NaN code {nan_code:#04x}; -fp8_max is {neg_max:#04x})"
)
others = sorted({int(c) for c in codes[2].tolist()} - {int(codes[2, 5])})
print(
    f"Inf at [5] : scale {float(s[2, 0])} (reference: Inf), element 5 code {int(codes[2, 5]):#04x} "
    f"(reference: NaN code {nan_code:#04x}), other codes {[hex(c) for c in others]}"
)
nan_codes = int((codes[1:] == nan_code).sum())
holds = (
    nan_codes == 0
    and int(codes[1, 5]) == neg_max
    and bool(torch.isfinite(s[1, 0]))
    and int(codes[2, 5]) == neg_max
    and bool(torch.isinf(s[2, 0]))
)
print("contract holds: no NaN codes" if holds else f"changed: {nan_codes} NaN codes")
sys.exit(0 if holds else 3)
