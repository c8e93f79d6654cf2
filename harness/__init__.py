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

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # schemes and specs
    "QuantSpec": "harness.core.spec",
    "WHOLE": "harness.core.spec",
    "MX_BLOCK": "harness.core.spec",
    "FP8_BLOCK": "harness.core.spec",
    "NVFP4_BLOCK": "harness.core.spec",
    "Scheme": "harness.core.schemes",
    "SCHEMES": "harness.core.schemes",
    "get_scheme": "harness.core.schemes",
    "register_scheme": "harness.core.schemes",
    "mx_spec": "harness.core.schemes",
    # quantize
    "quantize": "harness.core.quantize",
    "quantize_activation": "harness.core.quantize",
    "QuantizedTensor": "harness.core.quantize",
    "QuantizedLinear": "harness.core.quantize",
    "compute_global_scale": "harness.core.scales",
    # element formats and scale codes
    "encode": "harness.core.formats",
    "decode": "harness.core.formats",
    "e8m0_encode": "harness.core.formats",
    "e8m0_decode": "harness.core.formats",
    "pack_fp4": "harness.core.formats",
    "unpack_fp4": "harness.core.formats",
    "ScaleFormat": "harness.core.scale_formats",
    "SCALE_FORMATS": "harness.core.scale_formats",
    "get_scale_format": "harness.core.scale_formats",
    "FP32": "harness.core.scale_formats",
    "E8M0": "harness.core.scale_formats",
    "E4M3": "harness.core.scale_formats",
    "E4M3_X_FP32": "harness.core.scale_formats",
    # the execution model
    "Support": "harness.paths.base",
    "LinearProblem": "harness.paths.base",
    "LinearPath": "harness.paths.base",
    "LinearPathBase": "harness.paths.base",
    "PathBase": "harness.paths.base",
    "Numerics": "harness.paths.base",
    "KernelContract": "harness.paths.base",
    "OperandContract": "harness.paths.base",
    "Kernel": "harness.paths.kernel",
    "ActivationScales": "harness.paths.kernel",
    "MixedOperands": "harness.paths.kernel",
    "OperandSide": "harness.paths.kernel",
    "SpecCheck": "harness.paths.kernel",
    "DispatchTable": "harness.paths.dispatch",
    "DispatchRow": "harness.paths.dispatch",
    "EMULATE": "harness.paths.dispatch",
    "ANY_PLATFORM": "harness.paths.dispatch",
    "choose": "harness.paths.dispatch",
    "foreign_fp8_flavour": "harness.paths.dispatch",
    "dispatch_problems": "harness.paths.dispatch",
    # the operands a path feeds its kernel (optional capability, checked bit for bit)
    "QuantizedOperands": "harness.paths.operands",
    "ExposesOperands": "harness.paths.operands",
    "expected_operands": "harness.linear.operands",
    "operand_checks": "harness.linear.operands",
    # checking one's own kernel against the goldens (docs/OWN-KERNEL.md)
    "get_path": "harness.linear.paths",
    "linear_paths": "harness.linear.paths",
    "load_linear_case": "harness.linear.cases",
    "expected_output": "harness.linear.checks",
    "linear_checks": "harness.linear.checks",
    # known engine findings
    "KnownFinding": "harness.paths.findings",
    "FindingCase": "harness.paths.findings",
    # mixture of experts
    "MoEPath": "harness.moe.paths.base",
    "MoEProblem": "harness.moe.paths.base",
    "MOE_SCHEMES": "harness.moe.dispatch",
    "MoELayer": "harness.moe.model",
    "MoETrace": "harness.moe.model",
    "run_fused_moe": "harness.moe.model",
    "QuantizedExperts": "harness.moe.model",
    "FusedMoEPathBase": "harness.moe.paths.fused",
    "rest_emulated": "harness.paths.dispatch",
    "Choice": "harness.paths.dispatch",
    "Routing": "harness.moe.model",
    "quantize_operand": "harness.moe.model",
    "silu_and_mul": "harness.moe.model",
    "combine": "harness.moe.model",
    # routing a path does itself (docs/MOE.md)
    "RoutingSpec": "harness.moe.routing",
    "reference_route": "harness.moe.routing",
    "SCORING_FUNCTIONS": "harness.moe.routing",
    "TIE_BREAKS": "harness.moe.routing",
    "SelfRoutingMoEPath": "harness.moe.paths.base",
    "routes_itself": "harness.moe.paths.base",
    # quantizers
    "Quantizer": "harness.quantizers.base",
    # checkpoint loading: the loader type and the transforms adapters compose
    "Loader": "harness.loading.loaders",
    "LoadState": "harness.loading.transforms",
    "LoadError": "harness.loading.transforms",
    "contiguous_kernel_layout": "harness.loading.transforms",
    "merge_input_scales": "harness.loading.transforms",
    "normalize_to_platform_fp8": "harness.loading.transforms",
    "requantize_with_max_scale": "harness.loading.transforms",
    "scales_to_tile_grid": "harness.loading.transforms",
    # platform
    "PlatformInfo": "harness.platform.info",
    "platform_key": "harness.platform.info",
    "detect_platform": "harness.platform.info",
    # Triton's interpreter on a simulated platform: FP8 NaN codes read as NaN
    "fp8_nan_codes_read_as_nan": "harness.platform.interpreter_fp8",
    # errors
    "QHarnessError": "harness.errors",
    "PluginError": "harness.registry",
}

