"""Degenerate tensors for every per-tensor / per-row / per-token / per-block quantizer.

Where a scale rule's answer is decided by special cases rather than by arithmetic: a tile
whose amax is 0 (the rule's zero case), a tile with a single non-zero element, a tile of
float32 subnormals (amax / qmax underflows to a subnormal or to 0), a tile whose amax is
the format's max (scale exactly 1 for "exact" scales). Each case is its own tensor: the
first scale tile (the whole tensor per tensor, row 0 per row or token, the first block per
block) holds the degenerate values, every other tile a plain mixed-sign ramp, so a case
shows what the quantizer does with that tile and that it leaves its neighbours alone.

These inputs are not stored: the expectation is the reference quantizer (held bit for bit
to the goldens by the golden-tensor and MX edge-case suites) under the quantizer's
declared conventions (harness.quantizers.expect).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.core.quantize import tile_shape
from harness.core.spec import QuantSpec

COLS = 256  # two 128-wide FP8 blocks, eight MX blocks
ROWS_PER_ROW_TILE = 4  # tensors of per-row/per-tensor specs: a few rows besides the case's
SUBNORMAL_AMAX = 2.0**-130  # a float32 subnormal: every tile value is one
UNDERFLOW_AMAX = 2.0**-145  # amax / qmax rounds to 0 in float32 for qmax >= 2^5 (every FP8)


def shape_for(spec: QuantSpec) -> tuple[int, int]:
    """Two tile rows (so row tiles have neighbours), COLS columns."""
    rows = spec.block[0] or ROWS_PER_ROW_TILE
    return (max(2 * rows, ROWS_PER_ROW_TILE), COLS)


def _ramp(shape: tuple[int, int], amax: float) -> torch.Tensor:
    """Deterministic mixed-sign values of magnitude up to ``amax`` (float32)."""
    n = shape[0] * shape[1]
    k = torch.arange(1, n + 1, dtype=torch.float64)
    values = amax * ((k * 0.6180339887) % 1.0) * torch.where(k % 2 == 0, 1.0, -1.0)
    return values.reshape(shape).float()


def _first_tile(spec: QuantSpec, shape: tuple[int, int]) -> tuple[slice, slice]:
    br, bc = tile_shape(spec, shape)
    return slice(0, br), slice(0, bc)


def _fill(spec: QuantSpec, tile: Callable[[tuple[int, int]], torch.Tensor]) -> torch.Tensor:
    shape = shape_for(spec)
    x = _ramp(shape, 3.0)
    rows, cols = _first_tile(spec, shape)
    region = x[rows, cols]
    x[rows, cols] = tile(tuple(region.shape))  # type: ignore[arg-type]
    return x


def _single(value: float) -> Callable[[tuple[int, int]], torch.Tensor]:
    def tile(shape: tuple[int, int]) -> torch.Tensor:
        t = torch.zeros(shape)
        t[0, min(5, shape[1] - 1)] = value
        return t

    return tile


# case name -> the tensor for a spec
DEGENERATE_CASES: dict[str, Callable[[QuantSpec], torch.Tensor]] = {
    "all_zero": lambda spec: torch.zeros(shape_for(spec)),
    "zero_tile": lambda spec: _fill(spec, torch.zeros),
    "single_nonzero": lambda spec: _fill(spec, _single(-3.0)),
    "single_at_max": lambda spec: _fill(spec, _single(spec.qmax)),
    "single_subnormal": lambda spec: _fill(spec, _single(2.0**-140)),
    "single_underflow": lambda spec: _fill(spec, _single(UNDERFLOW_AMAX)),
    "subnormal_only": lambda spec: _fill(spec, lambda s: _ramp(s, SUBNORMAL_AMAX)),
    "tile_at_max": lambda spec: _fill(
        spec, lambda s: _ramp(s, spec.qmax).index_fill(1, torch.tensor([0]), spec.qmax)
    ),
}


def degenerate_tensor(case: str, spec: QuantSpec) -> torch.Tensor:
    return DEGENERATE_CASES[case](spec)
