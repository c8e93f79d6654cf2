"""Scale selection: from a tile's absolute maximum to the scale that divides it.

A registry maps each `QuantSpec.scale_rounding` mode to a function
``(amax, spec) -> float32 scale`` and to the scale format it produces. FP32 scales use
"exact" (amax / qmax); E8M0 (MX) scales use one of the power-of-two modes that real stacks
disagree on, so the mode is part of a scheme:

- ``floor`` (OCP MX spec): e = floor(log2(amax)) - emax
- ``rceil`` (cuBLAS, TransformerEngine): the smallest power of two with amax / 2^e <= max
- ``even`` (AMD Quark / aiter): round amax's mantissa to the element's mantissa width by
  adding half an ULP at that width and truncating, then as ``floor``
- ``ceil``: ``floor``, plus one when amax's mantissa is non-zero

``emax`` is the exponent of the element format's largest normal. Every E8M0 mode works on
the float32 bits of amax with integer ops, so no float rounding (and no bf16 round trip)
happens between amax and its scale. Shared edge rules: the exponent is clamped to E8M0's
range [-127, 127]; a zero block (or one whose amax is a float32 subnormal, below 2^-126)
gets the smallest scale 2^-127 (every mode's exponent is below -127 there, since emax >= 2,
and ``rceil`` needs no more: amax / 2^-127 < 2 <= max); a block holding NaN or Inf gets
the NaN scale (E8M0 code 0xFF).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.core.conventions import apply_scale_conventions, two_level_block
from harness.core.fastcodec import decode_fast, encode_fast
from harness.core.formats import (
    E8M0_BIAS,
    E8M0_MAX_CODE,
    E8M0_NAN_CODE,
    ElementFormat,
    e8m0_decode,
    get_format,
)
from harness.core.scale_formats import (
    E4M3,
    E4M3_SCALE_ELEMENT,
    E4M3_X_FP32,
    E8M0,
    FP32,
    ScaleFormat,
)
from harness.core.spec import QuantSpec

ScaleRule = Callable[[torch.Tensor, QuantSpec], torch.Tensor]
SCALE_RULES: dict[str, ScaleRule] = {}
# rule name -> the scale formats its scales fit (a two-level format's block level included)
SCALE_RULE_FORMATS: dict[str, frozenset[ScaleFormat]] = {}


def scale_rule(name: str, *scale_formats: ScaleFormat) -> Callable[[ScaleRule], ScaleRule]:
    def register(fn: ScaleRule) -> ScaleRule:
        if name in SCALE_RULES:
            raise ValueError(f"scale rule {name!r} registered twice")
        SCALE_RULES[name] = fn
        SCALE_RULE_FORMATS[name] = frozenset(scale_formats or (FP32,))
        return fn

    return register


def compute_scale(
    amax: torch.Tensor, spec: QuantSpec, global_scale: torch.Tensor | None = None
) -> torch.Tensor:
    """Scale per tile (float32) for tiles whose absolute maxima are ``amax``.

    A two-level scale format (``per_tensor_level``) needs the tensor's ``global_scale``
    (`compute_global_scale`): its block scales are ``(amax / qmax) / global_scale`` rounded
    to the block format; one-level formats take none.
    """
    try:
        rule = SCALE_RULES[spec.scale_rounding]
    except KeyError:
        raise KeyError(
            f"unknown scale rounding {spec.scale_rounding!r}; known: {sorted(SCALE_RULES)}"
        ) from None
    fits = SCALE_RULE_FORMATS[spec.scale_rounding]
    if spec.scale_fmt not in fits:
        raise ValueError(
            f"scale rounding {spec.scale_rounding!r} produces "
            f"{'/'.join(sorted(f.name for f in fits))} scales, but the spec asks for "
            f"{spec.scale_format}; pick a rule of that format"
        )
    if spec.scale_fmt.per_tensor_level != (global_scale is not None):
        raise ValueError(
            f"{spec.scale_format} scales take a per-tensor global scale exactly when the "
            "format has a per-tensor level"
        )
    if global_scale is not None:
        scale = _over_global(amax.float(), spec, global_scale)
    else:
        scale = rule(amax.float(), spec)
    if spec.conventions:
        scale = apply_scale_conventions(amax.float(), scale, spec)
    return scale


_F32_MIN_POSITIVE = 2.0**-149  # the smallest positive float32 (a subnormal)


@scale_rule("exact", FP32)
def _exact(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """amax / qmax in float32, so the tile's largest value maps onto the format's bound.

    A tile of zeros gets scale 1: its codes are zero whatever the scale, and 1 keeps the
    division finite. A non-zero tile whose amax / qmax underflows to 0 (amax at most
    qmax * 2^-150, float32 subnormals only) gets the smallest positive float32, 2^-149, so
    its elements still divide to finite codes (they saturate or round as any other tile's)
    instead of 0/0 = NaN. NaN/Inf maxima give NaN/Inf scales and surface as non-finite output.
    """
    scale = amax / spec.qmax
    scale = torch.where((scale == 0) & (amax > 0), torch.full_like(scale, _F32_MIN_POSITIVE), scale)
    return torch.where(amax == 0, torch.ones_like(scale), scale)


# ------------------------------------------------------------------------------ E8M0
_F32_MANT_BITS = 23
_F32_MANT_MASK = (1 << _F32_MANT_BITS) - 1
_F32_EXP_FIELD_INF = 0xFF
_F32_EXP_BIAS = 127


@dataclass(frozen=True)
class _Element:
    """What the E8M0 modes need to know about an element format."""

    emax: int
    mant_bits: int
    max_mantissa: int  # the 23-bit float32 mantissa field of the format's largest value

    @classmethod
    def of(cls, fmt: ElementFormat, bound: float | None = None) -> _Element:
        """``bound``: the spec's saturation bound where it is below the format's largest
        value (a clamped e4m3fnuz's 224): the largest value a scaled block must fit under."""
        top = fmt.max_finite if bound is None else bound
        max_bits = torch.tensor(top, dtype=torch.float32).view(torch.int32)
        return cls(fmt.emax, fmt.mant_bits, int(max_bits) & _F32_MANT_MASK)


# (amax's unbiased float32 exponent, its 23-bit mantissa field, element) -> scale exponent.
# Only called meaningfully for normal amax; the shared wrapper handles the rest.
ExponentRule = Callable[[torch.Tensor, torch.Tensor, _Element], torch.Tensor]


def _e8m0_rule(exponent: ExponentRule) -> ScaleRule:
    """Wrap an exponent rule with the shared edge cases and the clamp to E8M0's range."""

    def rule(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
        element = _Element.of(get_format(spec.format), spec.clamp_max)
        bits = amax.float().contiguous().view(torch.int32)
        exp_field = (bits >> _F32_MANT_BITS) & 0xFF
        mantissa = bits & _F32_MANT_MASK
        e = exponent(exp_field - _F32_EXP_BIAS, mantissa, element)
        code = (e + E8M0_BIAS).clamp(0, E8M0_MAX_CODE)
        code = torch.where(exp_field == 0, torch.zeros_like(code), code)  # zero or subnormal
        nonfinite = exp_field == _F32_EXP_FIELD_INF  # NaN or Inf in the block
        code = torch.where(nonfinite, torch.full_like(code, E8M0_NAN_CODE), code)
        return e8m0_decode(code.to(torch.uint8)).reshape(amax.shape)

    return rule


def _floor(e: torch.Tensor, mantissa: torch.Tensor, element: _Element) -> torch.Tensor:
    return e - element.emax


def _ceil(e: torch.Tensor, mantissa: torch.Tensor, element: _Element) -> torch.Tensor:
    return e - element.emax + (mantissa != 0).to(e.dtype)


def _rceil(e: torch.Tensor, mantissa: torch.Tensor, element: _Element) -> torch.Tensor:
    # amax / 2^(e - emax) = 1.mantissa * 2^emax fits under max = 1.max_mantissa * 2^emax
    # exactly when mantissa <= max_mantissa; otherwise one more power of two is the smallest
    # that fits (1.mantissa * 2^(emax-1) < 2^emax <= max), and one fewer never fits.
    return e - element.emax + (mantissa > element.max_mantissa).to(e.dtype)


def _even(e: torch.Tensor, mantissa: torch.Tensor, element: _Element) -> torch.Tensor:
    # Add half an ULP at the element's mantissa width; a carry out of the 23-bit field
    # bumps the exponent (the truncation that follows cannot change it).
    half_ulp = 1 << (_F32_MANT_BITS - element.mant_bits - 1)
    carry = (mantissa + half_ulp) >> _F32_MANT_BITS
    return e + carry - element.emax


E8M0_MODES: dict[str, ExponentRule] = {
    "floor": _floor,
    "rceil": _rceil,
    "even": _even,
    "ceil": _ceil,
}
for _mode, _exponent in E8M0_MODES.items():
    scale_rule(_mode, E8M0)(_e8m0_rule(_exponent))


# ------------------------------------------------------------------------------ E4M3
# FP8 E4M3 block scales (NVFP4): amax / qmax rounded to nearest even on E4M3's grid,
# saturating at 448 (the fast codec is the exhaustively checked one; its subnormals, down
# to 2^-9, are scales like any other). A tile holding NaN or Inf gets the NaN scale, as
# the E8M0 modes give it (`ScaleFormat.nan_for_nonfinite_block`); a scale that rounds to
# zero (amax / qmax below 2^-10 of the level above) is zero, and its elements encode to
# +-0 (`harness.core.quantize`). For the two-level form the value rounded is
# ``(amax / qmax) / global_scale`` (`_over_global`); a nonfinite amax stays nonfinite.
E4M3_MAX = 448.0  # the largest E4M3 value, the saturation bound of a block scale


def e4m3_round(values: torch.Tensor, amax: torch.Tensor) -> torch.Tensor:
    """float32 ``values`` rounded to E4M3 (RNE, saturating at 448: a quotient that
    overflowed to Inf saturates too), as float32; NaN where ``amax``, the tile's absolute
    maximum, is NaN or Inf (a nonfinite block's scale)."""
    codes = encode_fast(values.float().contiguous(), E4M3_SCALE_ELEMENT)
    rounded = decode_fast(codes, E4M3_SCALE_ELEMENT)
    return torch.where(torch.isfinite(amax), rounded, torch.full_like(rounded, torch.nan))


@scale_rule("e4m3_rne", E4M3, E4M3_X_FP32)
def _e4m3_rne(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """amax / qmax, rounded to E4M3 (one level; the two-level form divides by the global
    scale before rounding, `_over_global`)."""
    return e4m3_round(amax / spec.qmax, amax)


def _over_global(amax: torch.Tensor, spec: QuantSpec, global_scale: torch.Tensor) -> torch.Tensor:
    """The two-level block scale: ``(amax / qmax) / global_scale`` in float32, rounded to
    the block format (the reference definition, docs/SCHEMES.md#nvfp4), or the quotient a
    convention in effect computes instead (`conventions.two_level_block`)."""
    quotient = two_level_block(spec)
    if quotient is not None:
        return e4m3_round(quotient(amax, global_scale, spec), amax)
    return e4m3_round((amax / spec.qmax) / global_scale.float(), amax)


def compute_global_scale(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """The per-tensor level of a two-level scale from the tensor's absolute maximum:
    ``amax / (qmax * 448)`` in float32, so the largest block scale lands on E4M3's 448. A
    zero tensor (or an amax so small the quotient underflows to zero) gets 1: its block
    scales then round to zero or E4M3 subnormals, never divide by zero. NaN or Inf amax
    propagates."""
    amax = amax.float().reshape(1, 1)
    scale = amax / (spec.qmax * E4M3_MAX)
    return torch.where(scale == 0, torch.ones_like(scale), scale)


# ------------------------------------------------------------------- saturation loss
# How far above the element's max a block's largest value can land after division by the
# scale, as the largest amax / scale a rule allows in units of 2^emax (exclusive bounds):
# floor leaves amax / scale in [2^emax, 2^(emax+1)); even rounds the mantissa up first, so
# without a carry it is below (2 - 2^-(m+1)) * 2^emax; rceil and ceil never exceed the max.
_LARGEST_RATIO: dict[str, Callable[[ElementFormat], float]] = {
    "floor": lambda fmt: 2.0,
    "even": lambda fmt: 2.0 - 2.0 ** -(fmt.mant_bits + 1),
    "rceil": lambda fmt: fmt.max_finite / 2.0**fmt.emax,
    "ceil": lambda fmt: 1.0,
    # E4M3 rounds amax / qmax to nearest even with 3 mantissa bits, down by at most 2^-4
    # relative: amax / scale stays below qmax * (1 + 2^-4) (float32's own rounding of the
    # quotient is far inside that margin).
    "e4m3_rne": lambda fmt: fmt.max_finite * (1 + 2.0**-4) / 2.0**fmt.emax,
}


def saturation_loss(spec: QuantSpec) -> float:
    """Largest relative error saturation can add to a block's largest element.

    Elements above the format's max (or the spec's clamp) saturate to it. "exact" scales map
    amax onto qmax itself, so nothing saturates; E8M0 modes can leave amax / scale above
    max, e.g. floor with e4m3: amax / scale < 512, saturated to 448, loses up to 1/8.
    """
    ratio = _LARGEST_RATIO.get(spec.scale_rounding)
    if ratio is None:
        return 0.0
    fmt = get_format(spec.format)
    return max(0.0, 1.0 - spec.qmax / (ratio(fmt) * 2.0**fmt.emax))
