"""Quantization schemes as data, and the registry that names them.

A scheme says how the weight and the activation of a linear layer are quantized: element
format, scale granularity (a tile of rows x columns sharing one scale), scale format and
rounding, static or dynamic activation scales. Code that needs to know a scheme's
behaviour reads these fields; nothing parses scheme names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.formats import get_format

WHOLE = None  # a block dimension of WHOLE spans the whole tensor dimension


@dataclass(frozen=True)
class QuantSpec:
    """How one tensor ([rows, K], K the reduction dim) is quantized."""

    format: str  # element format name, see harness.formats.FORMATS
    block: tuple[int | None, int | None] = (WHOLE, WHOLE)  # rows x cols sharing one scale
    scale_format: str = "fp32"  # "fp32" or "e8m0"
    scale_rounding: str = "exact"  # "exact" (fp32 amax/max) or an E8M0 mode, see harness.scales
    dynamic: bool = False  # activations: scale computed per call (True) or calibrated (False)
    clamp_max: float | None = None  # saturation bound below the format max (e.g. 224 for fnuz)

    def __post_init__(self) -> None:
        get_format(self.format)  # fail fast on a typo

    @property
    def granularity(self) -> str:
        rows, cols = self.block
        if rows is WHOLE and cols is WHOLE:
            return "per_tensor"
        if rows == 1 and cols is WHOLE:
            return "per_row"
        return f"block_{rows or 'all'}x{cols or 'all'}"

    @property
    def qmax(self) -> float:
        return self.clamp_max if self.clamp_max is not None else get_format(self.format).max_finite

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "granularity": self.granularity,
            "block": list(self.block),
            "scale_format": self.scale_format,
            "scale_rounding": self.scale_rounding,
            "dynamic": self.dynamic,
            "clamp_max": self.clamp_max,
        }


@dataclass(frozen=True)
class Scheme:
    """A named weight/activation quantization recipe, as checkpoints name them."""

    name: str
    family: str  # "fp8" or "mx"
    weight: QuantSpec
    activation: QuantSpec | None  # None: activations stay in high precision
    sqnr_floor_db: float  # minimum SQNR of the layer output vs the unquantized product
    description: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "weight": self.weight.to_json(),
            "activation": None if self.activation is None else self.activation.to_json(),
            "sqnr_floor_db": self.sqnr_floor_db,
            "description": self.description,
        }


SCHEMES: dict[str, Scheme] = {}


def register_scheme(scheme: Scheme) -> Scheme:
    if scheme.name in SCHEMES:
        raise ValueError(f"scheme {scheme.name!r} registered twice")
    SCHEMES[scheme.name] = scheme
    return scheme


class UnknownSchemeError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def get_scheme(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        known = ", ".join(sorted(SCHEMES))
        raise UnknownSchemeError(f"unknown scheme {name!r}; known schemes: {known}") from None


def scheme_names() -> list[str]:
    return sorted(SCHEMES)


# ------------------------------------------------------------------------------ FP8
# SQNR floor for FP8 e4m3 schemes: RNE with 3 mantissa bits bounds each operand's relative
# error by 2^-4 (-24 dB worst case, about -29 dB RMS); the product of two such operands stays
# above 20 dB with margin for the inputs' spread across one scale.
_FP8_SQNR_FLOOR_DB = 20.0

register_scheme(
    Scheme(
        name="fp8_per_tensor",
        family="fp8",
        weight=QuantSpec("e4m3fn"),
        activation=QuantSpec("e4m3fn", dynamic=False),
        sqnr_floor_db=_FP8_SQNR_FLOOR_DB,
        description="FP8 e4m3fn, static per-tensor weight and activation scales",
    )
)
