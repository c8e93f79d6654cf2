"""E8M0 scale selection: hand-derived edge cases and an exact-arithmetic reference.

The expected codes below are worked out by hand from the mode definitions (comments show
the arithmetic), not taken from the implementation. A second, independent reference
applies each definition literally in exact rational arithmetic (`fractions.Fraction`) to
thousands of amax values, subnormal ones included.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import torch

from harness.core.compare import bit_mismatches
from harness.core.formats import decode, e8m0_decode, encode, get_format
from harness.core.quantize import quantize, stored_scale
from harness.core.scales import E8M0_MODES, SCALE_RULES, compute_scale
from harness.core.schemes import mx_spec
from harness.quantizers.mx_edge_cases import (
    AMAX_CASES,
    MX_ELEMENT_FORMATS,
    MX_MODES,
    binades,
    edge_blocks,
    golden_entry,
)

NAN = 255
# code = clamp(e + 127, 0, 254). e4m3fn: max 448 = 1.75 * 2^8, emax 8, 3 mantissa bits.
# e2m1: max 6 = 1.5 * 2^2, emax 2, 1 mantissa bit. Order: floor, rceil, even, ceil.
HAND: dict[str, dict[str, tuple[int, int, int, int]]] = {
    "e4m3fn": {
        "zero": (0, 0, 0, 0),  # zero block: smallest scale 2^-127
        "nan": (NAN, NAN, NAN, NAN),
        "inf": (NAN, NAN, NAN, NAN),
        "neg_inf": (NAN, NAN, NAN, NAN),
        # 448 = 1.75*2^8: floor 8-8=0; rceil 448/1 <= 448; even 1.75+1/16 < 2; ceil +1
        "at_max": (127, 127, 127, 128),
        # 448(1+2^-23): mantissa above 1.75, so rceil needs 2^1; even/floor stay at 2^0
        "just_above_max": (127, 128, 127, 128),
        # 480 = 1.875*2^8: floor 2^0 (480 saturates to 448); rceil 2^1 (240 fits)
        "max_tie": (127, 128, 127, 128),
        "next_binade": (128, 128, 128, 128),  # 512 = 2^9: 9-8 = 1 in every mode
        "one": (119, 119, 119, 119),  # 2^0: 0-8 = -8; a power of two, so ceil adds nothing
        # 1.9375 = 2-2^-4: +2^-4 carries (even -> -7); rceil: 1.9375 > 1.75 -> -7
        "mantissa_carry": (119, 120, 120, 120),
        "mantissa_no_carry": (119, 120, 119, 120),
        # 511.75 = (2-2^-10)*2^8, exact in float32; bf16 would round it to 512 (floor -> 128)
        "bf16_double_rounding": (127, 128, 128, 128),
        "smallest_scale_boundary": (0, 0, 0, 0),  # 2^-119: -119-8 = -127
        "above_smallest_scale": (1, 1, 1, 1),  # 2^-118 -> -126
        "two_pow_m127": (0, 0, 0, 0),  # float32 subnormal amax: below every scale's reach
        "float32_min_subnormal": (0, 0, 0, 0),
        "two_pow_127": (246, 246, 246, 246),  # 127-8 = 119
        # (2-2^-23)*2^127: floor 119; every other mode rounds up to 120
        "float32_max": (246, 247, 247, 247),
        # -537.6 = -1.05*2^9: floor 1; rceil 1 (1.05 <= 1.75); even 1.05+1/16 < 2; ceil 2
        "negative_max": (128, 128, 128, 129),
    },
    "e2m1": {
        "zero": (0, 0, 0, 0),
        "nan": (NAN, NAN, NAN, NAN),
        "inf": (NAN, NAN, NAN, NAN),
        "neg_inf": (NAN, NAN, NAN, NAN),
        "at_max": (127, 127, 127, 128),  # 6 = 1.5*2^2: 1.5+1/4 < 2 for even
        "just_above_max": (127, 128, 127, 128),
        "max_tie": (127, 128, 128, 128),  # 7 = 1.75*2^2: 1.75+1/4 = 2 carries for even
        "next_binade": (128, 128, 128, 128),  # 8 = 2^3
        "one": (125, 125, 125, 125),  # 0-2 = -2
        "mantissa_carry": (125, 126, 126, 126),  # 1.75: even carries; rceil: 1.75 > 1.5
        "mantissa_no_carry": (125, 126, 125, 126),
        "bf16_double_rounding": (127, 128, 128, 128),  # (2-2^-10)*2^2
        "smallest_scale_boundary": (0, 0, 0, 0),  # 2^-125: -125-2 = -127
        "above_smallest_scale": (1, 1, 1, 1),
        "two_pow_m127": (0, 0, 0, 0),
        "float32_min_subnormal": (0, 0, 0, 0),
        "two_pow_127": (252, 252, 252, 252),  # 127-2 = 125
        "float32_max": (252, 253, 253, 253),
        "negative_max": (127, 128, 128, 128),  # -7.2 = -1.8*2^2
    },
}
MODE_ORDER = ("floor", "rceil", "even", "ceil")


def test_modes_are_registered() -> None:
    assert set(MODE_ORDER) == set(E8M0_MODES) == set(MX_MODES)
    assert set(MODE_ORDER) <= set(SCALE_RULES)


# The boundary cases at every binade k (amax = case(max) * 2^k, floor(log2 amax) = emax + k),
# so each is the k = 0 code shifted by k: floor/even keep the binade (at, one step below,
# one step above max, the tie: none of them reaches 2^(emax+1), and even's half-ULP add
# carries only for e2m1's tie 7 = 1.75 * 2^2 at one mantissa bit); rceil moves up one for
# above-max and the tie (amax / 2^k > max); ceil moves up one for all (mantissa non-zero).
# NaN and Inf blocks take the NaN scale at every k.
BINADE_OFFSETS: dict[str, dict[str, tuple[int, int, int, int]]] = {
    "e4m3fn": {
        "at_max": (0, 0, 0, 1),
        "below_max": (0, 0, 0, 1),
        "above_max": (0, 1, 0, 1),
        "max_tie": (0, 1, 0, 1),
    },
    "e2m1": {
        "at_max": (0, 0, 0, 1),
        "below_max": (0, 0, 0, 1),
        "above_max": (0, 1, 0, 1),
        "max_tie": (0, 1, 1, 1),
    },
}
for _fmt, _offsets in BINADE_OFFSETS.items():
    for _k in binades(get_format(_fmt)):
        for _case, _offset in _offsets.items():
            HAND[_fmt][f"{_case}@{_k}"] = tuple(127 + _k + o for o in _offset)  # type: ignore[assignment]
        HAND[_fmt][f"nan@{_k}"] = (NAN, NAN, NAN, NAN)
        HAND[_fmt][f"inf@{_k}"] = (NAN, NAN, NAN, NAN)


@pytest.mark.parametrize("fmt", sorted(HAND))
@pytest.mark.parametrize("mode", MODE_ORDER)
def test_hand_derived_scale_codes(fmt: str, mode: str) -> None:
    edges = edge_blocks(fmt)
    assert set(HAND[fmt]) == set(edges.names), "every edge case needs a hand-derived code"
    q = quantize(edges.blocks, mx_spec(fmt, mode))
    got = dict(zip(edges.names, stored_scale(q.scale, q.spec).flatten().tolist(), strict=True))
    want = {name: codes[MODE_ORDER.index(mode)] for name, codes in HAND[fmt].items()}
    assert got == want


@pytest.mark.parametrize(
    ("mode", "scale", "code"),
    [("floor", 1.0, 0x7E), ("rceil", 2.0, 0x77)],  # 480 -> 448 saturated; 240 = 0x77
)
def test_480_tie_element_codes(mode: str, scale: float, code: int) -> None:
    """480 in an e4m3 block: floor and rceil differ in scale *and* element code."""
    block = torch.full((1, 32), 1.0)
    block[0, 0] = 480.0
    q = quantize(block, mx_spec("e4m3fn", mode))
    assert q.scale.item() == scale
    assert q.codes[0, 0].item() == code
    assert decode(q.codes[:, :1], "e4m3fn").item() * scale == (448.0 if mode == "floor" else 480.0)


def test_smallest_scale_survives_quantize_and_dequantize() -> None:
    """A 2^-127 scale (a float32 subnormal) is used, not flushed: 2^-125 comes back exactly."""
    block = torch.full((1, 32), 2.0**-126)
    block[0, 0] = 2.0**-125
    q = quantize(block, mx_spec("e2m1", "floor"))
    assert q.scale.item() == 2.0**-127
    assert q.codes[0, 0].item() == encode(torch.tensor([4.0]), "e2m1").item()
    assert torch.equal(q.dequantize(), block)


def test_scale_comes_from_float32_amax_not_bf16() -> None:
    amax = torch.tensor([(2 - 2**-10) * 2.0**8])  # 511.75
    assert amax.to(torch.bfloat16).item() == 512.0  # what a bf16 round trip would see
    assert compute_scale(amax, mx_spec("e4m3fn", "floor")).item() == 1.0  # 2^(8-8)


# ------------------------------------------------------------ exact reference
def _reference_code(amax: float, fmt_name: str, mode: str) -> int:
    """The mode definitions applied literally, in exact rational arithmetic."""
    if math.isnan(amax) or math.isinf(amax):
        return NAN
    if amax == 0:
        return 0  # smallest scale
    fmt = get_format(fmt_name)
    a = Fraction(amax)
    _, exponent = math.frexp(amax)  # amax = m * 2^exponent, m in [0.5, 1), exactly
    e = exponent - 1  # floor(log2(amax)), subnormal amax included
    t = a / Fraction(2) ** e  # in [1, 2)
    if mode == "floor":
        k = e - fmt.emax
    elif mode == "ceil":
        k = e - fmt.emax + (1 if t != 1 else 0)
    elif mode == "even":  # round t to mant_bits bits, half up, then floor(log2)
        steps = 2**fmt.mant_bits
        rounded = Fraction(math.floor(t * steps + Fraction(1, 2)), steps)
        k = e + (1 if rounded >= 2 else 0) - fmt.emax
    elif mode == "rceil":  # smallest k with amax / 2^k <= max
        k = e - fmt.emax - 2
        while a > Fraction(fmt.max_finite) * Fraction(2) ** k:
            k += 1
    else:
        raise AssertionError(mode)
    return min(max(k + 127, 0), 254)


def _amax_sample() -> torch.Tensor:
    """Random float32 bit patterns over every positive finite value, plus the edge cases."""
    gen = torch.Generator().manual_seed(99)
    bits = torch.randint(0, 0x7F800000, (3000,), generator=gen, dtype=torch.int64)
    random = bits.to(torch.int32).view(torch.float32)
    edges = [case(get_format(f)) for f in MX_ELEMENT_FORMATS for case in AMAX_CASES.values()]
    near = np.array(edges, dtype=np.float32)
    with np.errstate(over="ignore"):  # float32 max steps up to inf, which is a case too
        around = np.concatenate([near, np.nextafter(near, np.inf), np.nextafter(near, 0)])
    extra = torch.tensor([0.0, float("nan"), float("inf")])
    return torch.cat([random, torch.from_numpy(around), extra])


@pytest.mark.parametrize("fmt", MX_ELEMENT_FORMATS)
@pytest.mark.parametrize("mode", MODE_ORDER)
def test_scale_codes_match_exact_reference(fmt: str, mode: str) -> None:
    amax = _amax_sample()
    spec = mx_spec(fmt, mode)
    got = stored_scale(compute_scale(amax, spec), spec)
    want = torch.tensor([_reference_code(a, fmt, mode) for a in amax.tolist()], dtype=torch.uint8)
    bad = torch.nonzero(got != want).flatten()
    assert bad.numel() == 0, (
        f"{bad.numel()} amax values disagree, e.g. {amax[bad[:4]].tolist()}: "
        f"got {got[bad[:4]].tolist()} want {want[bad[:4]].tolist()}"
    )
    assert bit_mismatches(e8m0_decode(got), compute_scale(amax, spec)) == 0


def test_scale_format_must_match_the_rule() -> None:
    spec = mx_spec("e2m1", "floor")
    wrong = type(spec)(spec.format, spec.block, "fp32", "floor")
    with pytest.raises(ValueError, match="produces e8m0 scales"):
        compute_scale(torch.tensor([1.0]), wrong)


@pytest.mark.parametrize("fmt", sorted(HAND))
def test_golden_holds_the_hand_derived_codes(fmt: str, golden_store: Any) -> None:
    """The committed golden says what the hand derivation says (not just what code did)."""
    data = golden_store.load(golden_entry(fmt))
    names = edge_blocks(fmt).names
    for mode in MODE_ORDER:
        stored = dict(zip(names, data.tensors[f"{mode}.scale_codes"].tolist(), strict=True))
        want = {name: codes[MODE_ORDER.index(mode)] for name, codes in HAND[fmt].items()}
        assert stored == want, f"golden mx_scales/{fmt} {mode}"
