"""torchao's float8 cast (`Float8Tensor.from_hp`, the torch kernel) as a qharness quantizer.

What runs is torchao's: `Float8Tensor.from_hp` with ``KernelPreference.TORCH`` computes the
scale with `_choose_scale_float8` (amax / finfo.max per block, float32 here since the
harness hands it float32 tensors) and the data with `_quantize_affine_float8` (x / scale,
clamp, cast). The adapter maps the harness's tiles to torchao granularities (whole
tensor: `PerTensor`, one row: `PerRow`, other blocks: `PerBlock`) and views the float8
data as bytes; a static scale goes to `_quantize_affine_float8` alone. FP32 "exact"
scales, e4m3fn and e5m2 only; no clamp below the format's max.

Convention declared: the scale bounded below at float32's smallest normal
(`scale_floor_fp32_min_normal`), the minimum scale torchao's quantization primitives
document for their affine scales and the float8 fix proposed upstream applies. torchao 0.18's
float8 scale has no bound at all: the known finding `ZERO_TILE_NAN`, whose rule
(`fp32_scale_zero_unguarded`) replaces the convention, so only the tiles it explains xfail.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torchao.quantization.granularity import Granularity, PerBlock, PerRow, PerTensor
from torchao.quantization.quant_primitives import _quantize_affine_float8
from torchao.quantization.quantize_.common import KernelPreference
from torchao.quantization.quantize_.workflows.float8.float8_tensor import Float8Tensor

from harness import FP32, KnownFinding, QuantizedTensor, QuantSpec, Support
from qharness_torchao import ENGINE

FLOAT8_DTYPES: dict[str, torch.dtype] = {
    "e4m3fn": torch.float8_e4m3fn,
    "e5m2": torch.float8_e5m2,
}
ZERO_TILE_NAN = (
    "torchao float8 (_choose_scale_float8): a tile whose amax is 0 gets scale 0 (amax / 448 "
    "with no floor), and _quantize_affine_float8 divides by it, so every element of an "
    "all-zero row, block or tensor becomes NaN (0/0); pytorch/ao#4713, open, fixes proposed "
    "in pytorch/ao#4714 and #4762; the same for a non-zero tile whose amax / 448 underflows "
    "float32 (x / 0 = Inf saturates, 0 / 0 = NaN)"
)


def granularity_of(spec: QuantSpec) -> Granularity:
    rows, cols = spec.block
    if rows is None and cols is None:
        return PerTensor()
    if rows == 1 and cols is None:
        return PerRow()
    return PerBlock((rows or 1, cols or 1))


class Float8FromHPQuantizer:
    name = "torchao_float8_from_hp"
    engine = ENGINE
    conventions: frozenset[str] = frozenset({"scale_floor_fp32_min_normal"})
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            ZERO_TILE_NAN,
            suites=frozenset({"quantizers"}),
            cases=frozenset({"degenerate"}),
            behaves_as=frozenset({"fp32_scale_zero_unguarded"}),
            replaces=frozenset({"scale_floor_fp32_min_normal"}),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        if spec.scale_fmt != FP32 or spec.scale_rounding != "exact":
            return Support.no(f"{self.name}: float32 amax / max scales only")
        if spec.format not in FLOAT8_DTYPES:
            return Support.no(f"{self.name}: e4m3fn/e5m2 only, not {spec.format}")
        if spec.clamp_max is not None:
            return Support.no(f"{self.name}: no clamp below the format's max")
        if spec.block[0] is None and spec.block[1] is not None:
            return Support.no(f"{self.name}: no per-column tiles")
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        rows, cols = spec.block
        if (rows and shape[0] % rows) or (cols and shape[1] % cols):
            return Support.no(
                f"{self.name}: shape {shape} is not a multiple of the {spec.block} block "
                "(torchao's block_size must divide the tensor)"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        rows, cols = spec.block
        grid = (x.shape[0] // (rows or x.shape[0]), x.shape[1] // (cols or x.shape[1]))
        if scale is not None:  # a static scale: torchao's quantize step alone
            s = scale.float().reshape(grid)
            data = _quantize_affine_float8(x.float().contiguous(), s, FLOAT8_DTYPES[spec.format])
            return QuantizedTensor(data.view(torch.uint8).reshape(x.shape), s, spec)
        t = Float8Tensor.from_hp(
            x.float().contiguous(),
            float8_dtype=FLOAT8_DTYPES[spec.format],
            granularity=granularity_of(spec),
            kernel_preference=KernelPreference.TORCH,
        )
        codes = t.qdata.view(torch.uint8).reshape(x.shape)
        return QuantizedTensor(codes, t.scale.float().reshape(grid), spec)
