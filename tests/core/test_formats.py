"""The reference codecs against ml_dtypes, an independent implementation of every format.

Decoding is checked for every code of every format; encoding for a large random sample
plus the edge cases where codecs go wrong (ties, subnormals, max, just above max, -0, NaN,
Inf). ml_dtypes does not saturate FP8 (it overflows to NaN/Inf), so the oracle sees the
input after the clamp our encoder applies itself; everything else is its own rounding.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from harness.core.formats import (
    E8M0_NAN_CODE,
    FORMATS,
    decode,
    e8m0_decode,
    e8m0_encode,
    encode,
    get_format,
    pack_fp4,
    unpack_fp4,
)

ORACLE: dict[str, type] = {
    "e4m3fn": ml_dtypes.float8_e4m3fn,
    "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2": ml_dtypes.float8_e5m2,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e2m1": ml_dtypes.float4_e2m1fn,
}
# Published maxima (OCP FP8 / MX specs), independent of the codec's tables.
SPEC_MAX = {
    "e4m3fn": 448.0,
    "e4m3fnuz": 240.0,
    "e5m2": 57344.0,
    "e2m3": 7.5,
    "e3m2": 28.0,
    "e2m1": 6.0,
}


def test_every_format_has_an_oracle() -> None:
    assert set(ORACLE) == set(FORMATS)


def _oracle_decode(name: str) -> np.ndarray:
    codes = np.arange(1 << get_format(name).bits, dtype=np.uint8)
    return codes.view(ORACLE[name]).astype(np.float32)


def _same_values(ours: torch.Tensor, theirs: np.ndarray) -> None:
    """Bit-equal floats (so -0 differs from +0); any NaN matches any NaN, nothing else."""
    theirs_t = torch.from_numpy(theirs)
    nan_ours, nan_theirs = torch.isnan(ours), torch.isnan(theirs_t)
    assert torch.equal(nan_ours, nan_theirs), (
        f"NaN codes differ: ours {torch.nonzero(nan_ours).flatten().tolist()}, "
        f"ml_dtypes {torch.nonzero(nan_theirs).flatten().tolist()}"
    )
    bits_ours = ours[~nan_ours].view(torch.int32)
    bits_theirs = theirs_t[~nan_theirs].view(torch.int32)
    bad = torch.nonzero(bits_ours != bits_theirs).flatten()
    assert bad.numel() == 0, (
        f"{bad.numel()} values differ, first: ours {ours[~nan_ours][bad[:5]].tolist()} "
        f"vs {theirs_t[~nan_theirs][bad[:5]].tolist()}"
    )


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_decode_every_code(name: str) -> None:
    fmt = get_format(name)
    codes = torch.arange(1 << fmt.bits, dtype=torch.uint8)
    _same_values(decode(codes, name), _oracle_decode(name))


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_max_matches_the_spec(name: str) -> None:
    assert get_format(name).max_finite == SPEC_MAX[name]


def _edge_cases(name: str) -> torch.Tensor:
    """Values where rounding and saturation are decided, built from ml_dtypes' code values."""
    values = _oracle_decode(name).astype(np.float64)
    mags = np.unique(np.abs(values[np.isfinite(values)]))  # sorted, from 0 to max
    mids = (mags[1:] + mags[:-1]) / 2  # exact ties (exact in float32: few mantissa bits)
    top = mags[-1]
    top_step = mags[-1] - mags[-2]
    special = np.array(
        [0.0, -0.0, np.nan, np.inf, -np.inf, top + top_step / 2, top * 1.5, 1e30, 3.0e38]
    )
    base = np.concatenate([mags, mids, special]).astype(np.float32)
    up = np.nextafter(base, np.float32(np.inf))  # just above every tie and the max
    down = np.nextafter(base, np.float32(-np.inf))
    below_min = np.array([mags[1] / 2, mags[1] / 4, mags[1] * 0.75], dtype=np.float32)
    both = np.concatenate([base, up, down, below_min])
    return torch.from_numpy(np.concatenate([both, -both]))


def _random_sample(name: str, n: int = 200_000) -> torch.Tensor:
    """float32 values spanning the format's range and well beyond it, plus bf16 values."""
    gen = torch.Generator().manual_seed(1234 + len(name))
    fmt = get_format(name)
    lo = math.log2(fmt.min_subnormal) - 4
    hi = math.log2(fmt.max_finite) + 4
    exponent = lo + (hi - lo) * torch.rand(n, generator=gen)
    sign = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    x = sign * torch.exp2(exponent)
    bf16 = (torch.randn(n, generator=gen) * fmt.max_finite / 4).to(torch.bfloat16).float()
    return torch.cat([x, bf16])


def _oracle_encode(x: torch.Tensor, name: str, bound: float) -> torch.Tensor:
    clamped = np.clip(x.numpy(), -bound, bound)  # keeps NaN; the clamp ml_dtypes does not do
    codes = clamped.astype(ORACLE[name]).view(np.uint8)
    return torch.from_numpy(codes.copy())


