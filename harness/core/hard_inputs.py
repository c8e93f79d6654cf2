"""Inputs built to show one bug class each, where seeded bf16-valued inputs cannot.

The seeded inputs (`harness.core.inputs`) are bf16 values, static scales are powers of two
and rows are short, so several realistic faults change nothing on them. Each function here
rewrites a tensor so that one of them does, and asserts that the rewrite did what it is for:

- `binade_crossing`: every tile's largest element becomes a float32 value just below a
  point where the tile's scale rule changes its answer (a power of two for E8M0 ``floor``,
  qmax times one for ``rceil``), which rounds onto that point in bf16; a scale computed from
  a bf16 copy of the activation is then another scale (one binade off for E8M0).
- `reciprocal_tie_scale` / `plant_reciprocal_ties`: a static scale s that is not a power of
  two and elements x with x / s exactly a tie of the element format, while x * fl(1 / s)
  lands on the other side of it (the reciprocal multiply rounds to the other code).
- `near_ties`: float32 elements a relative 2^-12 either side of ties between neighbouring
  codes (after the tile's scale), so rounding the input to bf16 first moves some of them
  onto or across the tie.
- `tail_amax`: every row's largest element in the last part of a long row, so a reduction
  over a prefix of K misses it.
- `subnormal_block_scales`: (minifloat block scales, NVFP4's E4M3) half the blocks shrunk so
  that their ideal block scale, relative to the level above it, lies in the block format's
  subnormal range, every subnormal code among them; a quantizer that bounds its block
  scales at the smallest normal (or flushes subnormal scales) gives them other scales.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache

import torch

from harness.core.formats import encode, get_format, magnitudes
from harness.core.quantize import (
    QuantizedTensor,
    expand_scale,
    quantize,
    scale_grid,
    tile_amax,
    tile_shape,
)
from harness.core.scales import compute_global_scale, compute_scale
from harness.core.schemes import QuantSpec

NEAR_TIE = 2.0**-12  # relative offset from a tie: far above float32's 2^-24, below bf16's 2^-9
# float32 factors either side of 1 that bf16 rounds to 1 (E8M0 floor changes its answer just
# below a power of two, rceil just above qmax times one)
ROUNDS_TO_ONE = (1 - 2.0**-12, 1 + 2.0**-12)


def _bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).float()


def _scale_of(amax: float, spec: QuantSpec) -> float:
    return float(compute_scale(torch.tensor([[amax]], dtype=torch.float32), spec).reshape(()))


def _crossing_value(amax: float, spec: QuantSpec) -> float | None:
    """The smallest float32 v >= amax, not a bf16 value, whose bf16 rounding T gets another
    scale than v: T runs over the bf16 values in [amax, 4 * amax] and v = fl(T * (1 -+
    2^-12)), so wherever the scale rule changes its answer (a power of two for E8M0
    ``floor``, qmax times one for ``rceil``, ...) within two binades, it is found."""
    start = _bf16(torch.tensor(amax)).item()
    step = 2.0 ** (math.floor(math.log2(start)) - 7)
    grid = torch.arange(0, 4 * 128 * 2, dtype=torch.float64) * step + start
    points = _bf16(grid.float())
    points = torch.unique(points[(points >= amax) & (points <= 4 * amax)])
    for factor in ROUNDS_TO_ONE:
        v = (points.double() * factor).float()
        ok = (v >= amax) & (_bf16(v) == points) & (v != points)
        if not bool(ok.any()):
            continue
        differ = compute_scale(v[:, None], spec) != compute_scale(points[:, None], spec)
        hits = v[ok & differ[:, 0]]
        if hits.numel():
            return float(hits.min())
    return None


def binade_crossing(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """``x`` (float32) with each tile's largest element replaced, sign kept, by the value
    `_crossing_value` gives for it; the scale of every rewritten tile differs between
    ``x`` and its bf16 copy, and at least half the tiles are rewritten (asserted)."""
    if spec.scale_fmt.per_tensor_level:
        raise ValueError("binade_crossing: two-level scales cross at their block level only")
    out = x.clone().float()
    br, bc = tile_shape(spec, out.shape)
    gr, gc = scale_grid(spec, out.shape)
    changed = 0
    for i in range(gr):
        for j in range(gc):
            tile = out[i * br : (i + 1) * br, j * bc : (j + 1) * bc]
            flat = int(tile.abs().argmax())
            r, c = divmod(flat, tile.shape[1])
            v = _crossing_value(float(tile[r, c].abs()), spec)
            if v is not None:
                tile[r, c] = math.copysign(v, float(tile[r, c]))
                changed += 1
    if changed * 2 < gr * gc:
        raise AssertionError(f"binade_crossing: only {changed}/{gr * gc} tiles cross")
    bf16_scale = compute_scale(tile_amax(_bf16(out), spec), spec)
    if int((bf16_scale != compute_scale(tile_amax(out, spec), spec)).sum()) != changed:
        raise AssertionError("binade_crossing: a rewritten tile keeps its scale in bf16")
    return out


# ------------------------------------------------------------------ reciprocal ties
@dataclass(frozen=True)
class ReciprocalTie:
    """A scale s (in [0.5, 2), not a power of two) and a bf16 value x0 with fl(x0 / s)
    exactly the tie t0 of the element format, and fl(x0 * fl(1 / s)) rounding to another
    code than t0 does."""

    scale: float
    x0: float
    tie: float


def _ties_in_first_binade(fmt: str) -> list[float]:
    mags = [v for v in magnitudes(fmt).tolist() if 1.0 <= v <= 2.0]
    return [(a + b) / 2 for a, b in itertools.pairwise(mags)]


@cache
def reciprocal_tie_scale(fmt: str) -> ReciprocalTie:
    """The first (x0 = 1 + i/128, tie) pair in a fixed order whose s = fl(x0 / tie) shows
    the reciprocal multiply rounding to another code (`ReciprocalTie`)."""
    for i in range(128):
        x0 = torch.tensor(1 + i / 128, dtype=torch.float32)
        for tie in _ties_in_first_binade(fmt):
            s = (x0 / tie).float()
            if float(s) == 2.0 ** math.floor(math.log2(float(s))):
                continue
            divided = (x0 / s).float()
            multiplied = (x0 * (1 / s).float()).float()
            if float(divided) != tie:
                continue
            if bool((encode(divided, fmt) != encode(multiplied, fmt)).any()):
                return ReciprocalTie(float(s), float(x0), tie)
    raise AssertionError(f"no reciprocal tie found for {fmt}")


def plant_reciprocal_ties(
    x: torch.Tensor, spec: QuantSpec, scale: float, rows: int = 2
) -> tuple[torch.Tensor, int]:
    """``x`` with the first ``rows`` rows' leading elements set to +-x0 * 2^j * (scale / s)
    for every binade j where division by ``scale`` gives a tie and the reciprocal multiply
    another code; ``scale`` must be s (of `reciprocal_tie_scale`) times a power of two.
    Returns the tensor and how many elements were planted."""
    rt = reciprocal_tie_scale(spec.format)
    shift = scale / rt.scale
    if shift != 2.0 ** round(math.log2(shift)):
        raise ValueError(f"scale {scale} is not {rt.scale} times a power of two")
    fmt = get_format(spec.format)
    s32 = torch.tensor(scale, dtype=torch.float32)
    values = []
    for j in range(int(math.log2(fmt.min_normal)), fmt.emax + 1):
        v = torch.tensor(rt.x0 * shift * 2.0**j, dtype=torch.float32)
        divided, multiplied = (v / s32).float(), (v * (1 / s32).float()).float()
        if float(divided) > spec.qmax or float(divided) != rt.tie * 2.0**j:
            continue
        codes = encode(torch.stack([divided, multiplied]), spec.format, spec.clamp_max)
        if int(codes[0]) != int(codes[1]):
            values.append(float(v))
    if len(values) < 3:
        raise AssertionError(f"only {len(values)} reciprocal ties for {spec.format}")
    out = x.clone().float()
    for r in range(min(rows, out.shape[0])):
        for i, value in enumerate(values):
            out[r, i] = value if (i + r) % 2 == 0 else -value
    return out, len(values) * min(rows, out.shape[0])


def calibration_amax(scale: float, spec: QuantSpec) -> float:
    """A float32 amax whose calibrated static scale (`compute_scale`) is exactly ``scale``."""
    start = torch.tensor(scale * spec.qmax, dtype=torch.float32)
    candidates = [start, torch.nextafter(start, torch.tensor(0.0))]
    candidates.append(torch.nextafter(start, torch.tensor(math.inf)))
    for a in candidates:
        if _scale_of(float(a), spec) == scale:
            return float(a)
    raise AssertionError(f"no float32 amax calibrates to the scale {scale}")


# ------------------------------------------------------------------------ near ties
def _effective_scale(q: QuantizedTensor, spec: QuantSpec, shape: torch.Size) -> torch.Tensor:
    """Each element's scale: its tile's, times a two-level format's per-tensor scale."""
    scale = expand_scale(q.scale.float(), spec, shape)
    g = q.global_scale
    return scale if g is None else scale * g.float().reshape(())


