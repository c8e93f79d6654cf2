"""The fast codecs (harness.core.fastcodec) give the reference codecs' bits, everywhere.

Element encode is swept over float32 bit patterns at both signs: every exponent field from
(the format's smallest subnormal / 8) to (its max x 4), which holds every value whose code is
not zero or saturated, plus zero, float32 subnormals, the largest binades, Inf and NaN
(fields 0, 1, 2, 253, 254, 255). In each binade: every combination of the top 8 mantissa
bits, each with four tails of the 15 low bits (0, 1, 0x4000, 0x7FFF).
Why this covers the rounding: a value's code depends only on its mantissa bits down to the
format's rounding position plus the bit below it (round) and whether anything below that is
set (sticky). The rounding position is at most m <= 3 bits below the leading bit (normal and
subnormal range alike), so the top 8 bits give every kept/round pattern and the tails every
sticky state: exact ties (tail 0), one float32 step above (1) and below (0x7FFF) them. Outside
the swept fields every value encodes to zero or saturates, which the extra fields check.
A sweep of all 2^32 patterns against the float64 reference would take hours on CI machines.
"""

from __future__ import annotations

import pytest
import torch

from harness.core.fastcodec import (
    decode_fast,
    e8m0_codes_fast,
    e8m0_encode_fast,
    e8m0_inverse_scale,
    encode_fast,
    pack_fp4_fast,
)
from harness.core.formats import (
    E8M0_MAX_CODE,
    FORMATS,
    decode,
    e8m0_decode,
    e8m0_encode,
    encode,
    pack_fp4,
)
from harness.core.quantize import quantize
from harness.core.scales import E8M0_MODES, compute_scale
from harness.core.schemes import SCHEMES, QuantSpec

TOP_BITS = 8
TAILS = (0, 1, 0x4000, 0x7FFF)  # the low 15 mantissa bits: tie, just above, middle, just below
CLAMPS = [(name, None) for name in FORMATS] + [("e4m3fnuz", 224.0), ("e4m3fn", 240.0)]


def _structured_float32_sweep() -> torch.Tensor:
    lo = min(127 + (1 - f.bias - f.mant_bits) - 3 for f in FORMATS.values())
    hi = max(127 + f.emax + 2 for f in FORMATS.values())
    exp = torch.tensor(sorted({0, 1, 2, 253, 254, 255, *range(lo, hi + 1)}), dtype=torch.int64)
    top = torch.arange(1 << TOP_BITS, dtype=torch.int64) << (23 - TOP_BITS)
    tails = torch.tensor(TAILS, dtype=torch.int64)
    mant = (top[:, None] | tails[None, :]).reshape(-1)
    magnitude = (exp[:, None] << 23 | mant[None, :]).reshape(-1)
    bits = torch.cat([magnitude, magnitude | (1 << 31)])
    return bits.to(torch.uint32).view(torch.int32).view(torch.float32)


SWEEP = _structured_float32_sweep()


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN included, so not torch.equal on floats)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


@pytest.mark.parametrize(("fmt_name", "clamp_max"), CLAMPS)
def test_encode_matches_reference_over_float32_sweep(
    fmt_name: str, clamp_max: float | None
) -> None:
    fmt = FORMATS[fmt_name]
    expected = encode(SWEEP, fmt, clamp_max)
    got = encode_fast(SWEEP, fmt, clamp_max)
    bad = (expected != got).nonzero().flatten()
    assert bad.numel() == 0, (
        f"{fmt_name}: {bad.numel()} codes differ, e.g. x={SWEEP[bad[:4]].tolist()} "
        f"ref={expected[bad[:4]].tolist()} fast={got[bad[:4]].tolist()}"
    )


@pytest.mark.parametrize("fmt_name", sorted(FORMATS))
def test_encode_matches_reference_on_every_code_and_midpoint(fmt_name: str) -> None:
    """Each representable value, each midpoint (a tie) and one float32 step either side."""
    fmt = FORMATS[fmt_name]
    values = decode(torch.arange(1 << fmt.bits, dtype=torch.uint8), fmt)
    finite = values[torch.isfinite(values)].unique()
    mids = (finite[1:] + finite[:-1]) / 2  # exact: neighbours share or adjoin a binade
    points = torch.cat([finite, mids, values])
    up = torch.nextafter(points, torch.full_like(points, float("inf")))
    down = torch.nextafter(points, torch.full_like(points, float("-inf")))
    x = torch.cat([points, up, down, -points, -up, -down])
    assert _same_bits(encode_fast(x, fmt), encode(x, fmt))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_encode_widens_half_inputs_exactly(dtype: torch.dtype) -> None:
    x = SWEEP[torch.isfinite(SWEEP)].to(dtype).unique()  # widening collapses many patterns
    for fmt in FORMATS.values():
        assert _same_bits(encode_fast(x, fmt), encode(x, fmt)), fmt.name


