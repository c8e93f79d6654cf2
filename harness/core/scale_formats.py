"""Scale formats as data: what a block scale is stored as, and its lossless codec.

Element formats are a table (`harness.core.formats.FORMATS`); scale formats are one too, so
code that needs to know how a scale behaves reads a field of its row, never its name:

- ``fp32``: a float32 scale per tile (FP8 per-tensor, per-channel, per-block schemes).
- ``e8m0``: an OCP MX power-of-two scale, one byte per block (0xFF is NaN).
- ``e4m3``: an FP8 E4M3 scale per block, one byte (its NaN code 0x7F; E4M3 has subnormals
  down to 2^-9, so a scale may be one).
- ``e4m3_x_fp32``: two levels, an E4M3 scale per block times one float32 scale per tensor
  (NVFP4): `QuantizedTensor.scale` holds the E4M3 block scales, `global_scale` the float32.

Each codec is a lossless conversion between the float32 scale values quantize computes and
the stored form; a value the format cannot hold raises instead of rounding. Choosing a scale
(rounding an amax to it) is `harness.core.scales`' job.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.core.fastcodec import decode_fast, e8m0_encode_fast, encode_fast
from harness.core.formats import e8m0_decode, get_format

StoreFn = Callable[[torch.Tensor], torch.Tensor]
E4M3_SCALE_ELEMENT = "e4m3fn"  # the element format an E4M3 block scale is a value of


def _fp32_scale(scale: torch.Tensor) -> torch.Tensor:
    if scale.dtype != torch.float32:
        raise TypeError(f"fp32 scales must be stored as float32, got {scale.dtype}")
    return scale


def e4m3_scale_encode(scales: torch.Tensor) -> torch.Tensor:
    """float32 block scales that are E4M3 values (or NaN) -> their uint8 codes, losslessly:
    a scale E4M3 cannot hold exactly (not on its grid, beyond 448, infinite) raises."""
    if scales.dtype != torch.float32:
        raise TypeError(f"E4M3 scales must be float32 values, got {scales.dtype}")
    codes = encode_fast(scales, E4M3_SCALE_ELEMENT)
    back = decode_fast(codes, E4M3_SCALE_ELEMENT)
    same = (back.view(torch.int32) == scales.view(torch.int32)) | (
        torch.isnan(back) & torch.isnan(scales)
    )
    if not bool(same.all()):
        bad = scales[~same].flatten()[:4].tolist()
        raise ValueError(f"scales that are not E4M3 values cannot be stored as E4M3: {bad}")
    return codes


def e4m3_scale_decode(codes: torch.Tensor) -> torch.Tensor:
    """uint8 E4M3 codes -> float32 block scales, exactly."""
    return decode_fast(codes, E4M3_SCALE_ELEMENT)


@dataclass(frozen=True)
class ScaleFormat:
    """How one tile's scale is represented, described by data."""

    name: str
    description: str
    stored_bytes: int  # bytes one block scale occupies as a checkpoint or kernel holds it
    power_of_two: bool  # every scale is a power of two (the E8M0 modes pick its exponent)
    nan_for_nonfinite_block: bool  # a tile holding NaN or Inf gets the NaN scale, by rule
    per_tensor_level: bool  # a float32 scale per tensor multiplies the block scales
    # Largest / smallest normal scale the block level holds: how far apart the tiles of one
    # tensor may lie with every scale at full precision (relative: a two-level format's
    # per-tensor scale places the range; a one-level minifloat's is also absolute).
    block_range: float
    store: StoreFn  # float32 scale values -> stored tensor (lossless; raises otherwise)
    load: StoreFn  # stored tensor -> float32 scale values, bit for bit
    element: str | None = None  # the minifloat element format the block scales are values of

    @property
    def global_scale_bytes(self) -> int:
        """Bytes of the per-tensor level (a float32), none for one-level formats."""
        return 4 if self.per_tensor_level else 0

    @property
    def block_decades(self) -> float:
        """``block_range`` in orders of magnitude (log10)."""
        return math.log10(self.block_range)


def _normal_range(element: str) -> float:
    """Largest / smallest normal value of a minifloat scale format (E4M3: 448 / 2^-6)."""
    fmt = get_format(element)
    return fmt.max_finite / fmt.min_normal


_FP32_INFO = torch.finfo(torch.float32)


FP32 = ScaleFormat(
    "fp32",
    "float32 scale per tile",
    stored_bytes=4,
    power_of_two=False,
    nan_for_nonfinite_block=False,
    per_tensor_level=False,
    block_range=_FP32_INFO.max / _FP32_INFO.tiny,
    store=_fp32_scale,
    load=_fp32_scale,
)
E8M0 = ScaleFormat(
    "e8m0",
    "OCP MX E8M0 power-of-two scale per block, one byte (0xFF: NaN)",
    stored_bytes=1,
    power_of_two=True,
    nan_for_nonfinite_block=True,
    per_tensor_level=False,
    block_range=2.0**254,  # 2^-127 .. 2^127
    store=e8m0_encode_fast,  # the reference's codes and errors, faster
    load=e8m0_decode,
)
E4M3 = ScaleFormat(
    "e4m3",
    "FP8 E4M3 scale per block, one byte (RNE, saturating at 448; subnormals from 2^-9)",
    stored_bytes=1,
    power_of_two=False,
    nan_for_nonfinite_block=True,
    per_tensor_level=False,
    block_range=_normal_range(E4M3_SCALE_ELEMENT),
    store=e4m3_scale_encode,
    load=e4m3_scale_decode,
    element=E4M3_SCALE_ELEMENT,
)
E4M3_X_FP32 = ScaleFormat(
    "e4m3_x_fp32",
    "two levels: FP8 E4M3 scale per block times one float32 scale per tensor (NVFP4)",
    stored_bytes=1,
    power_of_two=False,
    nan_for_nonfinite_block=True,
    per_tensor_level=True,
    block_range=_normal_range(E4M3_SCALE_ELEMENT),  # 4.46 decades
    store=e4m3_scale_encode,
    load=e4m3_scale_decode,
    element=E4M3_SCALE_ELEMENT,
)
SCALE_FORMATS: dict[str, ScaleFormat] = {f.name: f for f in (FP32, E8M0, E4M3, E4M3_X_FP32)}


def get_scale_format(name: str) -> ScaleFormat:
    try:
        return SCALE_FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown scale format {name!r}; known: {sorted(SCALE_FORMATS)}") from None
