"""Fast codecs: the reference codecs of `harness.core.formats` and `harness.core.scales`, again,
by integer arithmetic on float32 bits.

The reference encoder goes through float64 and a search over each format's code table, which
is easy to read and slow (a 4096x4096 tensor takes seconds). These functions give the same
codes bit for bit (tests/core/test_fastcodec.py sweeps them against the reference) at a few passes
over memory each:

- element encode: clamp the magnitude bits to the saturation bound, then round to nearest
  even at the format's mantissa width by add-and-shift on the float32 bits (normal range), or
  by one float32 addition of a power of two whose ULP is the format's smallest subnormal
  (subnormal range: IEEE addition rounds to nearest even). Sign, NaN and FNUZ's missing -0
  are patched in place afterwards, as the reference defines them. FP8 formats, which torch
  has dtypes for, take torch's own cast after the same clamp instead (same codes, fewer
  operations per element; only NaN is patched).
- E8M0 scales: the float32 exponent field of the block's amax, moved by the mode's rule.
- decode: one gather from the format's 256-entry value table with int32 indices.

Only float32 (and bf16/fp16, widened exactly) inputs take this path; anything else goes to
the reference. Work buffers are reused in place: at this size a fresh allocation costs as
much as an arithmetic pass.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from harness.core.formats import (
    E8M0_BIAS,
    E8M0_MAX_CODE,
    E8M0_MIN_SCALE_BITS,
    E8M0_NAN_CODE,
    ElementFormat,
    Specials,
    decode,
    e8m0_decode,
    e8m0_encode,
    e8m0_scale_bits,
    encode,
    get_format,
    magnitudes,
)
from harness.core.fused import SCALE_GRID_MIN_ELEMENTS, large_cpu_compiled

__all__ = [
    "decode_fast",
    "decode_scaled",
    "divide_and_encode",
    "e8m0_block_encode",
    "e8m0_codes_fast",
    "e8m0_codes_of",
    "e8m0_codes_of_bits",
    "e8m0_encode_fast",
    "e8m0_inverse_scale",
    "encode_fast",
    "encode_scaled",
    "encode_scaled_finite",
    "encoder",
    "pack_fp4_fast",
]

_F32_MANT_BITS = 23
_F32_ABS_MASK = 0x7FFFFFFF
_F32_INF_BITS = 0x7F800000
_SIGN_AND_MANTISSA = -0x7F800001  # 0x807FFFFF as an int32
_WIDENED_EXACTLY = (torch.float32, torch.bfloat16, torch.float16)


def _f32_bits(value: float) -> int:
    return int(torch.tensor(value, dtype=torch.float32).view(torch.int32))


@dataclass(frozen=True)
class _Encoder:
    """Constants of one (format, saturation bound) pair, all as float32 bit patterns."""

    fmt: ElementFormat
    bound: float
    bound_bits: int  # the saturation bound's bits: magnitudes are clamped to it first
    min_normal_bits: int  # below this the format is subnormal
    shift: int  # 23 - mant_bits: float32 mantissa bits the format drops
    round_offset: int  # half an ULP minus one, minus the exponent rebias (127 - bias) << 23
    magic: float  # 2^(emin - m + 23): its float32 ULP is the format's smallest subnormal
    magic_bits: int
    sign_bit: int
    bits: int  # the format's width: the sign is bit (bits - 1)
    specials: Specials
    nan_code: int | None
    native: torch.dtype | None  # torch's dtype for the format where torch has one (FP8)


@functools.cache
def _encoder(fmt: ElementFormat, bound: float) -> _Encoder:
    emin = 1 - fmt.bias
    shift = _F32_MANT_BITS - fmt.mant_bits
    magic = 2.0 ** (emin - fmt.mant_bits + _F32_MANT_BITS)
    return _Encoder(
        fmt=fmt,
        bound=bound,
        bound_bits=_f32_bits(bound),
        min_normal_bits=_f32_bits(fmt.min_normal),
        shift=shift,
        round_offset=(1 << (shift - 1)) - 1 - ((127 - fmt.bias) << _F32_MANT_BITS),
        magic=magic,
        magic_bits=_f32_bits(magic),
        sign_bit=fmt.sign_bit,
        bits=fmt.bits,
        specials=fmt.specials,
        nan_code=fmt.nan_code,
        native=_torch_dtype(fmt),
    )


def _torch_dtype(fmt: ElementFormat) -> torch.dtype | None:
    try:
        return fmt.to_torch_dtype()
    except TypeError:  # FP6/FP4, or a torch without this FP8 dtype
        return None


def _bound(fmt: ElementFormat, clamp_max: float | None) -> float:
    """The saturation bound, validated as the reference validates it."""
    bound = fmt.max_finite if clamp_max is None else float(clamp_max)
    if not 0 < bound <= fmt.max_finite or not bool((magnitudes(fmt) == bound).any()):
        raise ValueError(f"clamp_max={clamp_max} is not a positive {fmt.name} value")
    return bound


def encode_fast(
    x: torch.Tensor, fmt: ElementFormat | str, clamp_max: float | None = None
) -> torch.Tensor:
    """`harness.core.formats.encode`, bit for bit, by integer arithmetic on float32 bits."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    bound = _bound(fmt, clamp_max)
    if x.dtype not in _WIDENED_EXACTLY:
        return encode(x, fmt, clamp_max)  # float64 and integer inputs: the reference decides
    return _encode_fused(x.detach().float().contiguous(), _encoder(fmt, bound))