def test_encode_rejects_a_bound_the_format_cannot_hold() -> None:
    with pytest.raises(ValueError, match="not a positive"):
        encode_fast(torch.ones(2), "e4m3fn", clamp_max=230.0)


@pytest.mark.parametrize("fmt_name", sorted(FORMATS))
def test_decode_matches_reference_on_every_code(fmt_name: str) -> None:
    fmt = FORMATS[fmt_name]
    codes = torch.arange(1 << fmt.bits, dtype=torch.uint8).repeat(3).reshape(3, -1)
    assert _same_bits(decode_fast(codes, fmt), decode(codes, fmt))


def test_pack_fp4_matches_reference() -> None:
    codes = torch.randint(
        0, 16, (6, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(3)
    )
    assert _same_bits(pack_fp4_fast(codes), pack_fp4(codes))
    with pytest.raises(ValueError, match="< 16"):
        pack_fp4_fast(codes + 16)


def _amax_edges() -> torch.Tensor:
    """amax = v x 2^k and one float32 step either side, for every k that keeps it a float32
    and every v where a mode changes its answer: each format's max (floor/rceil/ceil), 1
    (a power of two: ceil), and 2 - 2^-(m+1) for m = 1, 2, 3 (where "even" carries into
    the exponent); plus zero, float32 subnormals and extremes, Inf and NaN."""
    ks = torch.arange(-160, 129, dtype=torch.float64)
    maxima = [f.max_finite for f in FORMATS.values()]
    carries = [2.0 - 2.0 ** -(m + 1) for m in (1, 2, 3)]
    values = torch.tensor(sorted({1.0, *maxima, *carries}), dtype=torch.float64)
    grid = (values[:, None] * torch.exp2(ks)[None, :]).reshape(-1)
    grid = grid[(grid > 0) & (grid < 3.4e38)].float()
    up = torch.nextafter(grid, torch.full_like(grid, float("inf")))
    down = torch.nextafter(grid, torch.zeros_like(grid))
    special = torch.tensor(
        [0.0, -0.0, 1e-45, 1e-40, 2.0**-126, 3.4028235e38, float("inf"), float("nan")]
    )
    return torch.cat([grid, up, down, special])


AMAX_EDGES = _amax_edges()


@pytest.mark.parametrize("mode", sorted(E8M0_MODES))
@pytest.mark.parametrize("fmt_name", ["e4m3fn", "e5m2", "e2m3", "e3m2", "e2m1"])
def test_e8m0_scales_match_reference_at_every_edge(mode: str, fmt_name: str) -> None:
    spec = QuantSpec(fmt_name, (1, 32), scale_format="e8m0", scale_rounding=mode)
    expected = compute_scale(AMAX_EDGES, spec)
    got = e8m0_decode(e8m0_codes_fast(AMAX_EDGES, mode, fmt_name))
    assert _same_bits(got, expected)


def test_e8m0_inverse_scale_is_exactly_one_over_the_scale_for_every_code() -> None:
    codes = torch.arange(E8M0_MAX_CODE + 1, dtype=torch.int32)
    expected = 1.0 / e8m0_decode(codes.to(torch.uint8))
    assert _same_bits(e8m0_inverse_scale(codes), expected)


def mx_blocks() -> torch.Tensor:
    """[N, 32] float32 blocks that reach every corner of the one-pass MX quantize
    (`harness.core.fastcodec.e8m0_block_encode`):

    - one block per amax edge (AMAX_EDGES: each scale mode's boundary at every power of two,
      zero, float32 subnormals, Inf, NaN), alternately negated, its other 31 elements the
      amax times 2^-k x (1 + odd/16) for k = 1..16 at both signs (ties at 3 mantissa bits,
      down into every format's subnormal range under the block's scale);
    - the structured sweep in blocks of 32 consecutive values (every mantissa pattern and
      tail of each binade, against its block's amax), Inf and NaN blocks included;
    - its finite values shuffled into blocks, so most elements sit far below their block's
      amax (zero and subnormal codes).
    """
    j = torch.arange(31)
    ratios = (1 + ((2 * j + 1) % 16) / 16) * torch.exp2(-(j // 2 + 1).double())
    ratios = torch.where(j % 2 == 1, -ratios, ratios).float()
    edges = AMAX_EDGES[:, None] * torch.cat([torch.ones(1), ratios])[None, :]
    sign = torch.where(torch.arange(len(AMAX_EDGES)) % 2 == 1, -1.0, 1.0)[:, None]
    finite = SWEEP[torch.isfinite(SWEEP)]
    finite = finite[torch.randperm(finite.numel(), generator=torch.Generator().manual_seed(5))]
    shuffled = finite[: finite.numel() // 32 * 32].reshape(-1, 32)
    return torch.cat([edges * sign, SWEEP.reshape(-1, 32), shuffled])


MX_BLOCKS = mx_blocks()


def assert_mx_quantize_matches_reference(spec: QuantSpec) -> None:
    """quantize(MX_BLOCKS) against the reference: codes and scales bit for bit, with most
    blocks finite (the one-pass kernel) and some not (the rows it hands back)."""
    nonfinite_rows = (~torch.isfinite(MX_BLOCKS)).any(dim=1)
    assert 0 < int(nonfinite_rows.sum()) < MX_BLOCKS.shape[0] // 4
    got = quantize(MX_BLOCKS, spec)
    ref = quantize(MX_BLOCKS, spec, reference=True)
    bad = (got.codes != ref.codes).any(dim=1).nonzero().flatten()
    assert bad.numel() == 0, (
        f"{spec}: {bad.numel()} blocks differ, e.g. row {int(bad[0])}: "
        f"x={MX_BLOCKS[bad[0]].tolist()} ref={ref.codes[bad[0]].tolist()} "
        f"got={got.codes[bad[0]].tolist()}"
    )
    assert _same_bits(got.scale, ref.scale), spec


@pytest.mark.parametrize("mode", sorted(E8M0_MODES))
@pytest.mark.parametrize(("fmt_name", "clamp_max"), CLAMPS)
def test_mx_quantize_matches_reference_at_every_scale_edge(
    mode: str, fmt_name: str, clamp_max: float | None
) -> None:
    assert_mx_quantize_matches_reference(
        QuantSpec(fmt_name, (1, 32), "e8m0", mode, clamp_max=clamp_max)
    )


def _operands() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    wide = torch.randn(16, 256, generator=g) * torch.logspace(-20, 20, 256)
    wide[0, 3], wide[1, 5], wide[2, 7], wide[3, 9] = float("nan"), float("inf"), -0.0, 0.0
    ragged = torch.randn(33, 70, generator=g)  # partial tiles on both axes
    return [wide, ragged, torch.randn(64, 128, generator=g).bfloat16()]


def _nan_aware_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-equal, except that NaNs need only sit in the same places: which NaN a product
    such as 0 x Inf gives is the hardware loop's choice, not part of the contract."""
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return bool(torch.equal(nan_a, nan_b)) and _same_bits(
        a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0)
    )


def _float32(bits: list[int]) -> torch.Tensor:
    return (
        torch.tensor(bits, dtype=torch.int64).to(torch.uint32).view(torch.int32).view(torch.float32)
    )


def test_e8m0_encode_matches_reference_on_every_code_and_raises_where_it_raises() -> None:
    # Every E8M0 value (255 powers of two, 2^-127 a float32 subnormal) and NaNs of both
    # signs and several payloads: the same codes.
    valid = torch.cat(
        [
            e8m0_decode(torch.arange(256, dtype=torch.uint8)),
            _float32([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF]),
        ]
    )
    assert _same_bits(e8m0_encode_fast(valid), e8m0_encode(valid))
    # Everything else the reference refuses, the fast encode refuses with its message: the
    # structured sweep's values (every 61st, plus its specials) and each power of two's
    # negative, its float32 neighbours, zeros, Inf and the subnormals beside 2^-127.
    powers = e8m0_decode(torch.arange(255, dtype=torch.uint8)).view(torch.int32).long()
    neighbours = torch.cat([powers - 1, powers + 1, powers | (1 << 31)]).tolist()
    specials = [0, 1 << 31, 0x7F800000, 0xFF800000, 0x003FFFFF, 0x00400001, 0x00800000 - 1]
    refused = 0
    for x in [*SWEEP[::61].tolist(), *_float32(neighbours + specials).tolist()]:
        one = torch.tensor([x], dtype=torch.float32)
        try:
            want = e8m0_encode(one)
        except ValueError:
            refused += 1
            with pytest.raises(ValueError, match="are not E8M0 values"):
                e8m0_encode_fast(one)
            continue
        assert _same_bits(e8m0_encode_fast(one), want), x
    assert refused > 1000  # the loop above really saw the refusals it is about
    with pytest.raises(TypeError):
        e8m0_encode_fast(valid.double())


@pytest.mark.parametrize("scheme_name", sorted(SCHEMES))
def test_quantize_and_dequantize_match_reference(scheme_name: str) -> None:
    scheme = SCHEMES[scheme_name]
    specs = [scheme.weight] + ([scheme.activation] if scheme.activation else [])
    for x in _operands():
        for spec in specs:
            ref = quantize(x, spec, reference=True)
            fast = quantize(x, spec)
            assert _same_bits(fast.codes, ref.codes)
            assert _same_bits(fast.scale, ref.scale)
            for dtype in (torch.float64, torch.float32, torch.bfloat16):
                assert _nan_aware_equal(
                    fast.dequantize(dtype), ref.dequantize(dtype, reference=True)
                )
