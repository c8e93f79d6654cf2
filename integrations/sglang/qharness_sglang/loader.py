"""Importing SGLang's Triton FP8 module on a simulated ROCm GPU, without the package
``__init__``s and the serving stack they pull in.

``sglang.kernels.ops.quantization.fp8_kernel`` imports five names from SGLang's serving
utilities (``sglang.srt.utils``: platform probes and ``ceil_align``; its package imports
CUDA, ZMQ, FastAPI and more), one from ``sglang.kernels.jit.utils`` (a CUDA JIT probe),
``register_fake_if_exists`` from ``sglang.srt.utils.patch_torch``, and decides its FP8
flavour at import by ``is_fp8_fnuz()``: ``"gfx94" in
torch.cuda.get_device_properties(0).gcnArchName`` when ``is_hip()``. On a simulated
platform (and only there) `sglang_fp8_kernel` therefore registers:

1. bare package modules for ``sglang``, ``sglang.srt``, ``sglang.kernels``,
   ``sglang.kernels.ops``, ``sglang.kernels.ops.quantization`` and ``sglang.kernels.jit``
   (``__path__`` the installed folders, no ``__init__`` run);
2. stub ``sglang.srt.utils``: ``is_hip`` True (a ROCm GPU), ``is_cuda``/``is_musa``/
   ``is_xpu`` False, ``ceil_align`` as SGLang defines it;
3. stub ``sglang.srt.utils.patch_torch.register_fake_if_exists``: a no-op decorator (it
   registers fake tensors for ``torch.compile``, MUSA only here);
4. stub ``sglang.kernels.jit.utils``: ``is_arch_support_pdl`` False, ``is_hip_runtime`` True,
   ``is_musa_runtime`` False, ``get_jit_cuda_arch`` refusing (CUDA only);
5. ``torch.cuda.get_device_properties`` answering ``gcnArchName`` = the simulated arch while
   the module imports, so SGLang's own ``is_fp8_fnuz()`` picks the flavour and bound
   (``sglang.srt.environ`` is SGLang's own: standard library only).

``sglang.kernels.ops.gemm.fp8_kernel`` (the block-FP8 Triton GEMM) imports more of the
serving stack; `sglang_gemm_kernel` registers, on a simulated platform only, besides the
above:

6. bare package modules ``sglang.srt.layers`` and ``sglang.kernels.ops.gemm``;
7. stub ``sglang.srt.layers.deep_gemm_wrapper``: ``ENABLE_JIT_DEEPGEMM`` False (DeepGEMM
   is CUDA only);
8. stub ``sglang.srt.runtime_context.get_platform``: a platform whose ``is_sm90``,
   ``is_sm100``, ``is_sm120`` and ``is_blackwell`` are False (a ROCm GPU);
9. stub ``sglang.srt.utils.custom_op.register_custom_op``: a no-op decorator (it registers
   the DeepGEMM wrappers as torch ops; they are never called here);
10. in the ``sglang.srt.utils`` stub: ``is_gfx1250_supported`` False, ``get_device_name``
    the simulated GPU's name as ``torch.cuda.get_device_name`` reports it on ROCm
    (``ROCM_DEVICE_NAMES``: it names the tuned config files), ``get_device_core_count``
    its compute units, ``log_info_on_rank0`` logging.

The module's FP8 state is fixed at import: one simulated arch per process (the harness
runs one per process). Everything stubbed is listed in docs/ENGINES-ADAPTERS.md.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from harness import PlatformInfo, Support

SGLANG_ARCHS: frozenset[str] = frozenset({"gfx942", "gfx950"})
FP8_MODULE = "sglang.kernels.ops.quantization.fp8_kernel"
GEMM_MODULE = "sglang.kernels.ops.gemm.fp8_kernel"
BARE_PACKAGES = (
    "sglang",
    "sglang.srt",
    "sglang.srt.layers",
    "sglang.kernels",
    "sglang.kernels.ops",
    "sglang.kernels.ops.quantization",
    "sglang.kernels.ops.gemm",
    "sglang.kernels.jit",
)
# torch.cuda.get_device_name(0) on ROCm, and the compute units: the name picks SGLang's
# tuned GEMM config files (configs/N=...,device_name=AMD_Instinct_MI300X,...json).
ROCM_DEVICE_NAMES: dict[str, tuple[str, int]] = {
    "gfx942": ("AMD Instinct MI300X", 304),
    "gfx950": ("AMD Instinct MI355X", 256),
}


def sglang_root() -> str:
    """The installed ``sglang`` folder, found without running its ``__init__`` (also once
    `_install_stubs` has registered the bare package, which has no ``__spec__``)."""
    module = sys.modules.get("sglang")
    if module is not None and getattr(module, "__path__", None):
        return str(next(iter(module.__path__)))
    spec = importlib.util.find_spec("sglang")  # locates the package, runs nothing
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("sglang is not installed")
    return next(iter(spec.submodule_search_locations))


def _module(name: str, path: str | None = None, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [path]
        module.__package__ = name
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _no_cuda_jit() -> Any:
    raise RuntimeError("sglang.kernels.jit: CUDA only (stubbed on a simulated ROCm GPU)")


def _install_stubs(arch: str) -> None:
    root = sglang_root()
    device_name, compute_units = ROCM_DEVICE_NAMES[arch]
    for name in BARE_PACKAGES:
        if name not in sys.modules:
            _module(name, os.path.join(root, *name.split(".")[1:]))
    _module(
        "sglang.srt.utils",
        os.path.join(root, "srt", "utils"),
        is_hip=lambda: True,
        is_cuda=lambda: False,
        is_musa=lambda: False,
        is_xpu=lambda: False,
        ceil_align=lambda x, y: (x + y - 1) // y * y,
        is_gfx1250_supported=lambda: False,
        get_device_name=lambda device_id=0: device_name,
        get_device_core_count=lambda device_id=0: compute_units,
        log_info_on_rank0=lambda logger, msg: logger.info(msg),
    )
    _module("sglang.srt.utils.patch_torch", register_fake_if_exists=lambda name: lambda fn: fn)
    _module(
        "sglang.srt.utils.custom_op",
        register_custom_op=lambda *args, **kwargs: lambda fn: fn,
    )
    _module("sglang.srt.layers.deep_gemm_wrapper", ENABLE_JIT_DEEPGEMM=False)
    rocm = types.SimpleNamespace(is_sm90=False, is_sm100=False, is_sm120=False, is_blackwell=False)
    _module("sglang.srt.runtime_context", get_platform=lambda: rocm)
    _module(
        "sglang.kernels.jit.utils",
        is_arch_support_pdl=lambda: False,
        is_hip_runtime=lambda: True,
        is_musa_runtime=lambda: False,
        get_jit_cuda_arch=_no_cuda_jit,
    )


@contextmanager
def _device_properties(arch: str) -> Iterator[None]:
    original = torch.cuda.get_device_properties
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(  # type: ignore[assignment]
        gcnArchName=arch
    )
    try:
        yield
    finally:
        torch.cuda.get_device_properties = original  # type: ignore[assignment]


def _sglang_module(name: str, platform: PlatformInfo) -> Any:
    """SGLang's module ``name`` as this platform runs it (module docstring)."""
    if not platform.simulated:
        return importlib.import_module(name)  # a ROCm install: SGLang as it is
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("SGLang on a simulated platform needs TRITON_INTERPRET=1")
    if name not in sys.modules:
        if "sglang.srt.utils" not in sys.modules:
            _install_stubs(platform.arch)
        with _device_properties(platform.arch):
            importlib.import_module(name)
    return sys.modules[name]


def sglang_fp8_kernel(platform: PlatformInfo) -> Any:
    """SGLang's quantization ``fp8_kernel`` module (the per-token-group FP8 quantizer)."""
    return _sglang_module(FP8_MODULE, platform)


def sglang_gemm_kernel(platform: PlatformInfo) -> Any:
    """SGLang's GEMM ``fp8_kernel`` module (the block-FP8 Triton GEMM)."""
    return _sglang_module(GEMM_MODULE, platform)


def platform_support(name: str, platform: PlatformInfo) -> Support:
    """Where an SGLang Triton path runs: a ROCm GPU, or a simulated gfx942/gfx950."""
    if platform.simulated not in (None, "triton-interpret"):
        return Support.no(f"{name}: runs on ROCm or under Triton's interpreter")
    if platform.simulated is None and platform.device != "rocm":
        return Support.no(
            f"{name}: SGLang's Triton kernels need a ROCm GPU or a simulated one "
            "(harness run --simulate triton-interpret:gfx942|gfx950)"
        )
    if platform.arch not in SGLANG_ARCHS:
        return Support.no(f"{name}: simulated for gfx942 and gfx950 only, not {platform.arch}")
    return Support.yes()