def encoder(fmt: ElementFormat | str, clamp_max: float | None = None) -> _Encoder:
    """The validated constants `encode_scaled` needs for ``fmt`` and its saturation bound."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    return _encoder(fmt, _bound(fmt, clamp_max))


def encode_scaled(x: torch.Tensor, enc: _Encoder) -> torch.Tensor:
    """The element encode on float32 ``x``, in plain tensor operations only (no Python
    branches on data, no in-place updates), so that `torch.compile` can fuse it into one
    loop (harness.core.fused) and eager mode runs the very same arithmetic.

    Formats torch has a dtype for (FP8) take torch's own cast after the clamp: it rounds to
    nearest even and gives the bit arithmetic's code for every float32 (all 2^32 patterns,
    eager and compiled: ``python -m tests.core.sweep_fp8_cast``), in fewer operations per
    element; only NaN is patched, to the reference's code."""
    if enc.native is not None:
        return _encode_by_cast(x, enc, enc.native)
    bits = x.view(torch.int32)
    mag = bits & _F32_ABS_MASK
    nan = mag > _F32_INF_BITS
    mag = mag.clamp(max=enc.bound_bits)  # saturate (Inf and NaN too; NaN is patched below)
    # Subnormal range: float32 addition rounds |x| to a multiple of the smallest subnormal.
    # Above it this count is never below the normal-range code (the float32 grid there is at
    # least as fine as the format's), so the smaller of the two codes is the right one.
    sub = (mag.view(torch.float32) + enc.magic).view(torch.int32) - enc.magic_bits
    # Normal range: round to nearest even at bit `shift`, rebias the exponent, shift down.
    # Magnitudes below the smallest normal are lifted to it, so they give its code, 2^m,
    # which is never below their subnormal code.
    mag = mag.clamp(min=enc.min_normal_bits)
    mag = (mag + (((mag >> enc.shift) & 1) + enc.round_offset)) >> enc.shift
    code = torch.minimum(mag, sub)

    negative = bits < 0  # the float32 sign bit, NaN included
    if enc.specials is Specials.FNUZ:
        negative = negative & (code != 0)  # no -0 in fnuz: 0x80 is its NaN
    code = code | (negative.to(torch.int32) << (enc.bits - 1))
    if enc.specials in (Specials.FN, Specials.IEEE):
        assert enc.nan_code is not None
        nan_code = (bits < 0).to(torch.int32) << (enc.bits - 1) | enc.nan_code  # keeps its sign
    else:
        # No NaN code: the negative-zero code (the MX block scale carries the NaN); FNUZ: 0x80.
        return torch.where(nan, enc.sign_bit if enc.nan_code is None else enc.nan_code, code).to(
            torch.uint8
        )
    return torch.where(nan, nan_code, code).to(torch.uint8)


