"""MX scale edge cases: named 32-element blocks per element format, and their golden.

Each block is built so that its absolute maximum is the value under test (the other 31
elements are smaller, with mixed signs). The boundary cases (amax at, one float32 step
below and above the element max, the max/next-power tie, NaN and Inf blocks) are repeated
at every binade an E8M0 scale can reach (`binades`); zero and float32-subnormal amax are
binade-free. The golden entry ``mx_scales/<format>`` stores a sha256
of the blocks (`golden_blocks` regenerates them from this module and checks it) and, for
every E8M0 scale mode, the scale codes (uint8 E8M0) and element codes, so a
platform that flushes 2^-127, rounds amax through bf16, or picks another mode is caught bit
for bit (suites/test_mx_scales.py runs the quantizer on the device against it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from harness.core.formats import ElementFormat, get_format
from harness.core.quantize import quantize, stored_scale
from harness.core.scales import E8M0_MODES
from harness.core.schemes import mx_spec
from harness.core.spec import MX_BLOCK
from harness.store.golden_registry import GoldenData, regenerated, register_each, tensor_digest

MX_ELEMENT_FORMATS: tuple[str, ...] = ("e2m1", "e2m3", "e3m2", "e4m3fn", "e5m2")
MX_MODES: tuple[str, ...] = tuple(E8M0_MODES)

_F32_MAX = float(np.finfo(np.float32).max)
_F32_MIN_SUBNORMAL = 2.0**-149


def next_up(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(np.inf)))


def next_down(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(0)))


# case name -> amax of the block, from the element format. NaN/Inf/zero blocks are special.
AMAX_CASES: dict[str, Callable[[ElementFormat], float]] = {
    "at_max": lambda f: f.max_finite,
    "just_above_max": lambda f: next_up(f.max_finite),
    # halfway between max and the next power of two: 480 for e4m3fn, 7 for e2m1
    "max_tie": lambda f: (f.max_finite + 2.0 ** (f.emax + 1)) / 2,
    "next_binade": lambda f: 2.0 ** (f.emax + 1),
    "one": lambda f: 1.0,
    # rounding the mantissa to m bits carries into the exponent (even mode) / just does not
    "mantissa_carry": lambda f: 2.0 - 2.0 ** -(f.mant_bits + 1),
    "mantissa_no_carry": lambda f: next_down(2.0 - 2.0 ** -(f.mant_bits + 1)),
    # float32-exact but rounds up to 2^(emax+1) in bf16: a bf16 round trip moves the scale
    "bf16_double_rounding": lambda f: (2.0 - 2.0**-10) * 2.0**f.emax,
    "smallest_scale_boundary": lambda f: 2.0 ** (f.emax - 127),  # floor gives exactly 2^-127
    "above_smallest_scale": lambda f: 2.0 ** (f.emax - 126),
    "two_pow_m127": lambda f: 2.0**-127,  # a float32 subnormal amax
    "float32_min_subnormal": lambda f: _F32_MIN_SUBNORMAL,
    "two_pow_127": lambda f: 2.0**127,
    "float32_max": lambda f: _F32_MAX,
}
SPECIAL_BLOCKS: tuple[str, ...] = ("zero", "nan", "inf", "neg_inf", "negative_max")

# The boundary cases again at every binade an E8M0 scale can reach: the amax is the element
# max times 2^k (or the max/next-power tie, or one float32 step either side of the max), so
# under floor the scale is exactly 2^k, for every k from -127 up to the largest whose block
# is still finite in float32 (127 - emax). NaN and Inf blocks carry the same binade's ramp.
# Names read "<case>@<k>".
BINADE_CASES: dict[str, Callable[[ElementFormat, int], float]] = {
    "at_max": lambda f, k: f.max_finite * 2.0**k,
    "below_max": lambda f, k: next_down(f.max_finite * 2.0**k),
    "above_max": lambda f, k: next_up(f.max_finite * 2.0**k),
    "max_tie": lambda f, k: (f.max_finite + 2.0 ** (f.emax + 1)) / 2 * 2.0**k,
}
BINADE_SPECIAL_CASES: tuple[str, ...] = ("nan", "inf")
E8M0_MIN_EXPONENT = -127


def binades(fmt: ElementFormat) -> range:
    """Every k whose 2^k an E8M0 scale holds and whose max * 2^k a float32 block holds."""
    return range(E8M0_MIN_EXPONENT, 127 - fmt.emax + 1)


@dataclass(frozen=True)
class EdgeBlocks:
    names: tuple[str, ...]
    blocks: torch.Tensor  # float32 [len(names), 32]


def ramp(amax: float) -> torch.Tensor:
    """amax, then 31 smaller values of both signs (amax * k/37, float32)."""
    k = torch.arange(1, MX_BLOCK, dtype=torch.float64)
    rest = (amax * k / 37 * torch.where(k % 2 == 0, 1.0, -1.0)).float()
    return torch.cat([torch.tensor([amax], dtype=torch.float32), rest])


def edge_blocks(fmt_name: str) -> EdgeBlocks:
    """The named blocks of one element format. Built once per process and format (every
    edge-case test asks for them); callers get a fresh copy of the tensor."""
    built = _edge_blocks(fmt_name)
    return EdgeBlocks(built.names, built.blocks.clone())


@functools.cache
def _edge_blocks(fmt_name: str) -> EdgeBlocks:
    fmt = get_format(fmt_name)
    names: list[str] = []
    rows: list[torch.Tensor] = []
    for name, amax in AMAX_CASES.items():
        names.append(name)
        rows.append(ramp(amax(fmt)))
    special = {
        "zero": torch.zeros(MX_BLOCK),
        "nan": ramp(1.0).index_fill(0, torch.tensor([5]), float("nan")),
        "inf": ramp(1.0).index_fill(0, torch.tensor([3]), float("inf")),
        "neg_inf": ramp(1.0).index_fill(0, torch.tensor([7]), float("-inf")),
        # the largest magnitude is negative: -1.2 * max
        "negative_max": -ramp(float(np.float32(1.2 * fmt.max_finite))),
    }
    for name in SPECIAL_BLOCKS:
        names.append(name)
        rows.append(special[name])
    for k in binades(fmt):
        for name, binade_amax in BINADE_CASES.items():
            names.append(f"{name}@{k}")
            rows.append(ramp(binade_amax(fmt, k)))
        at_max = ramp(fmt.max_finite * 2.0**k)
        names.append(f"nan@{k}")
        rows.append(at_max.index_fill(0, torch.tensor([5]), float("nan")))
        names.append(f"inf@{k}")
        rows.append(at_max.index_fill(0, torch.tensor([3]), float("inf")))
    return EdgeBlocks(tuple(names), torch.stack(rows).float())


def quantize_edge_blocks(
    blocks: torch.Tensor, fmt_name: str, mode: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(E8M0 scale codes [n], element codes [n, 32]) of the blocks under one mode."""
    spec = mx_spec(fmt_name, mode)
    q = quantize(blocks, spec)
    return stored_scale(q.scale, spec).flatten(), q.codes


def golden_entry(fmt_name: str) -> str:
    return f"mx_scales/{fmt_name}"


def build_mx_scales_golden(fmt_name: str) -> GoldenData:
    data = GoldenData()
    edges = edge_blocks(fmt_name)
    data.exact["blocks_sha256"] = tensor_digest(edges.blocks)
    for mode in MX_MODES:
        scale_codes, codes = quantize_edge_blocks(edges.blocks, fmt_name, mode)
        data.exact[f"{mode}.scale_codes"] = scale_codes
        data.exact[f"{mode}.element_codes"] = codes
    return data


register_each(build_mx_scales_golden, ((golden_entry(f), (f,)) for f in MX_ELEMENT_FORMATS))


def golden_blocks(data: GoldenData, fmt_name: str) -> torch.Tensor:
    """The blocks ``mx_scales/<format>`` was built from: regenerated by `edge_blocks`, and
    a GoldenError unless their float32 bytes hash to the golden's ``blocks_sha256``."""
    return regenerated(golden_entry(fmt_name), "blocks", edge_blocks(fmt_name).blocks, data)
