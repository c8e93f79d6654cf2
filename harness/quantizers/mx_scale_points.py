"""The points where each E8M0 scale mode's answer changes, at every float32 binade.

Derived from the mode's formula (harness.core.scales), with amax = 1.f * 2^n:

- ``floor``: e = n - emax changes between nextdown(2^n) and 2^n;
- ``ceil``: e = n - emax + (f != 0) changes between 2^n and nextup(2^n);
- ``even``: the mantissa rounded to the element's m bits carries into the exponent from
  (2 - 2^-(m+1)) * 2^n on, so e changes between that point and the float32 below it;
- ``rceil``: e changes between max * 2^k and nextup(max * 2^k); those points are the
  ``at_max``/``below_max``/``above_max`` blocks of `mx_edge_cases` at every binade already.

Each point comes with one float32 step on either side, for every normal float32 binade n
(-126..127), which covers every scale exponent an E8M0 scale can reach (and the clamped
ones next to them). An implementation that takes log2 in float32 (floor(log2(amax)) sees
nextdown(2^n) as n once |n| >= 2, ceil(log2(amax)) sees nextup(2^n) as n) or rounds amax
through a narrower type lands one binade off at exactly these points. The blocks carry the
same 31-element ramp as the edge cases, so element codes are checked too.

Golden entry ``mx_scale_points/<format>``: the blocks' sha256 and, for every E8M0 mode, the
scale codes and element codes (``golden refresh --only 'mx_scale_points/*'``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from harness.core.formats import ElementFormat, get_format
from harness.quantizers.mx_edge_cases import (
    MX_ELEMENT_FORMATS,
    MX_MODES,
    EdgeBlocks,
    next_down,
    next_up,
    quantize_edge_blocks,
    ramp,
)
from harness.store.golden_registry import GoldenData, regenerated, register_each, tensor_digest

F32_NORMAL_BINADES = range(-126, 128)  # every n with 2^n a normal float32

# point name -> amax where a mode's exponent changes, in binade n (amax's float32 exponent)
CHANGE_POINTS: dict[str, Callable[[ElementFormat, int], float]] = {
    "pow2": lambda f, n: 2.0**n,  # floor (from here up) and ceil (from just above it)
    "carry": lambda f, n: (2.0 - 2.0 ** -(f.mant_bits + 1)) * 2.0**n,  # even
}
# one float32 step either side of each point, and the point itself
STEPS: dict[str, Callable[[float], float]] = {
    "below": next_down,
    "at": lambda x: x,
    "above": next_up,
}


def point_blocks(fmt_name: str) -> EdgeBlocks:
    """The named blocks of one element format, "<step>_<point>@<n>"; a fresh copy."""
    built = _point_blocks(fmt_name)
    return EdgeBlocks(built.names, built.blocks.clone())


@functools.cache
def _point_blocks(fmt_name: str) -> EdgeBlocks:
    fmt = get_format(fmt_name)
    names: list[str] = []
    rows: list[torch.Tensor] = []
    for n in F32_NORMAL_BINADES:
        for point, amax_at in CHANGE_POINTS.items():
            for step, move in STEPS.items():
                names.append(f"{step}_{point}@{n}")
                rows.append(ramp(move(amax_at(fmt, n))))
    return EdgeBlocks(tuple(names), torch.stack(rows).float())


def golden_entry(fmt_name: str) -> str:
    return f"mx_scale_points/{fmt_name}"


def build_mx_scale_points_golden(fmt_name: str) -> GoldenData:
    data = GoldenData()
    points = point_blocks(fmt_name)
    data.exact["blocks_sha256"] = tensor_digest(points.blocks)
    for mode in MX_MODES:
        scale_codes, codes = quantize_edge_blocks(points.blocks, fmt_name, mode)
        data.exact[f"{mode}.scale_codes"] = scale_codes
        data.exact[f"{mode}.element_codes"] = codes
    return data


register_each(build_mx_scale_points_golden, ((golden_entry(f), (f,)) for f in MX_ELEMENT_FORMATS))


def golden_blocks(data: GoldenData, fmt_name: str) -> torch.Tensor:
    """The blocks ``mx_scale_points/<format>`` was built from, regenerated and checked
    against the golden's ``blocks_sha256`` (a GoldenError otherwise)."""
    return regenerated(golden_entry(fmt_name), "blocks", point_blocks(fmt_name).blocks, data)