def _encode_by_cast(x: torch.Tensor, enc: _Encoder, dtype: torch.dtype) -> torch.Tensor:
    # Saturate, then torch's round-to-nearest-even cast. NaN is patched to the reference's
    # code (a compiled clamp may change a NaN's sign), by `x != x` and int32 arithmetic,
    # which inductor vectorizes (isnan and uint8 vectors it does not).
    code = x.clamp(-enc.bound, enc.bound).to(dtype).view(torch.uint8).to(torch.int32)
    assert enc.nan_code is not None  # every FP8 format has a NaN code
    if enc.specials is Specials.FNUZ:
        return torch.where(x != x, enc.nan_code, code).to(torch.uint8)  # 0x80, unsigned
    sign = (x.view(torch.int32) >> (32 - enc.bits)) & (1 << (enc.bits - 1))
    return torch.where(x != x, sign | enc.nan_code, code).to(torch.uint8)  # keeps the sign


def encode_scaled_finite(x: torch.Tensor, enc: _Encoder) -> torch.Tensor:
    """`encode_scaled` for ``x`` without NaN: the same codes, minus the NaN patch. FP8 is
    the clamp and torch's cast alone, returned in torch's FP8 dtype, whose bytes are the
    codes (``.view(torch.uint8)``): a bitcast inside a compiled kernel goes through memory,
    one outside it is free."""
    if enc.native is None:
        return encode_scaled(x, enc)
    return x.clamp(-enc.bound, enc.bound).to(enc.native)


_encode_fused = large_cpu_compiled(encode_scaled)


@large_cpu_compiled
def divide_and_encode(x: torch.Tensor, scale: torch.Tensor, enc: _Encoder) -> torch.Tensor:
    """Codes of float32 ``x / scale`` (IEEE division, broadcasting): quantize's element
    step, one fused pass on large CPU tensors (harness.core.fused)."""
    return encode_scaled(x / scale, enc)


@functools.cache
def _decode_table(fmt: ElementFormat, device: torch.device) -> torch.Tensor:
    return decode(torch.arange(1 << fmt.bits, dtype=torch.uint8), fmt).to(device)


def decode_fast(codes: torch.Tensor, fmt: ElementFormat | str) -> torch.Tensor:
    """`harness.core.formats.decode`, bit for bit: a gather from the same value table."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    _check_codes(codes)
    return _lookup(codes, _decode_table(fmt, codes.device))


def decode_scaled(
    codes: torch.Tensor, fmt: ElementFormat | str, scale: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """``decode_fast(codes, fmt).to(dtype) * scale`` (``scale`` in ``dtype``, broadcasting):
    dequantize's element step, one fused pass on large CPU tensors (harness.core.fused)."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    _check_codes(codes)
    return _lookup_and_scale(codes, _decode_table(fmt, codes.device), scale, dtype)


def _check_codes(codes: torch.Tensor) -> None:
    if codes.dtype != torch.uint8:
        raise TypeError(f"codes must be uint8, got {codes.dtype}")


