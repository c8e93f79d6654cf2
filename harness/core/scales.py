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

from harness.core.conventions import apply_scale_conventions
from harness.core.formats import (
    E8M0_BIAS,
    E8M0_MAX_CODE,
    E8M0_NAN_CODE,
    ElementFormat,
    e8m0_decode,
    get_format,
)
from harness.core.spec import QuantSpec

ScaleRule = Callable[[torch.Tensor, QuantSpec], torch.Tensor]
SCALE_RULES: dict[str, ScaleRule] = {}
SCALE_RULE_FORMATS: dict[str, str] = {}  # rule name -> the scale format its scales fit


def scale_rule(name: str, scale_format: str = "fp32") -> Callable[[ScaleRule], ScaleRule]:
    def register(fn: ScaleRule) -> ScaleRule:
        if name in SCALE_RULES:
            raise ValueError(f"scale rule {name!r} registered twice")
        SCALE_RULES[name] = fn
        SCALE_RULE_FORMATS[name] = scale_format
        return fn

    return register


def compute_scale(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Scale per tile (float32) for tiles whose absolute maxima are ``amax``."""
    try:
        rule = SCALE_RULES[spec.scale_rounding]
    except KeyError:
        raise KeyError(
            f"unknown scale rounding {spec.scale_rounding!r}; known: {sorted(SCALE_RULES)}"
        ) from None
    produces = SCALE_RULE_FORMATS[spec.scale_rounding]
    if produces != spec.scale_format:
        raise ValueError(
            f"scale rounding {spec.scale_rounding!r} produces {produces} scales, but the spec "
            f"asks for {spec.scale_format}; pick a rule of that format"
        )
    scale = rule(amax.float(), spec)
    if spec.conventions:
        scale = apply_scale_conventions(amax.float(), scale, spec)
    return scale


_F32_MIN_POSITIVE = 2.0**-149  # the smallest positive float32 (a subnormal)


@scale_rule("exact", scale_format="fp32")
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
    def of(cls, fmt: ElementFormat) -> _Element:
        max_bits = torch.tensor(fmt.max_finite, dtype=torch.float32).view(torch.int32)
        return cls(fmt.emax, fmt.mant_bits, int(max_bits) & _F32_MANT_MASK)


# (amax's unbiased float32 exponent, its 23-bit mantissa field, element) -> scale exponent.
# Only called meaningfully for normal amax; the shared wrapper handles the rest.
ExponentRule = Callable[[torch.Tensor, torch.Tensor, _Element], torch.Tensor]


def _e8m0_rule(exponent: ExponentRule) -> ScaleRule:
    """Wrap an exponent rule with the shared edge cases and the clamp to E8M0's range."""

    def rule(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
        element = _Element.of(get_format(spec.format))
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
    scale_rule(_mode, scale_format="e8m0")(_e8m0_rule(_exponent))


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
