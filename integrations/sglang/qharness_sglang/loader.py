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
BARE_PACKAGES = (
    "sglang",
    "sglang.srt",
    "sglang.kernels",
    "sglang.kernels.ops",
    "sglang.kernels.ops.quantization",
    "sglang.kernels.jit",
)


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


def _install_stubs() -> None:
    root = sglang_root()
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
    )
    _module("sglang.srt.utils.patch_torch", register_fake_if_exists=lambda name: lambda fn: fn)
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


def sglang_fp8_kernel(platform: PlatformInfo) -> Any:
    """SGLang's ``fp8_kernel`` module as this platform runs it (module docstring)."""
    if not platform.simulated:
        return importlib.import_module(FP8_MODULE)  # a ROCm install: SGLang as it is
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("SGLang on a simulated platform needs TRITON_INTERPRET=1")
    if FP8_MODULE not in sys.modules:
        _install_stubs()
        with _device_properties(platform.arch):
            importlib.import_module(FP8_MODULE)
    return sys.modules[FP8_MODULE]


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