def _lookup(codes: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    index = codes.reshape(-1).to(torch.int32)
    return torch.index_select(table, 0, index).reshape(codes.shape)


@large_cpu_compiled
def _lookup_and_scale(
    codes: torch.Tensor, table: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    # Every table value is exact in float16 and bfloat16 too (at most 4 significant bits,
    # exponents in range: tests/core/test_fused.py), so a compiled kernel that skips the
    # round trip through dtype gives the eager bits; the product rounds once either way.
    return _lookup(codes, table).to(dtype) * scale


# ------------------------------------------------------------------------------- E8M0
E8M0_RULE_MODES = ("floor", "ceil", "rceil", "even")


@dataclass(frozen=True)
class E8M0Rule:
    """One E8M0 scale mode for one element format, as plain integers (compile constants)."""

    mode: str
    emax: int  # the element format's largest exponent
    max_mant: int  # float32 mantissa field of its max value (rceil)
    half_ulp: int  # half an ULP at its mantissa width, in float32 bits (even)


@functools.cache
def e8m0_rule(mode: str, fmt: ElementFormat | str) -> E8M0Rule:
    """`E8M0Rule` of ``mode`` for ``fmt``; KeyError for an unknown mode."""
    if mode not in E8M0_RULE_MODES:
        raise KeyError(f"unknown E8M0 scale mode {mode!r}")
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    return E8M0Rule(
        mode=mode,
        emax=fmt.emax,
        max_mant=_f32_bits(fmt.max_finite) & ((1 << _F32_MANT_BITS) - 1),
        half_ulp=1 << (_F32_MANT_BITS - fmt.mant_bits - 1),
    )


def e8m0_codes_fast(amax: torch.Tensor, mode: str, fmt: ElementFormat | str) -> torch.Tensor:
    """E8M0 scale codes for blocks whose absolute maxima are ``amax``, for one scale mode.

    Same rules as `harness.core.scales` (see its docstring): floor, rceil, even, ceil on the
    float32 exponent and mantissa fields of amax; clamp to [0, 0xFE]; zero or subnormal amax
    gives code 0; NaN or Inf gives 0xFF.
    """
    return e8m0_codes_of(amax.float().contiguous(), e8m0_rule(mode, fmt))


def e8m0_codes_of(amax: torch.Tensor, rule: E8M0Rule) -> torch.Tensor:
    """`e8m0_codes_fast` on float32 ``amax`` in plain tensor operations (fusable)."""
    return e8m0_codes_of_bits(amax.view(torch.int32), rule).to(torch.uint8)


def e8m0_codes_of_bits(amax_bits: torch.Tensor, rule: E8M0Rule) -> torch.Tensor:
    """`e8m0_codes_of` on the float32 bit patterns of amax (int32), giving int32 codes: the
    form a compiled kernel wants, since a bitcast inside one goes through memory."""
    bits = amax_bits & _F32_ABS_MASK
    exp_field = bits >> _F32_MANT_BITS
    mantissa = bits & ((1 << _F32_MANT_BITS) - 1)
    if rule.mode == "floor":
        code = exp_field - rule.emax
    elif rule.mode == "ceil":
        code = exp_field + (mantissa != 0).to(torch.int32) - rule.emax
    elif rule.mode == "rceil":
        code = exp_field + (mantissa > rule.max_mant).to(torch.int32) - rule.emax
    else:  # "even"
        # Adding half an ULP at the element's width to the whole bit pattern carries into
        # the exponent field exactly when the mantissa rounds up to the next power of two.
        code = ((bits + rule.half_ulp) >> _F32_MANT_BITS) - rule.emax
    # exp_field - 127 - emax is the exponent; + E8M0_BIAS (127) is the code.
    code = code.clamp(0, E8M0_MAX_CODE)
    code = torch.where(exp_field == 0, 0, code)  # zero or float32-subnormal amax: 2^-127
    code = torch.where(exp_field == 0xFF, E8M0_NAN_CODE, code)  # NaN or Inf in the block
    assert E8M0_BIAS == 127
    return code


def e8m0_inverse_scale(codes: torch.Tensor) -> torch.Tensor:
    """1 / scale for int32 E8M0 codes, exactly (a power of two, float32): the scale
    2^(c - 127) of code c has the inverse 2^(127 - c), whose float32 exponent field is
    254 - c, except 2^-127 (c = 254), a subnormal. Meaningless for the NaN code 0xFF, whose
    block the caller redoes."""
    bits = torch.where(
        codes == E8M0_MAX_CODE, E8M0_MIN_SCALE_BITS, (E8M0_MAX_CODE - codes) << _F32_MANT_BITS
    )
    return bits.view(torch.float32)


def e8m0_encode_fast(scales: torch.Tensor) -> torch.Tensor:
    """`harness.core.formats.e8m0_encode` (lossless, raising on a non-E8M0 scale), bit for
    bit, in one pass (compiled for a large tensor's scale grid): the code is the float32
    exponent field (2^-127's field is 0, NaN's 0xFF). Anything invalid is handed to the
    reference, which raises."""
    if scales.dtype != torch.float32:
        return e8m0_encode(scales)  # raises its TypeError
    codes, all_valid = _e8m0_fields_checked(scales.contiguous().view(torch.int32))
    if not bool(all_valid):
        return e8m0_encode(scales)  # raises, naming the offending scales
    return codes.reshape(scales.shape)


def _e8m0_fields(bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The exponent field of each float32 bit pattern (its E8M0 code if it is an E8M0
    value), and whether every one is an E8M0 value."""
    exp_field = bits >> _F32_MANT_BITS  # the sign is 0 wherever the value is valid
    normal_pow2 = (
        ((bits & _SIGN_AND_MANTISSA) == 0) & (exp_field >= 1) & (exp_field <= E8M0_MAX_CODE)
    )
    nan = (bits & _F32_ABS_MASK) > _F32_INF_BITS
    valid = normal_pow2 | (bits == E8M0_MIN_SCALE_BITS) | nan
    return (exp_field & 0xFF).to(torch.uint8), valid.all()


_e8m0_fields_checked = large_cpu_compiled(_e8m0_fields, SCALE_GRID_MIN_ELEMENTS)


@large_cpu_compiled
def e8m0_block_encode(
    blocks: torch.Tensor, rule: E8M0Rule, enc: _Encoder
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """MX quantize of float32 ``blocks`` [..., block size] in one pass: each block's E8M0
    scale 2^k by ``rule`` from its amax (float32, shape [..., 1]), the element codes of
    x / 2^k (as `encode_scaled_finite` returns them: uint8, or bytes in an FP8 dtype), and
    whether any block has NaN or Inf (scale code 0xFF).

    x / 2^k is computed as x * 2^-k, which is exact in float32 for every E8M0 scale, so the
    product is the same correctly rounded value as the quotient (and a multiply is cheaper
    than a divide). The element codes are the reference's wherever the block's amax is
    finite; a block with NaN or Inf is the caller's to redo, since its codes depend on how
    NaN propagates through the division.

    Compiled for large CPU tensors into one loop over blocks (amax, then the block's
    elements while they are still in cache) and one over the scale grid: the separate amax
    and divide passes read the tensor twice.
    """
    amax = blocks.abs().amax(-1, keepdim=True)
    scale_codes = e8m0_codes_of_bits(amax.view(torch.int32), rule)
    codes = encode_scaled_finite(blocks * e8m0_inverse_scale(scale_codes), enc)
    scale = e8m0_scale_bits(scale_codes).view(torch.float32)
    return codes, scale, (scale_codes == E8M0_NAN_CODE).any()


def e8m0_scale_fast(amax: torch.Tensor, mode: str, fmt: ElementFormat | str) -> torch.Tensor:
    """float32 scales of `e8m0_codes_fast` (the same values `compute_scale` returns)."""
    return e8m0_decode(e8m0_codes_fast(amax, mode, fmt))


# -------------------------------------------------------------------------- FP4 pack
def pack_fp4_fast(codes: torch.Tensor) -> torch.Tensor:
    """`harness.core.formats.pack_fp4`: element 0 in the low nibble, same checks."""
    if codes.shape[-1] % 2:
        raise ValueError(f"last dim must be even to pack FP4, got {codes.shape[-1]}")
    pairs = codes.contiguous().view(*codes.shape[:-1], codes.shape[-1] // 2, 2)
    if not pairs.numel():
        return pairs[..., 0] | (pairs[..., 1] << 4)
    packed, largest = _pack_pairs(pairs)
    if int(largest) > 0xF:
        raise ValueError("FP4 codes must be < 16")
    return packed


@large_cpu_compiled
def _pack_pairs(pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two codes per byte, and the largest code (one pass for both; a compiled ``max`` is
    several times faster than ``any`` on a comparison)."""
    return pairs[..., 0] | (pairs[..., 1] << 4), pairs.max()