def near_ties(x: torch.Tensor, spec: QuantSpec, every: int = 3) -> torch.Tensor:
    """``x`` (float32) with every ``every``-th element moved to a relative 2^-12 above or
    below (alternately) the tie between its code and the next larger one, in units of its
    tile's scale, where that next code is below the tile's largest code (so no tile amax,
    and no scale, changes). Asserted: scales unchanged, the moved values are not bf16
    values, and quantizing the bf16 copy gives other codes."""
    q = quantize(x, spec)
    mags = magnitudes(spec.format).double()
    code_mag = (q.codes & (get_format(spec.format).sign_bit - 1)).long()
    value = mags[code_mag]
    nxt = mags[(code_mag + 1).clamp(max=mags.numel() - 1)]
    tile_top = expand_scale(
        tile_amax(value.float(), spec).double(), spec, x.shape
    )  # largest code magnitude of each element's tile
    pick = torch.zeros_like(value, dtype=torch.bool).reshape(-1)
    pick[::every] = True
    pick = pick.reshape(x.shape) & (nxt < tile_top) & (nxt > value)
    side = torch.where(torch.arange(x.numel()).reshape(x.shape) % 2 == 0, 1.0, -1.0).double()
    scale = _effective_scale(q, spec, x.shape).double()
    moved = (value + nxt) / 2 * scale * (1 + side * NEAR_TIE) * torch.sign(x.double())
    out = torch.where(pick, moved.float(), x.float())
    again = quantize(out, spec)
    if not torch.equal(again.scale, q.scale):
        raise AssertionError("near_ties changed a tile's scale")
    if bool((out[pick] == _bf16(out[pick])).any()):
        raise AssertionError("near_ties planted a bf16 value")
    if torch.equal(quantize(_bf16(out), spec).codes, again.codes):
        raise AssertionError("near_ties: the bf16 copy quantizes to the same codes")
    return out


