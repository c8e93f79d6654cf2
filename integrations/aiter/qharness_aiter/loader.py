"""Importing aiter's Triton kernels: unchanged on a ROCm GPU, and on a simulated platform
without the package ``__init__`` (which probes for a ROCm toolchain) and with the arch the
platform simulates.

On a simulated platform (``PlatformInfo.simulated == "triton-interpret"``) two workarounds
are active, and only there:

1. ``aiter`` and ``aiter.ops`` are registered as bare package modules whose ``__path__`` is
   the installed folder, so ``aiter.ops.triton.<kernel>`` imports its own files (and
   ``aiter.ops.triton``'s ``__init__``) without running ``aiter/__init__.py``.
2. ``aiter.ops.triton.utils._triton.arch_info.get_arch`` (which asks the GPU driver) returns
   the simulated arch, so aiter's own branches (``get_device()`` naming its tuned-config
   files, ``is_fp4_avail()``) decide as on that GPU.
3. ``aiter.dtypes`` (which the package ``__init__`` imports from ``aiter/utility/dtypes.py``,
   whose import asks ``rocminfo`` for the arch) is a bare module holding ``fp8``, the FP8
   dtype aiter's table ``defaultDtypes`` names for the simulated arch (`AITER_FP8`), so the
   kernels that default to ``aiter.dtypes.fp8`` (``fused_fp8_quant``) import.

On real hardware `aiter_triton` imports the installed package as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any

import torch

from harness import PlatformInfo, Support

AITER_ARCHS: frozenset[str] = frozenset({"gfx942", "gfx950"})  # aiter's _ARCH_TO_DEVICE
# aiter/utility/dtypes.py: defaultDtypes = {"gfx942": {"fp8": torch.float8_e4m3fnuz},
# "gfx950": {"fp8": torch.float8_e4m3fn}}; aiter.dtypes.fp8 is the entry for the GPU's arch.
AITER_FP8: dict[str, torch.dtype] = {
    "gfx942": torch.float8_e4m3fnuz,
    "gfx950": torch.float8_e4m3fn,
}


def _bare_package(name: str, path: str) -> None:
    module = types.ModuleType(name)
    module.__path__ = [path]
    module.__package__ = name
    sys.modules[name] = module


def _simulated_import(arch: str) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError(
            "aiter on a simulated platform needs TRITON_INTERPRET=1 before its kernels import "
            "(harness run --simulate sets it)"
        )
    if "aiter" not in sys.modules:
        spec = importlib.util.find_spec("aiter")  # locates the package, runs nothing
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("aiter (amd-aiter) is not installed")
        root = next(iter(spec.submodule_search_locations))
        _bare_package("aiter", root)
        _bare_package("aiter.ops", os.path.join(root, "ops"))
    package = sys.modules["aiter"]
    dtypes: Any = package.__dict__.setdefault("dtypes", types.ModuleType("aiter.dtypes"))
    dtypes.fp8 = AITER_FP8[arch]
    arch_info = importlib.import_module("aiter.ops.triton.utils._triton.arch_info")
    arch_info.get_arch = lambda: arch


def _simulated_chip_info(arch: str) -> None:
    """``aiter.jit.utils.chip_info`` (which imports aiter's JIT toolchain and asks
    ``rocminfo``) as a bare module whose ``get_gfx`` returns the simulated arch, so
    ``aiter/utility/dtypes.py`` runs as shipped and picks the arch's dtypes."""
    root = sys.modules["aiter"].__path__[0]
    for name in ("aiter.jit", "aiter.jit.utils", "aiter.utility"):
        if name not in sys.modules:
            _bare_package(name, os.path.join(root, *name.split(".")[1:]))
    chip_info = types.ModuleType("aiter.jit.utils.chip_info")
    chip_info.get_gfx = lambda: arch  # type: ignore[attr-defined]
    sys.modules["aiter.jit.utils.chip_info"] = chip_info


def aiter_utility(platform: PlatformInfo, module: str) -> Any:
    """The module ``aiter.utility.<module>`` as this platform runs it (on a simulated
    platform: its ``dtypes`` for the simulated arch, the rest of aiter not imported)."""
    if platform.simulated:
        _simulated_import(platform.arch)
        _simulated_chip_info(platform.arch)
    else:
        importlib.import_module("aiter")
    return importlib.import_module(f"aiter.utility.{module}")


def aiter_triton(platform: PlatformInfo, kernel: str) -> Any:
    """The module ``aiter.ops.triton.<kernel>`` as this platform runs it."""
    if platform.simulated:
        _simulated_import(platform.arch)
    else:
        importlib.import_module("aiter")  # a ROCm install: aiter as it is
    return importlib.import_module(f"aiter.ops.triton.{kernel}")


def platform_support(name: str, platform: PlatformInfo, configs: str) -> Support:
    """Where an aiter path runs: a ROCm GPU, or a simulated gfx942/gfx950 under Triton's
    interpreter; ``configs`` names what aiter tunes per arch (in the skip reason)."""
    if platform.simulated not in (None, "triton-interpret"):
        return Support.no(f"{name}: runs on ROCm or under Triton's interpreter")
    if platform.simulated is None and platform.device != "rocm":
        return Support.no(
            f"{name}: aiter's Triton kernels need a ROCm GPU or a simulated one "
            "(harness run --simulate triton-interpret:gfx942|gfx950)"
        )
    if platform.arch not in AITER_ARCHS:
        return Support.no(
            f"{name}: aiter has {configs} for {', '.join(sorted(AITER_ARCHS))} "
            f"only, not {platform.arch}"
        )
    return Support.yes()
