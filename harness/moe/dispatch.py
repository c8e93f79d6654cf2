"""The MoE native-dispatch table: which grouped kernel runs which scheme on which platform.

The decision "emulate or native, and on which kernel" is data: for each platform key
("cpu", or a GPU architecture such as "sm_90", "gfx942") a mapping from a decision (a
kernel name from harness.moe.paths.kernels, or `EMULATE`) to the frozenset of scheme names
it takes. Every scheme is named explicitly; nothing is decided from a scheme name's prefix
(a prefix test once sent w_mxfp4_a_mxfp6_* schemes to a kernel that only ran pure
w_mxfp4). `dispatch_problems` checks the table against the scheme registry and against
each kernel's own contract (`accepts`), and the suites run it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from harness.core.schemes import Scheme
from harness.platform.info import PlatformInfo

EMULATE = "emulate"  # decision: no native kernel; the emulated path is the only one

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
MOE_FP8_BLOCK: frozenset[str] = frozenset({"fp8_per_block", "fp8_per_block_fnuz"})
MOE_MX: frozenset[str] = frozenset(
    {
        "w_mxfp4",
        "w_mxfp4_a_mxfp4",
        "w_mxfp4_a_mxfp6_e3m2",
        "w_mxfp4_a_mxfp6_e2m3",
        "w_mxfp4_a_fp8",
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


# --------------------------------------------------------------------------- the table
DispatchRow = Mapping[str, frozenset[str]]  # decision -> scheme names

MOE_NATIVE_DISPATCH: dict[str, DispatchRow] = {
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


class KernelContract(Protocol):
    """The part of a grouped kernel the table checks: its own statement of what it runs."""

    name: str

    def accepts(self, scheme: Scheme) -> tuple[bool, str]: ...


def platform_key(platform: PlatformInfo) -> str:
    """Row of the table for this platform: "cpu", or the GPU architecture."""
    return "cpu" if platform.device == "cpu" else platform.arch


def decision(
    key: str, scheme_name: str, table: Mapping[str, DispatchRow] = MOE_NATIVE_DISPATCH
) -> str | None:
    """The decision for one scheme on one platform key; None when the table has none."""
    row = table.get(key)
    if row is None:
        return None
    found = [d for d, names in row.items() if scheme_name in names]
    if len(found) > 1:
        raise ValueError(f"MoE dispatch row {key!r} gives {scheme_name!r} two decisions: {found}")
    return found[0] if found else None


def dispatch_problems(
    schemes: Mapping[str, Scheme],
    kernels: Mapping[str, KernelContract],
    table: Mapping[str, DispatchRow] = MOE_NATIVE_DISPATCH,
) -> list[str]:
    """Everything wrong with ``table``; empty when every check holds.

    * every registered scheme has exactly one decision in every row;
    * every name in the table is a registered scheme;
    * every decision is `EMULATE` or a known kernel, and every registered scheme sent to a
      kernel is one that kernel's contract (`accepts`) says it can run.
    """
    problems: list[str] = []
    for key, row in sorted(table.items()):
        seen: dict[str, str] = {}
        for dec, names in sorted(row.items()):
            if dec != EMULATE and dec not in kernels:
                problems.append(
                    f"row {key!r}: decision {dec!r} is neither {EMULATE!r} nor a known "
                    f"kernel ({sorted(kernels)})"
                )
                continue
            for name in sorted(names):
                if name in seen:
                    problems.append(
                        f"row {key!r}: scheme {name!r} has two decisions ({seen[name]!r}, {dec!r})"
                    )
                seen[name] = dec
                if name not in schemes:
                    problems.append(
                        f"row {key!r}: {name!r} is not a registered scheme; fix the name or "
                        "register the scheme"
                    )
                    continue
                if dec != EMULATE:
                    ok, reason = kernels[dec].accepts(schemes[name])
                    if not ok:
                        problems.append(
                            f"row {key!r} sends {name!r} to {dec!r}, which cannot run it: {reason}"
                        )
        for name in sorted(set(schemes) - set(seen)):
            problems.append(f"row {key!r}: registered scheme {name!r} has no decision")
    return problems


def table_json(
    table: Mapping[str, DispatchRow] = MOE_NATIVE_DISPATCH,
) -> dict[str, dict[str, list[str]]]:
    """The table with sorted lists, for JSON output."""
    return {
        key: {dec: sorted(names) for dec, names in sorted(row.items())}
        for key, row in sorted(table.items())
    }
