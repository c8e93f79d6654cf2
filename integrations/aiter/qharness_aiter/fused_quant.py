"""aiter's fused quantization kernels (`aiter.ops.triton.fused_fp8_quant`,
`aiter.ops.triton.fused_mxfp4_quant`) as qharness quantizers.

Both modules fuse a quantizer with RMSNorm, a residual add, a reduce or an activation; their
one entry point that quantizes its input and nothing else is the flatten kernel
(``fused_flatten_fp8_group_quant``, ``fused_flatten_mxfp4_quant``: x [M, N1, N2] flattened
to [M, N1 * N2], quantized along it). The adapter hands it the suite's [rows, K] tensor as
[rows, 1, K] (a view: the suite's strides reach the kernel), so the flatten kernel's
quantizing step (``_fp8_quant_op`` / ``_mxfp4_quant_op``, the same functions the RMSNorm
variants call) is held to the reference bit for bit, codes and scales. Layouts are converted
only: FP8 bytes viewed as codes, FP4 unpacked (element 0 in the low nibble), E8M0 bytes
decoded to float32 powers of two.

FP8 (``_fp8_quant_op``): ``m = tl.maximum(tl.max(tl.abs(x), axis=-1), 1e-10)``,
``scale_out = m.to(tl.float32) / DTYPE_MAX``, ``scale_recip = 1.0 / scale_out``,
``x = tl.clamp(x * scale_recip, DTYPE_MIN, DTYPE_MAX)``, then ``.to`` the FP8 dtype, whose
DTYPE_MAX is ``torch.finfo(dtype).max`` (240 for e4m3fnuz, 448 for e4m3fn): two declared
conventions, ``reciprocal_scale`` and ``amax_floor_1e-10``. The kernel's own float32 -> FP8
conversion runs, under Triton's interpreter, rounded to nearest even
(`qharness_aiter.interpreter.fp8_conversion_rounded_to_nearest_even`): the interpreter's own
conversion is not a GPU's. Groups are ``group_size`` consecutive elements of a row; the
kernel reshapes its power-of-two row block into groups, so a group is 1x128 or 1x64 (any
K) or the whole row where K is a power of two.

MXFP4 (``_mxfp4_quant_op``, the function `dynamic_mxfp4_quant` also calls): the E8M0 scale
by Quark's "even" rule, codes rounded half away from zero (an upstream-acknowledged bug,
ROCm/aiter#974: a finding, `qharness_aiter.quantizer.TIES_AWAY`); it takes no scale rule,
so it runs the ``even`` specs only, and shares the edge-block findings of
`dynamic_mxfp4_quant` (integrations/aiter/findings/fused_flatten_mxfp4_quant_same_op.py
shows the two give the same bytes there).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import ClassVar

import torch

from harness import (
    MX_BLOCK,
    WHOLE,
    KnownFinding,
    QuantizedTensor,
    QuantSpec,
    Support,
    detect_platform,
    e8m0_decode,
    unpack_fp4,
)
from qharness_aiter import ENGINE
from qharness_aiter.interpreter import fp8_conversion_rounded_to_nearest_even
from qharness_aiter.loader import AITER_FP8, aiter_triton, platform_support
from qharness_aiter.quantizer import TIES_AWAY, even_tensor_case

FP8_GROUP = 128  # the group size aiter's callers pass (DeepSeek-style 1x128 activations)
# group sizes run: 128, and 64 (a weight's block_k in the non-square block designs)
FP8_GROUPS = frozenset({FP8_GROUP, FP8_GROUP // 2})
# The harness's element-format name of each aiter FP8 dtype (the arch's flavour).
FP8_FORMATS: dict[torch.dtype, str] = {
    torch.float8_e4m3fnuz: "e4m3fnuz",
    torch.float8_e4m3fn: "e4m3fn",
}

_MXFP4_SCRIPT = "integrations/aiter/findings/fused_flatten_mxfp4_quant_same_op.py"


def fp8_group_size(spec: QuantSpec, k: int) -> int | None:
    """The kernel's ``group_size`` for the spec's 1xG tiles on rows of length ``k``, or None
    where the kernel cannot form those groups (its block is next_power_of_2(K) elements,
    reshaped into groups)."""
    if spec.block[0] == 1 and spec.block[1] in FP8_GROUPS:
        return spec.block[1]
    if spec.block == (1, WHOLE) and k >= 1 and k & (k - 1) == 0:
        return k
    return None


class FusedFlattenFP8GroupQuantizer:
    """``fused_fp8_quant.fused_flatten_fp8_group_quant`` on [rows, 1, K]."""

    name = "aiter_fused_flatten_fp8_group_quant"
    engine = ENGINE
    conventions: frozenset[str] = frozenset({"reciprocal_scale", "amax_floor_1e-10"})
    known_findings: ClassVar[tuple[KnownFinding, ...]] = ()

    def supports(self, spec: QuantSpec) -> Support:
        platform = detect_platform()
        where = platform_support(self.name, platform, "FP8 dtypes")
        if not where.ok:
            return where
        fmt = FP8_FORMATS[AITER_FP8[platform.arch]]
        if spec.format != fmt or spec.scale_format != "fp32" or spec.scale_rounding != "exact":
            return Support.no(
                f"{self.name}: {fmt} (aiter.dtypes.fp8 on {platform.arch}) with float32 scales only"
            )
        if spec.block not in {(1, g) for g in FP8_GROUPS} | {(1, WHOLE)}:
            return Support.no(f"{self.name}: 1x128 or 1x64 groups or whole rows only")
        if spec.clamp_max is not None:
            return Support.no(
                f"{self.name}: saturates at torch.finfo({fmt}).max, not at {spec.clamp_max}"
            )
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if len(shape) != 2:
            return Support.no(f"{self.name}: 2-D input, got {shape}")
        if fp8_group_size(spec, shape[1]) is None:
            return Support.no(
                f"{self.name}: a whole-row group needs K a power of two (the kernel reshapes "
                f"its next_power_of_2(K) block into groups), got K={shape[1]}"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError(f"{self.name} computes its own scales (dynamic groups)")
        platform = detect_platform()
        group = fp8_group_size(spec, x.shape[1])
        if group is None:
            raise ValueError(f"{self.name}: no group size for {spec.block} at K={x.shape[1]}")
        mod = aiter_triton(platform, "fused_fp8_quant")
        conversion = (
            fp8_conversion_rounded_to_nearest_even() if platform.simulated else nullcontext()
        )
        with conversion:
            out, scales = mod.fused_flatten_fp8_group_quant(
                x.float().unsqueeze(1), group, dtype_quant=AITER_FP8[platform.arch]
            )
        return QuantizedTensor(out.view(torch.uint8).contiguous(), scales.float(), spec)


class FusedFlattenMXFP4Quantizer:
    """``fused_mxfp4_quant.fused_flatten_mxfp4_quant`` on [rows, 1, K]."""

    name = "aiter_fused_flatten_mxfp4_quant"
    engine = ENGINE
    conventions: frozenset[str] = frozenset()
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            "aiter's _mxfp4_quant_op (fused_flatten_mxfp4_quant, as dynamic_mxfp4_quant) at "
            "float32's edges: NaN elements left out of the block amax, an Inf amax gives "
            "scale 2^127, amax >= 1.75 * 2^127 gives 2^127 instead of the even rule's 2^126 "
            f"({_MXFP4_SCRIPT}; integrations/aiter/findings/dynamic_mxfp4_quant_nonfinite.py)",
            suites=frozenset({"quantizers"}),
            cases=frozenset({"edge_cases"}),
        ),
        KnownFinding(
            "aiter's _mxfp4_quant_op (fused_flatten_mxfp4_quant, as dynamic_mxfp4_quant) at "
            "the E8M0 range's ends: the top-binade carry gives 2^127 where the even rule "
            "gives 2^126, and below_carry@-126 codes 3.4999998 * scale as 4.0, not yet "
            f"isolated between kernel and interpreter, no bug claimed ({_MXFP4_SCRIPT})",
            suites=frozenset({"quantizers"}),
            cases=frozenset({"mx_scale_points"}),
            when=lambda case: case.scale_mode == "even",
        ),
        KnownFinding(
            TIES_AWAY,
            suites=frozenset({"quantizers"}),
            when=even_tensor_case,
            behaves_as=frozenset({"fp4_ties_away"}),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        where = platform_support(self.name, detect_platform(), "Triton kernels")
        if not where.ok:
            return where
        if spec.format != "e2m1" or spec.scale_format != "e8m0" or spec.block != (1, MX_BLOCK):
            return Support.no(f"{self.name}: MXFP4 (e2m1, 1x32 E8M0 scales) only")
        if spec.scale_rounding != "even":
            return Support.no(
                f"{self.name}: the kernel computes Quark's 'even' E8M0 rule and takes no "
                f"other, not {spec.scale_rounding}"
            )
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if len(shape) != 2 or shape[-1] % 2:
            return Support.no(
                f"{self.name}: 2-D input with K even (two FP4 codes a byte), got {shape}"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError(f"{self.name} computes its own scales (MX is dynamic)")
        mod = aiter_triton(detect_platform(), "fused_mxfp4_quant")
        packed, scale_codes = mod.fused_flatten_mxfp4_quant(x.float().unsqueeze(1))
        k = x.shape[-1]
        codes = unpack_fp4(packed.contiguous())[..., :k]
        return QuantizedTensor(codes, e8m0_decode(scale_codes.contiguous()), spec)