__all__ = [
    "ANY_PLATFORM",
    "E4M3",
    "E4M3_X_FP32",
    "E8M0",
    "EMULATE",
    "FP8_BLOCK",
    "FP32",
    "MOE_SCHEMES",
    "MX_BLOCK",
    "NVFP4_BLOCK",
    "SCALE_FORMATS",
    "SCHEMES",
    "SCORING_FUNCTIONS",
    "TIE_BREAKS",
    "WHOLE",
    "ActivationScales",
    "Choice",
    "DispatchRow",
    "DispatchTable",
    "ExposesOperands",
    "FindingCase",
    "FusedMoEPathBase",
    "Kernel",
    "KernelContract",
    "KnownFinding",
    "LinearPath",
    "LinearPathBase",
    "LinearProblem",
    "LoadError",
    "LoadState",
    "Loader",
    "MixedOperands",
    "MoELayer",
    "MoEPath",
    "MoEProblem",
    "MoETrace",
    "Numerics",
    "OperandContract",
    "OperandSide",
    "PathBase",
    "PlatformInfo",
    "PluginError",
    "QHarnessError",
    "QuantSpec",
    "QuantizedExperts",
    "QuantizedLinear",
    "QuantizedOperands",
    "QuantizedTensor",
    "Quantizer",
    "Routing",
    "RoutingSpec",
    "ScaleFormat",
    "Scheme",
    "SelfRoutingMoEPath",
    "SpecCheck",
    "Support",
    "__version__",
    "choose",
    "combine",
    "compute_global_scale",
    "contiguous_kernel_layout",
    "decode",
    "detect_platform",
    "dispatch_problems",
    "e8m0_decode",
    "e8m0_encode",
    "encode",
    "expected_operands",
    "expected_output",
    "foreign_fp8_flavour",
    "fp8_nan_codes_read_as_nan",
    "get_path",
    "get_scale_format",
    "get_scheme",
    "linear_checks",
    "linear_paths",
    "load_linear_case",
    "merge_input_scales",
    "mx_spec",
    "normalize_to_platform_fp8",
    "operand_checks",
    "pack_fp4",
    "platform_key",
    "quantize",
    "quantize_activation",
    "quantize_operand",
    "reference_route",
    "register_scheme",
    "requantize_with_max_scale",
    "rest_emulated",
    "routes_itself",
    "run_fused_moe",
    "scales_to_tile_grid",
    "silu_and_mul",
    "unpack_fp4",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
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
    from harness.loading.loaders import Loader
    from harness.loading.transforms import (
        LoadError,
        LoadState,
        contiguous_kernel_layout,
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
    from harness.platform.interpreter_fp8 import fp8_nan_codes_read_as_nan
    from harness.quantizers.base import Quantizer
    from harness.registry import PluginError