# ----------------------------------------------------------------------- long rows
def tail_amax(x: torch.Tensor, tail: int) -> torch.Tensor:
    """``x`` with each row's largest magnitude doubled (exact in bf16) and moved into the
    last ``tail`` columns (row r at column K - 1 - (r * 7) % tail), so the row's amax lies
    there and twice any amax over a prefix that stops before them."""
    out = x.clone().float()
    k = out.shape[1]
    for r in range(out.shape[0]):
        peak = float(out[r].abs().max())
        c = k - 1 - (r * 7) % tail
        out[r, c] = math.copysign(2 * peak, float(out[r, c]))
    return out


# ------------------------------------------------------------ subnormal block scales
# Where in a subnormal step of the block format a rewritten block's ideal scale lands (in
# units of the smallest subnormal): on a code, a quarter above it, three quarters above it
# (the last, 7.75, rounds up to the smallest normal).
SUBNORMAL_STEP_POINTS = (0.0, 0.25, 0.75)


def subnormal_block_scales(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """``x`` (float32) with every other block (by grid position, skipping the one holding
    the tensor's largest magnitude, so a per-tensor level is unchanged) scaled down so that
    its ideal block scale, (block amax / qmax) / (the per-tensor scale, or 1), is
    (m + f) * the block format's smallest subnormal, m = 1 .. its subnormal codes, f in
    `SUBNORMAL_STEP_POINTS`, cycled. Asserted: the level above is unchanged, every rewritten
    block's reference scale is non-zero and at most the format's smallest normal (7.75
    steps round up to it), and every subnormal code occurs."""
    element = spec.scale_fmt.element
    if element is None:
        raise ValueError(f"subnormal_block_scales: {spec.scale_format} scales have no subnormals")
    fmt = get_format(element)
    tiny = fmt.min_normal / 2.0**fmt.mant_bits  # the smallest subnormal (E4M3: 2^-9)
    targets = [(m + f) * tiny for m in range(1, 2**fmt.mant_bits) for f in SUBNORMAL_STEP_POINTS]
    out = x.clone().float()
    amax = tile_amax(out, spec)
    level = (
        float(compute_global_scale(amax.max(), spec).reshape(()))
        if spec.scale_fmt.per_tensor_level
        else 1.0
    )
    top = divmod(int(amax.argmax()), amax.shape[1])
    br, bc = tile_shape(spec, out.shape)
    gr, gc = scale_grid(spec, out.shape)
    rewritten: list[tuple[int, int]] = []
    for i in range(gr):
        for j in range(gc):
            if (i + j) % 2 == 0 or (i, j) == top or float(amax[i, j]) == 0:
                continue
            target = targets[len(rewritten) % len(targets)] * spec.qmax * level
            tile = out[i * br : (i + 1) * br, j * bc : (j + 1) * bc]
            tile.mul_(target / float(amax[i, j]))
            rewritten.append((i, j))
    if (
        spec.scale_fmt.per_tensor_level
        and float(compute_global_scale(tile_amax(out, spec).max(), spec).reshape(())) != level
    ):
        raise AssertionError("subnormal_block_scales changed the per-tensor scale")
    q = quantize(out, spec)
    scales = torch.stack([q.scale[i, j] for i, j in rewritten]).float()
    if not bool(((scales > 0) & (scales <= fmt.min_normal)).all()):
        raise AssertionError("subnormal_block_scales: a rewritten block's scale is not subnormal")
    codes = {round(v / tiny) for v in scales.tolist() if v < fmt.min_normal}
    if codes != set(range(1, 2**fmt.mant_bits)):
        raise AssertionError(f"subnormal_block_scales: subnormal codes {sorted(codes)} only")
    return out
