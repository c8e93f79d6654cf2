"""The quant spec: how one tensor is quantized, and the block sizes the formats fix.

`QuantSpec` lives on its own so the scale rules (`harness.core.scales`) and the scheme
registry (`harness.core.schemes`) can both depend on it without depending on each other.
Block-size constants have their one home here; kernels and schemes import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.formats import get_format
from harness.core.scale_formats import FP32, ScaleFormat, get_scale_format

WHOLE = None  # a block dimension of WHOLE spans the whole tensor dimension
# Every element codec rounds to nearest, ties to even, and saturates (harness.core.formats).
ELEMENT_ROUNDING = "rne"
MX_BLOCK = 32  # OCP MX: one E8M0 scale per 32 consecutive elements along K
NVFP4_BLOCK = 16  # NVFP4: one E4M3 scale per 16 consecutive elements along K
FP8_BLOCK = 128  # DeepSeek-style block scaling: 128x128 weight tiles, 1x128 activation groups


Block = tuple[int | None, int | None]  # rows x cols of one tile sharing a scale


def granularity(block: Block) -> str:
    """The name of a tile shape: "per_tensor", "per_row", or "block_<rows>x<cols>"."""
    rows, cols = block
    if rows is WHOLE and cols is WHOLE:
        return "per_tensor"
    if rows == 1 and cols is WHOLE:
        return "per_row"
    return f"block_{rows or 'all'}x{cols or 'all'}"


@dataclass(frozen=True)
class QuantSpec:
    """How one tensor ([rows, K], K the reduction dim) is quantized."""

    format: str  # element format name, see harness.core.formats.FORMATS
    block: Block = (WHOLE, WHOLE)  # rows x cols sharing one scale
    scale_format: str = FP32.name  # a key of harness.core.scale_formats.SCALE_FORMATS
    scale_rounding: str = "exact"  # "exact" (fp32 amax/max) or an E8M0 mode (core.scales)
    dynamic: bool = False  # activations: scale computed per call (True) or calibrated (False)
    clamp_max: float | None = None  # saturation bound below the format max (e.g. 224 for fnuz)
    # engine conventions in effect (harness.core.conventions); empty: the reference definition
    conventions: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        get_format(self.format)  # fail fast on a typo
        get_scale_format(self.scale_format)

    @property
    def scale_fmt(self) -> ScaleFormat:
        """The scale format's row in the table (what its scales are and how they are stored)."""
        return get_scale_format(self.scale_format)

    @property
    def granularity(self) -> str:
        return granularity(self.block)

    @property
    def qmax(self) -> float:
        return self.clamp_max if self.clamp_max is not None else get_format(self.format).max_finite

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "element_rounding": ELEMENT_ROUNDING,
            "granularity": self.granularity,
            "block": list(self.block),
            "scale_format": self.scale_format,
            "scale_rounding": self.scale_rounding,
            "dynamic": self.dynamic,
            "clamp_max": self.clamp_max,
            "conventions": sorted(self.conventions),
        }
