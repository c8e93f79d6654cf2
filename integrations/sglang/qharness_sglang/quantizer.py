"""SGLang's Triton FP8 activation quantizer (``_per_token_group_quant_8bit``) as qharness
quantizers, the way SGLang runs it on ROCm.

On ROCm, ``fp8_kernel.per_token_group_quant_fp8`` is ``_per_token_group_quant_8bit_raw``
(``if _is_cuda: ... else: per_token_group_quant_fp8 = _per_token_group_quant_8bit_raw``),
which launches the Triton kernel ``_per_token_group_quant_8bit``: one group per program,
``_absmax = tl.maximum(tl.max(tl.abs(y)), eps)`` with ``eps = 1e-10`` (the declared
convention ``amax_floor_1e-10``), ``y_s = _absmax / bit8_max``, ``y_s_inv = 1.0 / y_s``,
``tl.clamp(y * y_s_inv, bit8_min, bit8_max)`` (``reciprocal_scale``), then the FP8 cast.
``bit8_max`` on ROCm is the module's ``fp8_max`` ("fp8 range is device-dependent on ROCm"):
``is_fp8_fnuz()`` (``"gfx94" in gcnArchName``) gives ``float8_e4m3fnuz`` with
``fp8_max = 224.0`` (``fnuz_clamp_224``), else ``float8_e4m3fn`` with
``torch.finfo(...).max`` = 448.

- ``sglang_per_token_group_quant_fp8``: 1 x 128 groups (the block-FP8 activation groups),
  and 1 x 64 (group_size is the weight's block_k).
- ``sglang_per_token_quant_fp8``: the same kernel with the group the whole row (1 x K), as
  ``sglang_per_token_group_quant_fp8`` routes ``group_size == K`` to per-token quant.

Under Triton's interpreter the kernel's float32 -> FP8 conversion is rounded to nearest
even (`harness.fp8_conversion_rounded_to_nearest_even`). Layout only: FP8 bytes viewed as codes,
the row-major [M, K / group] scales are the tile grid.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import ClassVar

import torch

from harness import (
    WHOLE,
    KnownFinding,
    QuantizedTensor,
    QuantSpec,
    Support,
    detect_platform,
    fp8_conversion_rounded_to_nearest_even,
)
from qharness_sglang import ENGINE
from qharness_sglang.loader import platform_support, sglang_fp8_kernel

GROUP = 128
# SGLang's is_fp8_fnuz(): "gfx94" in gcnArchName -> e4m3fnuz with fp8_max 224.0; else e4m3fn.
SGLANG_FP8: dict[str, tuple[str, float | None]] = {
    "gfx942": ("e4m3fnuz", 224.0),
    "gfx950": ("e4m3fn", None),
}


class _SglangGroupQuantizer:
    engine = ENGINE
    conventions: frozenset[str] = frozenset(
        {"reciprocal_scale", "amax_floor_1e-10", "fnuz_clamp_224"}
    )
    known_findings: ClassVar[tuple[KnownFinding, ...]] = ()
    name: ClassVar[str]
    blocks: ClassVar[frozenset[tuple[int, int | None]]]

    def supports(self, spec: QuantSpec) -> Support:
        platform = detect_platform()
        where = platform_support(self.name, platform)
        if not where.ok:
            return where
        fmt, bound = SGLANG_FP8[platform.arch]
        if spec.format != fmt or spec.scale_format != "fp32" or spec.scale_rounding != "exact":
            return Support.no(f"{self.name}: {fmt} (SGLang's FP8 on {platform.arch}) only")
        if spec.block not in self.blocks:
            return Support.no(
                f"{self.name}: {self.name.removeprefix('sglang_')} tiles only, "
                f"not {spec.granularity}"
            )
        if spec.clamp_max not in (None, bound):
            return Support.no(f"{self.name}: saturates at SGLang's fp8_max, not {spec.clamp_max}")
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if len(shape) != 2:
            return Support.no(f"{self.name}: 2-D input, got {shape}")
        group = self.group(spec, shape[-1])
        if shape[-1] % group:
            return Support.no(f"{self.name}: K % {group} == 0 (SGLang asserts it), K = {shape[-1]}")
        return Support.yes()

    def group(self, spec: QuantSpec, k: int) -> int:
        """group_size: the spec's group width (the weight's block_k), or the whole row."""
        return spec.block[1] or k

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError(f"{self.name} computes its own scales (dynamic)")
        platform = detect_platform()
        mod = sglang_fp8_kernel(platform)
        xc = x.float().contiguous()
        conversion = (
            fp8_conversion_rounded_to_nearest_even() if platform.simulated else nullcontext()
        )
        with conversion:
            q, s = mod.per_token_group_quant_fp8(xc, self.group(spec, xc.shape[-1]))
        return QuantizedTensor(q.view(torch.uint8), s.reshape(xc.shape[0], -1), spec)


class PerTokenGroupFP8Quantizer(_SglangGroupQuantizer):
    name = "sglang_per_token_group_quant_fp8"
    blocks = frozenset({(1, GROUP), (1, GROUP // 2)})  # group_size: the weight's block_k


class PerTokenFP8Quantizer(_SglangGroupQuantizer):
    name = "sglang_per_token_quant_fp8"
    blocks = frozenset({(1, WHOLE)})
