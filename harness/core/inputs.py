"""Seeded, portable test inputs.

Each input is derived from a name (sha256 -> seed) so cases are independent of test order
and of each other. Values are rounded to bfloat16, as real model weights and activations
are, and stored in the goldens, so a change in torch's RNG shows up as a stale golden rather
than a silent change of inputs. Magnitudes follow the scheme's scale tiles along both axes:
rows with a scale each span 1e-4..1e4, groups of rows (128-row blocks) spread 1e-2..1e2,
column blocks along K (1x32 MX, 1x128 / 128x128 FP8) only a factor 4 either way (every block
of a dot product must matter to its output, so a one-block scale error is visible), and
elements that share one scale span 0.1..10: tiles get different scales and none rounds to
all zeros.

`plant_corners` then writes the values a quantizer gets wrong first into chosen tiles, at
positions where the quantizer really sees them (after the tile's scale): exact ties between
two codes at several binades, subnormals of the element format, the clamp bound itself and,
where a scale allows it, values beyond it.
"""

from __future__ import annotations

import hashlib
import math

import torch

from harness.core.formats import get_format, magnitudes
from harness.core.quantize import tile_amax, tile_shape
from harness.core.scales import compute_scale
from harness.core.schemes import QuantSpec

WIDE_DECADES = 4.0  # 1e-4 .. 1e4 across independently scaled rows or blocks
NARROW_DECADES = 1.0  # 0.1 .. 10 across elements that share a scale
# Column blocks along K: 4^-1 .. 4 (log10 4 = 0.602). With both operands spread so, the
# smallest block's products are >= 1/256 of the largest's, so a wrong scale on any one block
# moves an output by far more than the float32 accumulation bound (~K * 2^-24 relative).
K_BLOCK_DECADES = 0.602
UNQUANTIZED_BLOCK = (1, 32)  # unquantized activations get MX-like variety all the same


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


def scaled_normal(name: str, rows: int, cols: int, spec: QuantSpec | None) -> torch.Tensor:
    """A [rows, cols] bf16-valued float32 tensor whose spread matches ``spec``'s tiles.

    Rows sharing a scale span NARROW_DECADES. Rows with a scale each span WIDE_DECADES;
    groups of rows with one scale per group (128-row blocks) spread WIDE_DECADES / 2 from
    group to group, as do column blocks. Every tile thus has its own order of magnitude,
    and no element is zero: randn's rare exact zeros become 1, and bf16 holds the range.
    """
    gen = generator(name)
    x = torch.randn(rows, cols, generator=gen)
    x = torch.where(x == 0, torch.ones_like(x), x)
    block_rows, block_cols = UNQUANTIZED_BLOCK if spec is None else spec.block
    br = rows if block_rows is None else min(block_rows, rows)
    bc = cols if block_cols is None else min(block_cols, cols)
    if br == 1:
        x = x * _log_spread(rows, WIDE_DECADES, gen)[:, None]
    else:
        x = x * _log_spread(rows, NARROW_DECADES, gen)[:, None]
        row_groups = _log_spread(-(-rows // br), WIDE_DECADES / 2, gen)
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
    scale rule is asked which scale that gives (E8M0 ``ceil`` doubles it). Then ties, the
    format's subnormals and, with ``beyond`` (static scales, where values past the bound
    are what calibration did not see), the values of `beyond_points` are written as
    multiples of that scale with seeded signs. Rows other than 0 are left as they are.
    """
    gen = generator(f"{name}/corners")
    out = x.clone().float()
    rows, cols = out.shape
    br, bc = tile_shape(spec, out.shape)
    tile = out[: min(br, rows), : min(bc, cols)]
    if static_scale is None:
        peak = float(tile.abs().max())
        s = _power_of_two_at_least(peak / spec.qmax)
        tile[0, 0] = spec.qmax * s
        if spec.scale_fmt.per_tensor_level:
            # Two levels (E4M3 x FP32) give no power-of-two scale, and multiples of the
            # effective one are no bf16 values: corners are planted in units of s (near
            # ties, not on them; tests/core/test_nvfp4.py plants NVFP4's exact edges).
            scale = s
        else:
            scale = float(compute_scale(tile_amax(tile, spec)[:1, :1], spec).reshape(()))
    else:
        scale = static_scale
    points = tie_points(spec.format) + subnormal_points(spec.format)
    if beyond:
        points += beyond_points(spec)
    width = tile.shape[1] - (0 if static_scale is not None else 1)
    points = points[:width]
    values = torch.tensor(points, dtype=torch.float64) * scale * _signs(len(points), gen).double()
    start = tile.shape[1] - len(points)
    tile[0, start:] = values.float()
    if not bool((out.to(torch.bfloat16).float() == out).all()):
        raise AssertionError(f"{name}: planted corner values are not bfloat16 values")
    if bool((out == 0).any()):
        raise AssertionError(f"input {name} contains zeros; inputs must not")
    return out


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
