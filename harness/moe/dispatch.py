"""The MoE native-dispatch table: which grouped kernel runs which scheme on which platform.

The decision "emulate or native, and on which kernel" is data, in the dispatch-table type
linear and MoE share (harness.paths.dispatch): for each platform key ("cpu", or a GPU
architecture such as "sm_90", "gfx942") a mapping from a decision (a kernel name from
harness.moe.paths.kernels, or `EMULATE`) to the frozenset of scheme names it takes. Every
scheme is named explicitly; nothing is decided from a scheme name's prefix. A platform
without a row runs nothing natively. `dispatch_problems` checks the table against the
scheme registry and against each kernel's own contract (`accepts`); the suites run it.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.core.schemes import SCHEMES, Scheme
from harness.paths import dispatch as _dispatch
from harness.paths.base import KernelContract as KernelContract  # re-exported
from harness.paths.dispatch import EMULATE as EMULATE  # re-exported
from harness.paths.dispatch import DispatchRow as DispatchRow  # re-exported
from harness.paths.dispatch import DispatchTable
from harness.platform.info import platform_key as platform_key  # re-exported

# Kernel names (see harness.moe.paths.kernels.MOE_KERNELS).
GROUPED_BF16 = "grouped_mm.bf16"  # dequantize to bf16, torch.nn.functional.grouped_mm
SCALED_GROUPED_ROWWISE = "scaled_grouped_mm.rowwise"  # FP8 codes, torch._scaled_grouped_mm

# ----------------------------------------------------------------- scheme name groups
# FP8 schemes whose weight and activation scales are per-tensor or per-row: the shapes a
# row-wise scaled grouped GEMM takes ([M] activation scales, [E, N] weight scales).
MOE_FP8_ROWWISE_FN: frozenset[str] = frozenset(
    {"fp8_per_tensor", "fp8_per_channel", "fp8_w_per_channel_a_static"}
)
MOE_FP8_ROWWISE_FNUZ: frozenset[str] = frozenset(
    {
        "fp8_per_tensor_fnuz",
        "fp8_per_tensor_fnuz_clamp224",
        "fp8_per_channel_fnuz",
        "fp8_per_channel_fnuz_clamp224",
        "fp8_w_per_channel_a_static_fnuz",
    }
)
# FP8 with 128x128 weight / 1x128 activation blocks: no grouped block-scaled kernel is wired.
MOE_FP8_BLOCK: frozenset[str] = frozenset(
    {"fp8_per_block", "fp8_per_block_fnuz", "fp8_per_block_ue8m0"}
)
MOE_MX: frozenset[str] = frozenset(
    {
        "w_mxfp4",
        "w_mxfp4_a_mxfp4",
        "w_mxfp4_a_mxfp6_e3m2",
        "w_mxfp4_a_mxfp6_e2m3",
        "w_mxfp4_a_fp8",
        "w_mxfp4_a_fp8_per_token",  # MXFP4 weights, per-token FP8 activations
        "w_mxfp6_e3m2",
        "w_mxfp6_e3m2_a_mxfp6_e3m2",
        "w_mxfp6_e3m2_a_fp8",
        "w_mxfp6_e2m3",
        "w_mxfp6_e2m3_a_mxfp6_e2m3",
        "w_mxfp6_e2m3_a_fp8",
        "w_mxfp8_a_mxfp8",
        # the same recipes with the other E8M0 scale-rounding modes
        "w_mxfp4_a_mxfp4@rceil",
        "w_mxfp4_a_mxfp4@even",
        "w_mxfp4_a_mxfp4@ceil",
        "w_mxfp8_a_mxfp8@rceil",
    }
)
MOE_ALL_INTENDED: frozenset[str] = (
    MOE_FP8_ROWWISE_FN | MOE_FP8_ROWWISE_FNUZ | MOE_FP8_BLOCK | MOE_MX
)


# Schemes the MoE block quantizes its experts with: those whose scales are one level. A
# two-level scale (NVFP4's E4M3 x FP32) needs a per-expert global scale the expert stacks
# (`harness.moe.model.QuantizedExperts`) do not hold yet; those schemes run the linear suites.
MOE_SCHEMES: dict[str, Scheme] = {
    name: s for name, s in SCHEMES.items() if not s.weight.scale_fmt.per_tensor_level
}


# --------------------------------------------------------------------------- the table
MOE_NATIVE_DISPATCH: DispatchTable = {
    # torch 2.13 CPU: F.grouped_mm on bf16 runs (probed); no scaled grouped GEMM.
    "cpu": {GROUPED_BF16: MOE_ALL_INTENDED, EMULATE: frozenset()},
    # Ada: bf16 grouped GEMM (sm_80+); torch._scaled_grouped_mm needs sm_90.
    "sm_89": {GROUPED_BF16: MOE_ALL_INTENDED, EMULATE: frozenset()},
    # Hopper / Blackwell: row-wise FP8 grouped GEMM for e4m3fn per-tensor/per-channel.
    "sm_90": {
        SCALED_GROUPED_ROWWISE: MOE_FP8_ROWWISE_FN,
        GROUPED_BF16: MOE_ALL_INTENDED - MOE_FP8_ROWWISE_FN,
        EMULATE: frozenset(),
    },
    "sm_100": {
        SCALED_GROUPED_ROWWISE: MOE_FP8_ROWWISE_FN,
        GROUPED_BF16: MOE_ALL_INTENDED - MOE_FP8_ROWWISE_FN,
        EMULATE: frozenset(),
    },
    # MI300/MI325 (e4m3fnuz hardware): row-wise FP8 grouped GEMM for the fnuz twins.
    "gfx942": {
        SCALED_GROUPED_ROWWISE: MOE_FP8_ROWWISE_FNUZ,
        GROUPED_BF16: MOE_ALL_INTENDED - MOE_FP8_ROWWISE_FNUZ,
        EMULATE: frozenset(),
    },
    "gfx950": {
        SCALED_GROUPED_ROWWISE: MOE_FP8_ROWWISE_FN,
        GROUPED_BF16: MOE_ALL_INTENDED - MOE_FP8_ROWWISE_FN,
        EMULATE: frozenset(),
    },
}


MOE_DISPATCH_HOME = "MOE_NATIVE_DISPATCH in harness/moe/dispatch.py"


def decision(key: str, scheme_name: str, table: DispatchTable = MOE_NATIVE_DISPATCH) -> str | None:
    """The decision for one scheme on one platform key; None when the table has none."""
    return _dispatch.decision(table, key, scheme_name)


def dispatch_problems(
    schemes: Mapping[str, Scheme],
    kernels: Mapping[str, KernelContract],
    table: DispatchTable = MOE_NATIVE_DISPATCH,
) -> list[str]:
    """Everything wrong with ``table`` (harness.paths.dispatch.dispatch_problems)."""
    return _dispatch.dispatch_problems(schemes, kernels, table)


def table_json(table: DispatchTable = MOE_NATIVE_DISPATCH) -> dict[str, dict[str, list[str]]]:
    """The table with sorted lists, for JSON output."""
    return _dispatch.table_json(table)
