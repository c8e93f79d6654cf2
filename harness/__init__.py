"""qharness: numerical-correctness harness for low-precision quantized inference.

The front door for plugin authors (paths, MoE paths, quantizers, loaders, engine adapters):
every name in ``__all__`` is importable from ``harness`` itself, e.g.
``from harness import LinearPathBase, Numerics, Support, quantize_activation``. Adapters
import from here and nowhere deeper; the deep modules stay importable, but their layout
may change between releases, these names may not.

Importing ``harness`` is cheap: each name is imported from its module on first use
(PEP 562), so ``import harness`` loads neither torch nor any path, registry or probe.

``harness.quantize`` is both the function (here) and the older module of the same name
(``from harness.quantize import quantize_activation``, deprecated: importing it warns);
once that module is imported it takes the name, and calling it quantizes as the function
does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.version import __version__

# The public names, grouped by the module that defines each: the one listing, from which
# `__all__` and the lazy lookup are derived (the TYPE_CHECKING imports below are held to
# it by tests/api/test_front_door.py).
_EXPORTS: dict[str, tuple[str, ...]] = {
    # schemes and specs
    "harness.core.spec": (
        "QuantSpec",
        "WHOLE",
        "MX_BLOCK",
        "FP8_BLOCK",
        "NVFP4_BLOCK",
    ),
    "harness.core.schemes": (
        "Scheme",
        "SCHEMES",
        "get_scheme",
        "register_scheme",
        "mx_spec",
    ),
    # quantize
    "harness.core.quantize": (
        "quantize",
        "quantize_activation",
        "QuantizedTensor",
        "QuantizedLinear",
    ),
    "harness.core.scales": ("compute_global_scale",),
    # element formats and scale codes
    "harness.core.formats": (
        "encode",
        "decode",
        "e8m0_encode",
        "e8m0_decode",
        "pack_fp4",
        "unpack_fp4",
    ),
    "harness.core.scale_formats": (
        "ScaleFormat",
        "SCALE_FORMATS",
        "get_scale_format",
        "FP32",
        "E8M0",
        "E4M3",
        "E4M3_X_FP32",
    ),
    # the execution model
    "harness.paths.base": (
        "Support",
        "LinearProblem",
        "LinearPath",
        "LinearPathBase",
        "PathBase",
        "Numerics",
        "KernelContract",
        "OperandContract",
    ),
    "harness.paths.kernel": (
        "Kernel",
        "ActivationScales",
        "MixedOperands",
        "OperandSide",
        "SpecCheck",
    ),
    "harness.paths.dispatch": (
        "DispatchTable",
        "DispatchRow",
        "EMULATE",
        "ANY_PLATFORM",
        "choose",
        "foreign_fp8_flavour",
        "dispatch_problems",
        "rest_emulated",
        "Choice",
    ),
    # the operands a path feeds its kernel (optional capability, checked bit for bit)
    "harness.paths.operands": (
        "QuantizedOperands",
        "ExposesOperands",
    ),
    "harness.linear.operands": (
        "expected_operands",
        "operand_checks",
    ),
    # checking one's own kernel against the goldens (docs/OWN-KERNEL.md)
    "harness.linear.paths": (
        "get_path",
        "linear_paths",
    ),
    "harness.linear.cases": ("load_linear_case",),
    "harness.linear.checks": (
        "expected_output",
        "linear_checks",
    ),
    # known engine findings
    "harness.paths.findings": (
        "KnownFinding",
        "FindingCase",
    ),
    # mixture of experts
    "harness.moe.paths.base": (
        "MoEPath",
        "MoEProblem",
        "SelfRoutingMoEPath",
        "routes_itself",
    ),
    "harness.moe.dispatch": ("MOE_SCHEMES",),
    "harness.moe.model": (
        "MoELayer",
        "MoETrace",
        "run_fused_moe",
        "QuantizedExperts",
        "Routing",
        "quantize_operand",
        "silu_and_mul",
        "combine",
    ),
    "harness.moe.paths.fused": ("FusedMoEPathBase",),
    "harness.moe.paths.router": ("RouterMoEPathBase",),
    # routing a path does itself (docs/MOE.md)
    "harness.moe.routing": (
        "RoutingSpec",
        "reference_route",
        "SCORING_FUNCTIONS",
        "TIE_BREAKS",
    ),
    # quantizers
    "harness.quantizers.base": ("Quantizer",),
    "harness.quantizers.layout": ("check_scale_layout", "ScaleLayoutError"),
    # checkpoint loading: the loader type and the transforms adapters compose
    "harness.loading.loaders": ("Loader",),
    "harness.loading.checkpoint": ("LinearCheckpoint", "STORED_SCALE_DTYPES"),
    # fused NVFP4 layers: the checkpoint an adapter loads and what it hands back
    "harness.loading.fused_nvfp4": ("FusedNvfp4Checkpoint", "LoadedNvfp4"),
    "harness.loading.transforms": (
        "LoadState",
        "LoadError",
        "loaded_slots",
        "contiguous_kernel_layout",
        "merge_input_scales",
        "normalize_to_platform_fp8",
        "requantize_with_max_scale",
        "scales_to_tile_grid",
    ),
    # platform
    "harness.platform.info": (
        "PlatformInfo",
        "platform_key",
        "detect_platform",
    ),
    # Triton's interpreter on a simulated platform: FP8 NaN codes read as NaN
    "harness.platform.interpreter_fp8": (
        "fp8_nan_codes_read_as_nan",
        "fp8_conversion_rounded_to_nearest_even",
        "ConvertedToFP8",
    ),
    # errors
    "harness.errors": ("QHarnessError",),
    "harness.registry": ("PluginError", "PluginFamily"),
}
_HOME: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}
if len(_HOME) != sum(len(names) for names in _EXPORTS.values()):  # checked where written
    raise ImportError("harness._EXPORTS lists one name under two modules")

__all__ = ["__version__", *sorted(_HOME)]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from harness.core.formats import (
        decode,
        e8m0_decode,
        e8m0_encode,
        encode,
        pack_fp4,
        unpack_fp4,
    )
    from harness.core.quantize import (
        QuantizedLinear,
        QuantizedTensor,
        quantize,
        quantize_activation,
    )
    from harness.core.scale_formats import (
        E4M3,
        E4M3_X_FP32,
        E8M0,
        FP32,
        SCALE_FORMATS,
        ScaleFormat,
        get_scale_format,
    )
    from harness.core.scales import compute_global_scale
    from harness.core.schemes import SCHEMES, Scheme, get_scheme, mx_spec, register_scheme
    from harness.core.spec import FP8_BLOCK, MX_BLOCK, NVFP4_BLOCK, WHOLE, QuantSpec
    from harness.errors import QHarnessError
    from harness.linear.cases import load_linear_case
    from harness.linear.checks import expected_output, linear_checks
    from harness.linear.operands import expected_operands, operand_checks
    from harness.linear.paths import get_path, linear_paths
    from harness.loading.checkpoint import STORED_SCALE_DTYPES, LinearCheckpoint
    from harness.loading.fused_nvfp4 import FusedNvfp4Checkpoint, LoadedNvfp4
    from harness.loading.loaders import Loader
    from harness.loading.transforms import (
        LoadError,
        LoadState,
        contiguous_kernel_layout,
        loaded_slots,
        merge_input_scales,
        normalize_to_platform_fp8,
        requantize_with_max_scale,
        scales_to_tile_grid,
    )
    from harness.moe.dispatch import MOE_SCHEMES
    from harness.moe.model import (
        MoELayer,
        MoETrace,
        QuantizedExperts,
        Routing,
        combine,
        quantize_operand,
        run_fused_moe,
        silu_and_mul,
    )
    from harness.moe.paths.base import (
        MoEPath,
        MoEProblem,
        SelfRoutingMoEPath,
        routes_itself,
    )
    from harness.moe.paths.fused import FusedMoEPathBase
    from harness.moe.paths.router import RouterMoEPathBase
    from harness.moe.routing import (
        SCORING_FUNCTIONS,
        TIE_BREAKS,
        RoutingSpec,
        reference_route,
    )
    from harness.paths.base import (
        KernelContract,
        LinearPath,
        LinearPathBase,
        LinearProblem,
        Numerics,
        OperandContract,
        PathBase,
        Support,
    )
    from harness.paths.dispatch import (
        ANY_PLATFORM,
        EMULATE,
        Choice,
        DispatchRow,
        DispatchTable,
        choose,
        dispatch_problems,
        foreign_fp8_flavour,
        rest_emulated,
    )
    from harness.paths.findings import FindingCase, KnownFinding
    from harness.paths.kernel import (
        ActivationScales,
        Kernel,
        MixedOperands,
        OperandSide,
        SpecCheck,
    )
    from harness.paths.operands import ExposesOperands, QuantizedOperands
    from harness.platform.info import PlatformInfo, detect_platform, platform_key
    from harness.platform.interpreter_fp8 import (
        ConvertedToFP8,
        fp8_conversion_rounded_to_nearest_even,
        fp8_nan_codes_read_as_nan,
    )
    from harness.quantizers.base import Quantizer
    from harness.quantizers.layout import ScaleLayoutError, check_scale_layout
    from harness.registry import PluginError, PluginFamily
