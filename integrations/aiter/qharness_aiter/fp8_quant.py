"""aiter's per-token FP8 quantizer (`aiter.ops.triton.quant.dynamic_per_token_quant_fp8_i8`)
as a qharness quantizer.

The Triton kernel takes one row per program: ``m = tl.max(tl.abs(x))``,
``scale = m / DTYPE_MAX`` (float32; DTYPE_MAX is ``torch.finfo`` of the FP8 dtype: 448 for
e4m3fn, 240 for e4m3fnuz), ``x * (1 / scale)`` cast to FP8 with no clamp: the declared
convention ``reciprocal_scale`` (the same step as `_fp8_quant_op`, whose evidence is in
docs/CONVENTIONS.md). Per-token scales are the ``fp8_per_channel`` schemes' activation
spec (1 x K tiles). Under Triton's interpreter the kernel's float32 -> FP8 conversion is
rounded to nearest even (`fp8_conversion_rounded_to_nearest_even`, as for the fused FP8
quantizer) and `tl.assume` counts instead of asserting (`assume_as_hint`). Layout only:
FP8 bytes viewed as codes, the [M] scales put on the tile grid. The wrapper reads rows
with ``x.stride(0)`` alone, so the adapter hands it a contiguous copy (a contract of the
wrapper, not a finding).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import ClassVar

import torch

from harness import WHOLE, KnownFinding, QuantizedTensor, QuantSpec, Support, detect_platform
from qharness_aiter import ENGINE
from qharness_aiter.fused_quant import FP8_FORMATS
from qharness_aiter.interpreter import assume_as_hint, fp8_conversion_rounded_to_nearest_even
from qharness_aiter.loader import AITER_FP8, aiter_triton, platform_support


class DynamicPerTokenFP8Quantizer:
    name = "aiter_dynamic_per_token_quant_fp8"
    engine = ENGINE
    conventions: frozenset[str] = frozenset({"reciprocal_scale"})
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            "aiter dynamic_per_token_quant_fp8_i8: an all-zero row, or one whose amax / "
            "DTYPE_MAX underflows float32, gets scale 0 and its elements x * (1 / 0) = NaN "
            "(0 * inf) or Inf before the FP8 cast: no floor on the scale "
            "(integrations/aiter/findings/per_token_fp8_quant_zero_rows.py)",
            suites=frozenset({"quantizers"}),
            cases=frozenset({"degenerate"}),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        platform = detect_platform()
        where = platform_support(self.name, platform, "FP8 dtypes")
        if not where.ok:
            return where
        fmt = FP8_FORMATS[AITER_FP8[platform.arch]]
        if spec.format != fmt or spec.scale_format != "fp32" or spec.scale_rounding != "exact":
            return Support.no(f"{self.name}: {fmt} (the arch's FP8 dtype) with float32 scales only")
        if spec.block != (1, WHOLE):
            return Support.no(f"{self.name}: one scale per row (1 x K) only")
        if spec.clamp_max is not None:
            return Support.no(
                f"{self.name}: scales by torch.finfo({fmt}).max, not {spec.clamp_max}"
            )
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if len(shape) != 2:
            return Support.no(f"{self.name}: 2-D input, got {shape}")
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError(f"{self.name} computes its own scales (dynamic per token)")
        platform = detect_platform()
        mod = aiter_triton(platform, "quant")
        rows = x.shape[0]
        xc = x.float().contiguous()
        qx = torch.empty(xc.shape, dtype=AITER_FP8[platform.arch])
        scales = torch.empty(rows, dtype=torch.float32)
        conversion = (
            fp8_conversion_rounded_to_nearest_even() if platform.simulated else nullcontext()
        )
        with conversion, assume_as_hint():
            mod.dynamic_per_token_quant_fp8_i8(qx, xc, scales)
        return QuantizedTensor(qx.view(torch.uint8), scales.reshape(rows, 1), spec)
