"""Bit-exact reference codecs for low-precision element formats.

Every format is described by data (`ElementFormat`); a single table-driven codec serves
them all. Codes are always ``uint8`` tensors holding one code per element; FP4 packing
(two codes per byte) happens only at storage or kernel boundaries (`pack_fp4`).

Encoding is round-to-nearest-even with explicit saturation to the format's largest finite
value (or a smaller clamp a scheme asks for, such as 224 for e4m3fnuz). We never rely on
``tensor.to(torch.float8_*)``: its saturation behaviour differs between flavours.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum

import torch

__all__ = [
    "E8M0_BIAS",
    "E8M0_MAX_CODE",
    "E8M0_MIN_SCALE_BITS",
    "E8M0_NAN_CODE",
    "FORMATS",
    "ElementFormat",
    "Specials",
    "decode",
    "e8m0_decode",
    "e8m0_encode",
    "e8m0_scale_bits",
    "encode",
    "get_format",
    "pack_fp4",
    "unpack_fp4",
]


class Specials(Enum):
    """How a format spends its codes on NaN/Inf."""

    NONE = "none"  # every code is a finite number (fp6, fp4)
    FN = "fn"  # exponent and mantissa all ones is NaN, no Inf (e4m3fn)
    IEEE = "ieee"  # exponent all ones: Inf if mantissa 0, else NaN (e5m2)
    FNUZ = "fnuz"  # only the negative-zero code 0x80 is NaN, no -0, no Inf


@dataclass(frozen=True)
class ElementFormat:
    """A sign/exponent/mantissa minifloat, described by data."""

    name: str
    exp_bits: int
    mant_bits: int
    bias: int
    specials: Specials
    torch_dtype: str | None = None  # name of the matching torch dtype, if torch has one

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.mant_bits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.exp_bits + self.mant_bits)

    @property
    def has_negative_zero(self) -> bool:
        """Whether the sign bit with a zero magnitude is -0 (every format here but the FNUZ
        ones, where that code is NaN)."""
        return self.specials is not Specials.FNUZ

    @property
    def max_finite(self) -> float:
        return float(_tables(self).magnitudes[-1])

    @property
    def emax(self) -> int:
        """Exponent of the largest normal (the OCP MX spec's emax)."""
        return int(torch.tensor(self.max_finite).log2().floor().item())

    @property
    def min_normal(self) -> float:
        return float(2.0 ** (1 - self.bias))

    @property
    def min_subnormal(self) -> float:
        return float(2.0 ** (1 - self.bias - self.mant_bits))

    @property
    def nan_code(self) -> int | None:
        """The canonical (positive) NaN code, or None when the format has no NaN."""
        return _nan_code(self)

    def to_torch_dtype(self) -> torch.dtype:
        if self.torch_dtype is None or not hasattr(torch, self.torch_dtype):
            raise TypeError(f"torch {torch.__version__} has no dtype for {self.name}")
        dtype = getattr(torch, self.torch_dtype)
        assert isinstance(dtype, torch.dtype)
        return dtype


FORMATS: dict[str, ElementFormat] = {
    f.name: f
    for f in (
        ElementFormat("e4m3fn", 4, 3, 7, Specials.FN, "float8_e4m3fn"),
        ElementFormat("e4m3fnuz", 4, 3, 8, Specials.FNUZ, "float8_e4m3fnuz"),
        ElementFormat("e5m2", 5, 2, 15, Specials.IEEE, "float8_e5m2"),
        ElementFormat("e2m3", 2, 3, 1, Specials.NONE),
        ElementFormat("e3m2", 3, 2, 3, Specials.NONE),
        ElementFormat("e2m1", 2, 1, 1, Specials.NONE),
    )
}


def get_format(name: str) -> ElementFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown element format {name!r}; known: {sorted(FORMATS)}") from None


def _nan_code(fmt: ElementFormat) -> int | None:
    m = fmt.mant_bits
    if fmt.specials is Specials.FN:
        return (((1 << fmt.exp_bits) - 1) << m) | ((1 << m) - 1)
    if fmt.specials is Specials.IEEE:
        return (((1 << fmt.exp_bits) - 1) << m) | (1 << (m - 1))  # quiet NaN
    if fmt.specials is Specials.FNUZ:
        return fmt.sign_bit
    return None


def _code_value(fmt: ElementFormat, code: int) -> float:
    """Value of one code, straight from the format's definition."""
    m, e = fmt.mant_bits, fmt.exp_bits
    sign = -1.0 if code & fmt.sign_bit else 1.0
    exp_field = (code >> m) & ((1 << e) - 1)
    mant_field = code & ((1 << m) - 1)
    exp_all_ones = exp_field == (1 << e) - 1
    if fmt.specials is Specials.FNUZ and code == fmt.sign_bit:
        return float("nan")
    if fmt.specials is Specials.FN and exp_all_ones and mant_field == (1 << m) - 1:
        return float("nan")
    if fmt.specials is Specials.IEEE and exp_all_ones:
        return sign * float("inf") if mant_field == 0 else float("nan")
    if exp_field == 0:
        return sign * (mant_field / (1 << m)) * 2.0 ** (1 - fmt.bias)
    return sign * (1.0 + mant_field / (1 << m)) * 2.0 ** (exp_field - fmt.bias)


@dataclass(frozen=True)
class _Tables:
    decode: torch.Tensor  # float32[2**bits], value of every code
    magnitudes: torch.Tensor  # float64, finite non-negative values in code order 0..max
    magnitude_codes: torch.Tensor  # int64 codes of `magnitudes`


@functools.cache
def _tables(fmt: ElementFormat) -> _Tables:
    values = [_code_value(fmt, c) for c in range(1 << fmt.bits)]
    positive = [
        (c, v) for c, v in enumerate(values[: fmt.sign_bit]) if v == v and v != float("inf")
    ]
    mags = torch.tensor([v for _, v in positive], dtype=torch.float64)
    if not bool((mags[1:] > mags[:-1]).all()):
        raise AssertionError(f"{fmt.name}: positive codes are not monotonic")
    return _Tables(
        decode=torch.tensor(values, dtype=torch.float32),
        magnitudes=mags,
        magnitude_codes=torch.tensor([c for c, _ in positive], dtype=torch.int64),
    )


def magnitudes(fmt: ElementFormat | str) -> torch.Tensor:
    """The format's finite non-negative values, ascending (float64, built once per format;
    do not modify)."""
    return _tables(get_format(fmt) if isinstance(fmt, str) else fmt).magnitudes


def decode(codes: torch.Tensor, fmt: ElementFormat | str) -> torch.Tensor:
    """Decode ``uint8`` codes to float32 values (exact: every format fits in float32)."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    if codes.dtype != torch.uint8:
        raise TypeError(f"codes must be uint8, got {codes.dtype}")
    table = _tables(fmt).decode.to(codes.device)
    return table[codes.long()]


ELEMENT_TIES: frozenset[str] = frozenset({"even", "away"})  # how `encode` breaks ties


def encode(
    x: torch.Tensor,
    fmt: ElementFormat | str,
    clamp_max: float | None = None,
    *,
    ties: str = "even",
) -> torch.Tensor:
    """Encode values to ``uint8`` codes: round to nearest, ties to even, saturating.

    ``ties="away"`` breaks ties away from zero instead (an engine convention,
    harness.core.conventions); every other value rounds the same.

    ``clamp_max`` lowers the saturation bound (it must be a representable value, e.g. 224 for
    e4m3fnuz on stacks that clamp there). Inf saturates to the bound. NaN becomes the format's
    NaN code; formats without NaN give the negative-zero code, as ml_dtypes does (in MX, the
    block scale carries the NaN). e4m3fnuz has no -0, so negative values that round to zero
    give 0x00, never the NaN code 0x80.
    """
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    if ties not in ELEMENT_TIES:
        raise ValueError(f"ties={ties!r}; known: {sorted(ELEMENT_TIES)}")
    tables = _tables(fmt)
    bound = fmt.max_finite if clamp_max is None else float(clamp_max)
    if not 0 < bound <= fmt.max_finite or not bool((tables.magnitudes == bound).any()):
        raise ValueError(f"clamp_max={clamp_max} is not a positive {fmt.name} value")
    mags = tables.magnitudes.to(x.device)
    mag_codes = tables.magnitude_codes.to(x.device)

    # float64 holds every bf16/fp16/fp32 input exactly, so the distances below are exact.
    xd = x.detach().to(torch.float64)
    a = xd.abs().clamp(max=bound)
    a = torch.where(torch.isnan(a), torch.zeros_like(a), a)
    hi = torch.searchsorted(mags, a).clamp(max=mags.numel() - 1)
    lo = (hi - 1).clamp(min=0)
    d_lo = a - mags[lo]
    d_hi = mags[hi] - a
    hi_even = (mag_codes[hi] & 1) == 0
    tie_up = hi_even if ties == "even" else torch.ones_like(hi_even)  # away: the larger
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & tie_up)
    mag_code = torch.where(take_hi, mag_codes[hi], mag_codes[lo])

    negative = torch.signbit(xd)
    if fmt.specials is Specials.FNUZ:
        negative = negative & (mag_code != 0)  # no -0 in fnuz: 0x80 is NaN
    code = torch.where(negative, mag_code | fmt.sign_bit, mag_code)

    nan = torch.isnan(xd)
    nan_code = fmt.nan_code
    if nan_code is None:
        code = torch.where(nan, torch.full_like(code, fmt.sign_bit), code)
    elif fmt.specials is Specials.FNUZ:
        code = torch.where(nan, torch.full_like(code, nan_code), code)
    else:
        signed_nan = torch.where(negative, nan_code | fmt.sign_bit, nan_code)
        code = torch.where(nan, signed_nan, code)
    return code.to(torch.uint8)


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """Pack 4-bit codes along the last dim, element 0 in the low nibble (torch/torchao/TE)."""
    if codes.shape[-1] % 2:
        raise ValueError(f"last dim must be even to pack FP4, got {codes.shape[-1]}")
    if bool((codes > 0xF).any()):
        raise ValueError("FP4 codes must be < 16")
    lo, hi = codes[..., 0::2], codes[..., 1::2]
    return (hi << 4) | lo


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of `pack_fp4`."""
    lo, hi = packed & 0xF, packed >> 4
    return torch.stack([lo, hi], dim=-1).flatten(-2)


# ------------------------------------------------------------------------------- E8M0
# The OCP MX scale format: 8 exponent bits, no sign, no mantissa. Code c stands for
# 2^(c - 127); 0xFF is NaN; there is no zero. Code 0 (2^-127) is a float32 *subnormal*,
# so both directions work on float32 bit patterns with integer ops: nothing here can
# flush it to zero or round it.
E8M0_BIAS = 127
E8M0_MAX_CODE = 0xFE  # 2^127
E8M0_NAN_CODE = 0xFF
_F32_MANTISSA_BITS = 23
_F32_QUIET_NAN_BITS = 0x7FC00000
E8M0_MIN_SCALE_BITS = 1 << (_F32_MANTISSA_BITS - 1)  # float32 bits of 2^-127 (code 0): subnormal


def e8m0_decode(codes: torch.Tensor) -> torch.Tensor:
    """E8M0 codes (uint8) -> float32 scales: 2^(c-127), NaN for 0xFF, exactly."""
    if codes.dtype != torch.uint8:
        raise TypeError(f"E8M0 codes must be uint8, got {codes.dtype}")
    return e8m0_scale_bits(codes.to(torch.int32)).view(torch.float32)


def e8m0_scale_bits(codes: torch.Tensor) -> torch.Tensor:
    """`e8m0_decode` on int32 codes, giving the scales' float32 bit patterns (int32): the
    form a compiled kernel wants, since a bitcast inside one goes through memory."""
    bits = torch.where(
        codes == 0, torch.full_like(codes, E8M0_MIN_SCALE_BITS), codes << _F32_MANTISSA_BITS
    )
    return torch.where(codes == E8M0_NAN_CODE, torch.full_like(codes, _F32_QUIET_NAN_BITS), bits)


def e8m0_encode(scales: torch.Tensor) -> torch.Tensor:
    """float32 scales that are powers of two in [2^-127, 2^127] (or NaN) -> E8M0 codes.

    This is a lossless conversion, not a rounding: a scale E8M0 cannot hold exactly (zero,
    negative, infinite, not a power of two, outside the range) raises, so a stored code
    always means exactly the scale that was used. Choosing a scale is `harness.core.scales`' job.
    """
    if scales.dtype != torch.float32:
        raise TypeError(f"E8M0 encoding takes float32 scales, got {scales.dtype}")
    bits = scales.contiguous().view(torch.int32)
    exp_field = (bits >> _F32_MANTISSA_BITS) & 0xFF
    mantissa = bits & ((1 << _F32_MANTISSA_BITS) - 1)
    nan = torch.isnan(scales)
    normal_pow2 = (bits > 0) & (mantissa == 0) & (exp_field >= 1) & (exp_field <= E8M0_MAX_CODE)
    min_scale = bits == E8M0_MIN_SCALE_BITS
    bad = ~(nan | normal_pow2 | min_scale)
    if bool(bad.any()):
        examples = scales[bad].flatten()[:4].tolist()
        raise ValueError(
            f"{int(bad.sum())} scale(s) are not E8M0 values (powers of two in [2^-127, 2^127] "
            f"or NaN), e.g. {examples}; E8M0 scales must come from an E8M0 scale rule"
        )
    code = torch.where(min_scale, torch.zeros_like(exp_field), exp_field)
    code = torch.where(nan, torch.full_like(code, E8M0_NAN_CODE), code)
    return code.to(torch.uint8).reshape(scales.shape)