def _check_encode(x: torch.Tensor, name: str, clamp_max: float | None = None) -> None:
    fmt = get_format(name)
    bound = fmt.max_finite if clamp_max is None else clamp_max
    ours = encode(x, name, clamp_max)
    theirs = _oracle_encode(x, name, bound)
    if fmt.nan_code is None:
        # No NaN in the format: our rule is the negative-zero code for every NaN (the MX
        # block scale carries the NaN). ml_dtypes agrees for +NaN but gives +0 for -NaN.
        nan = torch.isnan(x)
        assert bool((ours[nan] == fmt.sign_bit).all()), f"{name}: NaN must give the -0 code"
        ours, theirs, x = ours[~nan], theirs[~nan], x[~nan]
    bad = torch.nonzero(ours != theirs).flatten()
    assert bad.numel() == 0, (
        f"{name}: {bad.numel()}/{x.numel()} codes differ from ml_dtypes; first inputs "
        f"{x[bad[:5]].tolist()} -> ours {ours[bad[:5]].tolist()} vs {theirs[bad[:5]].tolist()}"
    )


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_encode_edge_cases(name: str) -> None:
    _check_encode(_edge_cases(name), name)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_encode_random_sample(name: str) -> None:
    _check_encode(_random_sample(name), name)


def test_encode_fnuz_clamp_224() -> None:
    x = torch.cat([_edge_cases("e4m3fnuz"), _random_sample("e4m3fnuz")])
    _check_encode(x, "e4m3fnuz", clamp_max=224.0)
    assert decode(
        encode(torch.tensor([230.0, 1e9, -1e9]), "e4m3fnuz", 224.0), "e4m3fnuz"
    ).tolist() == [
        224.0,
        224.0,
        -224.0,
    ]


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("e4m3fn", 400.0, 0x7C),  # tie between 384 (0x7C, even) and 416 (0x7D): RNE gives 384
        ("e4m3fn", 464.0, 0x7E),  # above max 448 saturates, never the NaN code 0x7F
        ("e4m3fnuz", -0.0, 0x00),  # no -0 in fnuz: 0x80 is its NaN
        ("e4m3fnuz", float("nan"), 0x80),
        ("e2m1", 5.0, 0x6),  # tie between 4 (0x6, even) and 6 (0x7)
        ("e2m1", float("inf"), 0x7),  # Inf saturates to 6
        ("e2m1", -0.25, 0x8),  # tie between 0 and 0.5 goes to even 0, keeping the sign
    ],
)
def test_encode_known_codes(name: str, value: float, code: int) -> None:
    """A few codes worked out by hand from the format definitions."""
    assert encode(torch.tensor([value]), name).item() == code


def test_e8m0_decode_every_code() -> None:
    codes = np.arange(256, dtype=np.uint8)
    theirs = codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    _same_values(e8m0_decode(torch.from_numpy(codes.copy())), theirs)


def test_e8m0_smallest_scale_is_a_float32_subnormal() -> None:
    smallest = e8m0_decode(torch.tensor([0], dtype=torch.uint8))
    assert smallest.view(torch.int32).item() == 0x00400000  # 2^-127, not flushed to zero
    assert smallest.item() == 2.0**-127


def test_e8m0_encode_round_trips_every_code() -> None:
    codes = torch.arange(256, dtype=torch.uint8)
    assert torch.equal(e8m0_encode(e8m0_decode(codes)), codes)
    assert e8m0_encode(torch.tensor([float("nan")])).item() == E8M0_NAN_CODE


@pytest.mark.parametrize("bad", [0.0, -1.0, 3.0, 0.75, float("inf"), 2.0**-128, 2.0**-149])
def test_e8m0_encode_rejects_non_e8m0_scales(bad: float) -> None:
    with pytest.raises(ValueError, match="not E8M0 values"):
        e8m0_encode(torch.tensor([1.0, bad]))


def test_fp4_nibble_order() -> None:
    """Element 0 goes to the low nibble, element 1 to the high nibble."""
    codes = torch.tensor([[0x1, 0x2, 0xF, 0x0]], dtype=torch.uint8)
    assert pack_fp4(codes).tolist() == [[0x21, 0x0F]]


def test_fp4_pack_round_trip() -> None:
    codes = torch.randint(0, 16, (7, 64), generator=torch.Generator().manual_seed(5)).to(
        torch.uint8
    )
    packed = pack_fp4(codes)
    assert packed.shape == (7, 32)
    assert torch.equal(unpack_fp4(packed), codes)


def test_fp4_pack_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="even"):
        pack_fp4(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(ValueError, match="< 16"):
        pack_fp4(torch.tensor([16, 0], dtype=torch.uint8))
