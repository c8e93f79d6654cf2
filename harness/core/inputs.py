"""Seeded, portable test inputs.

Each input is derived from a name (sha256 -> seed) so cases are independent of test order
and of each other. Values are rounded to bfloat16, as real model weights and activations
are, and stored in the goldens, so a change in torch's RNG shows up as a stale golden rather
than a silent change of inputs. Magnitudes follow the scheme's scale tiles along both axes:
rows with a scale each span 1e-4..1e4, groups of rows (128-row blocks) spread 1e-2..1e2,
column blocks along K (1x32 MX, 1x16 NVFP4, 1x128 / 128x128 FP8) only a factor 4 either
way (every block of a dot product must matter to its output, so a one-block scale error is
visible), and elements that share one scale span 0.1..10: tiles get different scales and
none rounds to all zeros. The row spread shrinks where the scale format's block level
cannot hold it (`row_decades`): NVFP4's E4M3 block scales span 4.46 decades under one
per-tensor scale, so its rows span about 10^-0.83..10^0.83, not 1e-4..1e4.

`plant_corners` then writes the values a quantizer gets wrong first into chosen tiles, at
positions where the quantizer really sees them (after the tile's scale, for two-level
formats block scale times per-tensor scale): exact ties between two codes at several
binades, subnormals of the element format, the clamp bound itself and, where a scale
allows it, values beyond it.
"""

from __future__ import annotations

import hashlib
import math

import torch

from harness.core.formats import get_format, magnitudes
from harness.core.quantize import tile_amax, tile_shape
from harness.core.scales import compute_global_scale, compute_scale
from harness.core.schemes import QuantSpec

WIDE_DECADES = 4.0  # 1e-4 .. 1e4 across independently scaled rows or blocks
NARROW_DECADES = 1.0  # 0.1 .. 10 across elements that share a scale
# Column blocks along K: 4^-1 .. 4 (log10 4 = 0.602). With both operands spread so, the
# smallest block's products are >= 1/256 of the largest's, so a wrong scale on any one block
# moves an output by far more than the float32 accumulation bound (~K * 2^-24 relative).
K_BLOCK_DECADES = 0.602
UNQUANTIZED_BLOCK = (1, 32)  # unquantized activations get MX-like variety all the same
# What else spreads the block maxima of one tensor, beyond its rows and column blocks: the
# largest |N(0,1)| of a 16-element block lies in 0.5..4.5 (below 0.5 with probability 2e-7
# per block), a decade; a planted tile's peak is rounded up to a power of two, and a
# static scale too (a factor 2 each, 0.3 decades each).
BLOCK_MAXIMA_DECADES = 1.6


def seed_for(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little") & (2**63 - 1)


def generator(name: str) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed_for(name))


def _log_spread(n: int, decades: float, gen: torch.Generator) -> torch.Tensor:
    """n factors 10^u, u evenly spaced in [-decades, decades], in a shuffled order."""
    if n == 1:
        return torch.ones(1)
    exponents = torch.linspace(-decades, decades, n)
    return (10.0**exponents)[torch.randperm(n, generator=gen)]


def row_decades(spec: QuantSpec | None) -> float:
    """Half-width (log10) of the spread across independently scaled rows: WIDE_DECADES, or
    less where the block scales of one tensor cannot span that far at full precision.

    The scale format's `ScaleFormat.block_decades` (E8M0 and float32: 76, far beyond; the
    E4M3 block level of NVFP4: log10(448 / 2^-6) = 4.46 relative to its per-tensor scale)
    holds the rows' spread (twice this), the column blocks' (2 * K_BLOCK_DECADES) and the
    variation of block maxima (BLOCK_MAXIMA_DECADES); past it, small rows' block scales
    would round to E4M3 subnormals or zero and their tiles to all zeros.
    """
    if spec is None:
        return WIDE_DECADES
    room = (spec.scale_fmt.block_decades - 2 * K_BLOCK_DECADES - BLOCK_MAXIMA_DECADES) / 2
    if room <= 0:
        raise ValueError(f"scale format {spec.scale_fmt.name} cannot hold the column spread")
    return min(WIDE_DECADES, room)


def scaled_normal(name: str, rows: int, cols: int, spec: QuantSpec | None) -> torch.Tensor:
    """A [rows, cols] bf16-valued float32 tensor whose spread matches ``spec``'s tiles.

    Rows sharing a scale span NARROW_DECADES. Rows with a scale each span `row_decades`
    (WIDE_DECADES unless the scale format holds less); groups of rows with one scale per
    group (128-row blocks) spread half that from group to group; column blocks spread
    K_BLOCK_DECADES. Every tile thus has its own order of magnitude, and no element is
    zero: randn's rare exact zeros become 1, and bf16 holds the range.
    """
    gen = generator(name)
    x = torch.randn(rows, cols, generator=gen)
    x = torch.where(x == 0, torch.ones_like(x), x)
    block_rows, block_cols = UNQUANTIZED_BLOCK if spec is None else spec.block
    br = rows if block_rows is None else min(block_rows, rows)
    bc = cols if block_cols is None else min(block_cols, cols)
    wide = row_decades(spec)
    if br == 1:
        x = x * _log_spread(rows, wide, gen)[:, None]
    else:
        x = x * _log_spread(rows, NARROW_DECADES, gen)[:, None]
        row_groups = _log_spread(-(-rows // br), wide / 2, gen)
        x = x * row_groups.repeat_interleave(br)[:rows, None]
    col_blocks = _log_spread(-(-cols // bc), K_BLOCK_DECADES, gen)
    x = x * col_blocks.repeat_interleave(bc)[None, :cols]
    x = x.to(torch.bfloat16).float()
    if bool((x == 0).any()):
        raise AssertionError(f"input {name} contains zeros; inputs must not")
    return x


def bias_vector(name: str, n: int) -> torch.Tensor:
    """Bias in [0.25, 2) with random signs, bf16-valued so bf16/fp16/fp32 paths see equal bits."""
    gen = generator(name)
    magnitude = 0.25 + 1.75 * torch.rand(n, generator=gen)
    sign = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    return (magnitude * sign).to(torch.bfloat16).float()


# ------------------------------------------------------------------------ corners
def tie_points(fmt_name: str) -> list[float]:
    """Exact midpoints between neighbouring codes, in units of the scale, at several binades.

    From the smallest subnormal, the smallest normal, 1 and 2^emax: the midpoints of the next
    three pairs of neighbouring codes (alternately rounding down and up to the even code,
    so round-half-up, ties-away and truncation each get some wrong), and the tie between 0
    and the smallest subnormal. Every midpoint has at most
    mant_bits + 2 significant bits: exact in bfloat16 for every element format.
    """
    fmt = get_format(fmt_name)
    mags = [v for v in magnitudes(fmt_name).tolist() if v > 0]
    starts = sorted({fmt.min_subnormal, fmt.min_normal, 1.0, 2.0**fmt.emax})
    ties: set[float] = {fmt.min_subnormal / 2}  # the tie between 0 and the smallest subnormal
    for start in starts:
        i = mags.index(start)
        ties.update(
            (lo + hi) / 2 for lo, hi in zip(mags[i : i + 3], mags[i + 1 : i + 4], strict=False)
        )
    return sorted(ties)


def subnormal_points(fmt_name: str) -> list[float]:
    """Subnormal values of the format (exact codes), in units of the scale."""
    fmt = get_format(fmt_name)
    return [v for v in magnitudes(fmt_name).tolist() if 0 < v < fmt.min_normal][:3]


def beyond_points(spec: QuantSpec) -> list[float]:
    """Values at and beyond the clamp bound, in units of the scale: qmax itself, the tie
    between qmax and the next code above it (or the format's next power of two) and
    halfway past that tie. A quantizer clamping at the format max instead of qmax (240
    instead of 224 for e4m3fnuz) or not at all gives another code for the last; overshoots
    stay within about 10%, so saturation costs little more than rounding (SQNR floors)."""
    fmt = get_format(spec.format)
    mags = magnitudes(spec.format).tolist()
    above = [v for v in mags if v > spec.qmax]
    nxt = above[0] if above else 2.0 ** (fmt.emax + 1)
    return [spec.qmax, (spec.qmax + nxt) / 2, (spec.qmax + 3 * nxt) / 4]


def _power_of_two_at_least(value: float) -> float:
    return float(2.0 ** math.ceil(math.log2(value)))


def _signs(n: int, gen: torch.Generator) -> torch.Tensor:
    return torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)


def plant_corners(
    x: torch.Tensor,
    spec: QuantSpec,
    name: str,
    static_scale: float | None = None,
    beyond: bool = False,
) -> torch.Tensor:
    """``x`` with corner values written into row 0 of its first tile, where ``spec``'s
    quantizer sees them exactly.

    The tile's scale is made a power of two s: with ``static_scale`` (a power of two, a
    calibrated activation scale) it is that; otherwise the tile's largest element becomes
    qmax * s, s the smallest power of two keeping every other element within it, and the
    scale rule is asked which scale that gives (E8M0 ``ceil`` doubles it). Two-level
    formats make the tile's block scale times the per-tensor scale s instead
    (`_two_level_corner_scale`). Then ties, the format's subnormals and, with ``beyond``
    (static scales, where values past the bound are what calibration did not see), the
    values of `beyond_points` are written as multiples of that scale with seeded signs.
    Rows other than 0 are left as they are.
    """
    gen = generator(f"{name}/corners")
    out = x.clone().float()
    rows, cols = out.shape
    br, bc = tile_shape(spec, out.shape)
    tile = out[: min(br, rows), : min(bc, cols)]
    two_level = spec.scale_fmt.per_tensor_level
    if two_level:
        scale = _two_level_corner_scale(out, tile, spec, static_scale)
    elif static_scale is None:
        peak = float(tile.abs().max())
        s = _power_of_two_at_least(peak / spec.qmax)
        tile[0, 0] = spec.qmax * s
        scale = float(compute_scale(tile_amax(tile, spec)[:1, :1], spec).reshape(()))
    else:
        scale = static_scale
    points = tie_points(spec.format) + subnormal_points(spec.format)
    if beyond:
        points += beyond_points(spec)
    width = tile.shape[1] - (0 if static_scale is not None and not two_level else 1)
    points = points[:width]
    values = torch.tensor(points, dtype=torch.float64) * scale * _signs(len(points), gen).double()
    start = tile.shape[1] - len(points)
    tile[0, start:] = values.float()
    if two_level and static_scale is None and float(out.abs().max()) != spec.qmax * scale:
        raise AssertionError(f"{name}: a planted value exceeds the tile's peak qmax * scale")
    if not bool((out.to(torch.bfloat16).float() == out).all()):
        raise AssertionError(f"{name}: planted corner values are not bfloat16 values")
    if bool((out == 0).any()):
        raise AssertionError(f"input {name} contains zeros; inputs must not")
    return out


def _two_level_corner_scale(
    out: torch.Tensor, tile: torch.Tensor, spec: QuantSpec, static_scale: float | None
) -> float:
    """Make the first tile's effective scale, float32(block scale * per-tensor scale), the
    power of two s, and return it; ``tile[0, 0]`` becomes qmax * s.

    s is ``static_scale`` (the calibrated per-tensor scale is then that of a batch whose
    peak is qmax * s, `calibration_batch`) or the smallest power of two with qmax * s at
    or above the tensor's peak, so qmax * s = 6 * 2^j is the tensor's peak and sets its
    per-tensor scale. Derivation, all float32 (docs/SCHEMES.md#nvfp4), for a tile of peak
    6 * 2^j, or with a static scale any peak from 6 * 2^j up (the block scale saturates):
    g = fl(6 * 2^j / (6 * 448)) = 2^(j-6) * fl(1/7), fl(1/7) = 9586981 * 2^-26;
    block = RNE_E4M3(fl(fl(peak / 6) / g)) = 448 (the quotient is 448 * (1 - 3 * 2^-26),
    or beyond 448 and saturated); fl(448 * g) = 2^j * fl(7 * 9586981 * 2^-26) =
    2^j * fl(1 + 3 * 2^-26) = 2^j. Multiples of 2^j by ties of 3 significant bits are
    bf16 values, and x / 2^j is exact: the quantizer sees the exact ties. The scale rules
    themselves are asked, and a result other than s raises (a format with other constants).
    """
    if static_scale is None:
        s = _power_of_two_at_least(float(out.abs().max()) / spec.qmax)
    else:
        s = static_scale
    tile[0, 0] = spec.qmax * s
    g = compute_global_scale(torch.tensor(spec.qmax * s), spec)
    block = compute_scale(tile_amax(tile, spec)[:1, :1], spec, g)
    scale = float((block * g).reshape(()))
    if scale != s:
        raise AssertionError(f"two-level corner scale {scale} is not the power of two {s}")
    return scale


def static_scale_for(x: torch.Tensor, spec: QuantSpec) -> float:
    """A power-of-two static scale under which every element of ``x`` is within the bound
    (the smallest such): planted values beyond it are then the only ones that saturate."""
    return _power_of_two_at_least(float(x.abs().max()) / spec.qmax)


def calibration_batch(
    name: str, rows: int, cols: int, spec: QuantSpec, scale: float
) -> torch.Tensor:
    """A calibration batch, seeded apart from the batch that is fed, whose absolute maximum
    is exactly qmax * ``scale``: calibrating on it gives ``scale`` (a power of two, so ties
    planted relative to it stay exact), while the fed batch's own amax is elsewhere, so a
    path that ignores the static scale and computes a dynamic one gets other codes."""
    cal = scaled_normal(f"{name}/calibration", rows, cols, spec)
    bound = spec.qmax * scale
    cal = cal * 2.0 ** math.floor(math.log2(bound / float(cal.abs().max())))
    flat = cal.reshape(-1)
    peak = int(flat.abs().argmax())
    flat[peak] = math.copysign(bound, float(flat[peak]))
    return cal
