"""Engine conventions in the reference quantizer: each one against a hand-derived case.

The expected values are worked out from the convention's definition (comments show the
arithmetic), so the quantizer suite's computed expectations rest on checked ground.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from harness.core.conventions import CONVENTIONS, UnknownConventionError, with_conventions
from harness.core.formats import decode
from harness.core.quantize import QuantizedTensor, quantize, stored_scale
from harness.core.schemes import get_scheme, mx_spec
from harness.quantizers import get_quantizer, quantizers
from harness.quantizers.expect import code_and_scale_mismatches, expectation

PER_TOKEN = get_scheme("fp8_per_channel").activation
assert PER_TOKEN is not None


def test_min_scale_bounds_tiny_and_zero_rows() -> None:
    spec = with_conventions(PER_TOKEN, ["min_scale_1_over_512max"])
    x = torch.tensor([[1e-8, -2e-8], [0.0, 0.0], [448.0, 1.0]])
    scale = quantize(x, spec).scale.flatten()
    bound = torch.tensor(1.0) / torch.tensor(448.0 * 512)  # float32 1/229376
    assert scale[0] == bound  # amax/448 = 4.5e-11 < bound
    assert scale[1] == bound  # a zero row gets the bound, not the reference's 1
    assert scale[2] == 1.0  # 448/448 is above the bound
    assert quantize(x, PER_TOKEN).scale.flatten()[1] == 1.0


def test_amax_floor_bounds_zero_and_tiny_rows_only() -> None:
    spec = with_conventions(PER_TOKEN, ["amax_floor_1e-10"])
    x = torch.tensor([[1e-12, -2e-12], [0.0, 0.0], [448.0, 1.0], [3e-10, 1.0e-10]])
    scale = quantize(x, spec).scale.flatten()
    floor = torch.tensor(1e-10, dtype=torch.float32) / 448.0  # fp32(1e-10) / 448
    assert scale[0] == floor  # amax 2e-12 is below the floor
    assert scale[1] == floor  # a zero row gets the floor's scale, not the reference's 1
    assert scale[2] == 1.0  # 448 / 448: above the floor, unchanged
    assert scale[3] == torch.tensor(3e-10, dtype=torch.float32) / 448.0  # unchanged
    assert quantize(x, PER_TOKEN).scale.flatten()[1] == 1.0
    assert torch.equal(quantize(x, spec).codes[1], torch.zeros(2, dtype=torch.uint8))


def test_scale_floor_fp32_min_normal_bounds_zero_and_subnormal_rows_only() -> None:
    spec = with_conventions(PER_TOKEN, ["scale_floor_fp32_min_normal"])
    x = torch.tensor([[2.0**-140, 0.0], [0.0, 0.0], [448.0, 1.0], [2.0**-100, 1.0e-31]])
    q = quantize(x, spec)
    scale = q.scale.flatten()
    assert scale[0] == 2.0**-126  # amax / 448 = 2^-148.8 (a float32 subnormal) < 2^-126
    assert scale[1] == 2.0**-126  # a zero row gets the floor, not the reference's 1
    assert scale[2] == 1.0  # 448 / 448: above the floor, unchanged
    assert scale[3] == torch.tensor(2.0**-100) / 448.0  # a normal quotient: unchanged
    # 2^-140 / 2^-126 = 2^-14 is below e4m3fn's smallest subnormal 2^-9: code 0 (the
    # reference's own subnormal scale 2^-149 saturates it to 448 instead)
    assert int(q.codes[0, 0]) == 0
    assert int(quantize(x, PER_TOKEN).codes[0, 0]) == 0x7E


def test_fp32_scale_zero_unguarded_divides_zero_rows_by_zero() -> None:
    spec = with_conventions(PER_TOKEN, ["fp32_scale_zero_unguarded"])
    x = torch.tensor([[0.0, 0.0], [2.0**-145, -0.0], [448.0, 1.0]])
    q = quantize(x, spec)
    assert q.scale.flatten().tolist()[:2] == [0.0, 0.0]  # 0 / 448; 2^-145 / 448 underflows
    assert q.scale.flatten()[2] == 1.0
    codes = decode(q.codes, "e4m3fn")
    assert bool(torch.isnan(codes[0]).all())  # 0 / 0
    assert codes[1, 0] == 448.0  # 2^-145 / 0 = Inf saturates
    assert bool(torch.isnan(codes[1, 1]))  # -0 / 0
    assert not bool(torch.isnan(quantize(x, PER_TOKEN).dequantize()).any())


def test_two_level_reciprocal_scale_keeps_a_zero_block_scale_zero() -> None:
    """A block whose E4M3 scale rounds to 0 holds +-0 under the reciprocal multiply too (the
    reference's meaning of a zero block scale), not x * Inf (saturated) or 0 * Inf (NaN)."""
    spec = get_scheme("w_nvfp4").weight
    x = torch.full((1, 32), 3.0)
    x[0, :16] = torch.tensor([2.0**-140, -(2.0**-141), 0.0, 1.0e-40] * 4)
    q = quantize(x, with_conventions(spec, ["two_level_reciprocal_scale"]))
    assert float(q.scale[0, 0]) == 0.0  # (2^-140 / 6) / (3 / 2688) rounds to E4M3 zero
    assert torch.equal(q.codes[0, :16], quantize(x, spec).codes[0, :16])
    assert q.codes[0, :16].tolist() == [0, 8, 0, 0] * 4  # +0, -0 (code 8), +0, +0


def test_reciprocal_scale_moves_a_tie() -> None:
    # x = fp32(15.5 * 1.7) and x / 1.7 = 15.5 exactly in float32: halfway between the e4m3
    # values 15 (odd mantissa) and 16, so RNE gives 16. fp32(1/1.7) is below 1/1.7, and
    # x * it rounds to 15.499999 in float32: below the tie, so 15.
    spec = get_scheme("fp8_per_tensor").weight
    scale = torch.tensor([[1.7]])
    x = torch.tensor([[15.5]]) * scale
    assert float((x / scale).flatten()[0]) == 15.5
    assert float(decode(quantize(x, spec, scale).codes, "e4m3fn")) == 16
    recip = with_conventions(spec, ["reciprocal_scale"])
    assert float(decode(quantize(x, recip, scale).codes, "e4m3fn")) == 15


def test_fnuz_clamp_224_bounds_scale_and_codes() -> None:
    spec = get_scheme("fp8_per_tensor_fnuz").weight
    held = with_conventions(spec, ["fnuz_clamp_224"])
    assert held.clamp_max == 224.0
    q = quantize(torch.tensor([[448.0, 1.0]]), held)
    assert float(q.scale) == 2.0  # 448 / 224
    # the clamp224 schemes already saturate at 224: nothing left to apply
    already = get_scheme("fp8_per_tensor_fnuz_clamp224").weight
    assert with_conventions(already, ["fnuz_clamp_224"]) == already


def _block(amax: float, special: float | None = None) -> torch.Tensor:
    x = torch.full((1, 32), amax / 4)
    x[0, 0] = amax
    if special is not None:
        x[0, 3] = special
    return x


def test_mx_inf_amax_as_2pow128() -> None:
    # e4m3 floor: exponent field 255 -> 128 - emax 8 = 120 -> code 247; NaN keeps 0xFF
    spec = with_conventions(mx_spec("e4m3fn", "floor"), ["mx_inf_amax_as_2pow128"])
    inf = quantize(_block(1.0, float("inf")), spec)
    assert stored_scale(inf.scale, spec).tolist() == [[247]]
    nan = quantize(_block(1.0, float("nan")), spec)
    assert stored_scale(nan.scale, spec).tolist() == [[255]]


def test_mx_inf_amax_scale_0xfe() -> None:
    spec = with_conventions(mx_spec("e2m1", "rceil"), ["mx_inf_amax_scale_0xfe"])
    assert stored_scale(quantize(_block(1.0, float("inf")), spec).scale, spec).tolist() == [[254]]


def test_mx_min_scale_divides_as_2pow_minus_126() -> None:
    # amax 2^-120, e4m3 floor: -120 - 8 = -128 -> clamped to -127 (code 0). The reference
    # divides by 2^-127: 2^7 = 128; the convention divides by 2^-126: 2^6 = 64.
    x = _block(2.0**-120)
    plain = mx_spec("e4m3fn", "floor")
    held = with_conventions(plain, ["mx_min_scale_divides_as_2pow-126"])
    assert stored_scale(quantize(x, held).scale, held).tolist() == [[0]]
    assert float(decode(quantize(x, plain).codes[:, :1], "e4m3fn")) == 128
    assert float(decode(quantize(x, held).codes[:, :1], "e4m3fn")) == 64


def test_fp4_ties_away_moves_every_tie_and_nothing_else() -> None:
    # amax 6 -> even-rule scale 2^0 (6 = 1.5 * 2^2; 2 - emax 2 = 0). The e2m1 magnitudes are
    # 0 .5 1 1.5 2 3 4 6 (codes 0..7); each tie lies between two of them. RNE takes the even
    # code, away the larger magnitude; non-ties (0.3, 2.9) and representable values agree.
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    away = [1, 2, 3, 4, 5, 6, 7]  # 0.5 1 1.5 2 3 4 6
    even = [0, 2, 2, 4, 4, 6, 6]  # 0 1 1 2 2 4 4
    others = [0.3, 2.9, 1.5, 6.0]
    others_codes = [1, 5, 3, 7]  # 0.5 3 1.5 6, both rules
    values = [6.0, *ties, *(-t for t in ties), *others]
    x = torch.zeros(1, 32)
    x[0, : len(values)] = torch.tensor(values)
    plain = mx_spec("e2m1", "even")
    held = with_conventions(plain, ["fp4_ties_away"])
    assert held.conventions == frozenset({"fp4_ties_away"})
    n = len(ties)
    for spec, want in ((plain, even), (held, away)):
        codes = quantize(x, spec).codes[0].tolist()
        assert codes[1 : 1 + n] == want
        assert codes[1 + n : 1 + 2 * n] == [c | 0x8 for c in want]  # the sign bit
        assert codes[1 + 2 * n : len(values)] == others_codes
    assert torch.equal(quantize(x, held).scale, quantize(x, plain).scale)
    assert with_conventions(mx_spec("e4m3fn", "even"), ["fp4_ties_away"]).conventions == set()


def test_bf16_source_quantizes_the_bf16_rounding_of_the_input() -> None:
    # bf16 keeps 8 significant bits. amax 1.75 - 2^-12 stays below the even rule's carry in
    # float32 (scale 2^(0 - 2)) but rounds to 1.75 in bf16, which carries (scale 2^(1 - 2)).
    # 1.25 + 2^-12: float32 / 2^-2 = 5 + 2^-10, above the 4|6 tie -> 6 (code 7); bf16 gives
    # 1.25, / 2^-1 = 2.5, the 2|3 tie -> even 2 (code 4).
    x = torch.zeros(1, 32)
    x[0, 0], x[0, 1] = 1.75 - 2.0**-12, 1.25 + 2.0**-12
    plain = mx_spec("e2m1", "even")
    held = with_conventions(plain, ["bf16_source"])
    assert held.conventions == frozenset({"bf16_source"})
    assert (float(quantize(x, plain).scale), int(quantize(x, plain).codes[0, 1])) == (0.25, 7)
    assert (float(quantize(x, held).scale), int(quantize(x, held).codes[0, 1])) == (0.5, 4)
    bf16_values = torch.tensor([[3.0, -0.5] + [0.25] * 30])  # already bf16: nothing moves
    assert torch.equal(quantize(bf16_values, held).codes, quantize(bf16_values, plain).codes)


def test_conventions_apply_only_where_they_make_sense() -> None:
    mx = mx_spec("e4m3fn", "floor")
    assert with_conventions(mx, ["min_scale_1_over_512max", "reciprocal_scale"]) == mx
    with pytest.raises(UnknownConventionError):
        with_conventions(mx, ["no_such_convention"])
    assert all(c.description for c in CONVENTIONS.values())


def test_reference_quantizer_is_registered_and_held_to_the_golden() -> None:
    ref = get_quantizer("reference")
    assert "reference" in quantizers()
    x = torch.tensor([[1.0, 3.0]])
    golden = quantize(x, PER_TOKEN)
    assert expectation(ref, PER_TOKEN, x, golden) is golden


def test_mismatch_report_names_tiles_and_ignores_codes_of_nan_blocks() -> None:
    spec = mx_spec("e2m1", "floor")
    x = torch.cat([_block(1.0), _block(1.0, float("nan"))], dim=0)
    q = quantize(x, spec)
    other = QuantizedTensor(q.codes.clone(), q.scale.clone(), spec)
    other.codes[1, 0] ^= 1  # in the NaN block: no value, not compared
    codes, scales = code_and_scale_mismatches(other, q)
    assert not bool(codes.any())
    assert not bool(scales.any())
    other.codes[0, 0] ^= 1
    other.scale[0, 0] = 2.0**-129  # not an E8M0 value: never matches
    codes, scales = code_and_scale_mismatches(other, q)
    assert codes.tolist() == [[True], [False]]
    assert scales.tolist() == [[True], [False]]


NVFP4 = get_scheme("w_nvfp4").weight


def _e4m3(values: np.ndarray) -> np.ndarray:
    clipped = np.clip(values, np.float32(-448), np.float32(448))
    return clipped.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)


def test_two_level_inverted_global_block_scales_follow_the_inverted_arithmetic() -> None:
    # Block amaxes 6 * g * t (one float32 step either side too) with t the E4M3 midpoints
    # in [1, 2): near ties, where g_inv * (amax * fp32(1/6)) and (amax / 6) / g can round
    # to different E4M3 values. Oracle: numpy float32 arithmetic and ml_dtypes' E4M3 cast.
    spec = with_conventions(NVFP4, ["two_level_inverted_global"])
    rng = np.random.default_rng(7)
    g = np.float32(rng.uniform(1e-3, 1e-2))
    ties = np.float32(1.0625) + np.float32(0.125) * np.arange(8, dtype=np.float32)
    targets = np.float32(6) * g * ties
    amax = np.concatenate(
        [targets, np.nextafter(targets, np.float32(0)), np.nextafter(targets, np.float32(9))]
    ).astype(np.float32)
    x = np.repeat(amax[:, None], 16, axis=1) * np.linspace(1, -1, 16, dtype=np.float32)
    g_inv = np.float32(1) / g
    inverted = _e4m3(g_inv * (amax * np.float32(1 / 6)))
    reference = _e4m3((amax / np.float32(6)) / g)
    got = quantize(torch.from_numpy(x), spec, torch.tensor([[g]])).scale.flatten().numpy()
    assert np.array_equal(got, inverted)
    assert not np.array_equal(inverted, reference)  # the convention moves some scales


def test_two_level_inverted_global_unsigned_zero_and_zero_scale_blocks() -> None:
    spec = with_conventions(NVFP4, ["two_level_inverted_global"])
    # -0 encodes as +0 (code 0) under the convention, as -0 (code 8) in the reference
    x = torch.linspace(-1, 1, 16).reshape(1, 16)
    x[0, 0] = -0.0
    assert quantize(x, NVFP4).codes[0, 0] == 8
    assert quantize(x, spec).codes[0, 0] == 0
    # a block scale that rounds to 0 (g = 2^40: 2^-40 * 1e9 / 6 < 2^-10) multiplies by
    # 1 / fp32(1e8): 1e9 * 1e-8 = 10 saturates to code 7 (6); the reference gives +-0
    y = torch.full((1, 16), 1e9)
    g = torch.tensor([[2.0**40]])
    held, ref = quantize(y, spec, g), quantize(y, NVFP4, g)
    assert held.scale.flatten().tolist() == ref.scale.flatten().tolist() == [0.0]
    assert held.codes.flatten().tolist() == [7] * 16
    assert ref.codes.flatten().tolist() == [0] * 16


GROUP_FP32 = get_scheme("fp8_per_block").activation
GROUP_UE8M0 = get_scheme("fp8_per_block_ue8m0").activation
assert GROUP_FP32 is not None
assert GROUP_UE8M0 is not None


def _groups(*amaxes: float) -> torch.Tensor:
    """One 1x128 group per amax: the amax at column 3, a smaller value beside it."""
    x = torch.zeros(len(amaxes), 128)
    for row, amax in enumerate(amaxes):
        x[row, 3] = amax
        x[row, 7] = -amax / 4
    return x


def test_amax_floor_times_reciprocal_max_rounds_as_a_product() -> None:
    spec = with_conventions(GROUP_FP32, ["amax_floor_1e-10_times_reciprocal_max"])
    reciprocal = np.float32(1.0) / np.float32(448.0)  # fp32(1 / 448), rounded once
    # an amax whose product with fp32(1 / 448) is not its quotient by 448 (both float32)
    odd = next(
        a
        for a in (np.float32(1.0 + i / 64) for i in range(1, 4096))
        if a * reciprocal != a / np.float32(448.0)
    )
    x = _groups(0.0, 1e-12, float(odd))
    scale = quantize(x, spec).scale.flatten()
    floor = np.float32(1e-10) * reciprocal  # a zero or tiny group: fp32(1e-10) * fp32(1 / 448)
    assert scale[0] == floor
    assert scale[1] == floor
    assert scale[2] == odd * reciprocal
    assert scale[2] != odd / np.float32(448.0)


def test_ue8m0_scale_floor_and_its_finding_rule() -> None:
    floored = with_conventions(GROUP_UE8M0, ["ue8m0_scale_floor_1e-10"])
    unfloored = with_conventions(GROUP_UE8M0, ["ue8m0_no_scale_floor"])
    x = _groups(0.0, 1e-12, 3.0)
    # 1e-10 * fp32(1 / 448) = 2.2e-13 = 2^-42.03: rounded up, 2^-42; floored at 1e-10 =
    # 2^-33.2 first, 2^-33; 3 / 448 = 2^-7.2: 2^-7 under both
    assert quantize(x, floored).scale.flatten().tolist() == [2.0**-33, 2.0**-33, 2.0**-7]
    assert quantize(x, unfloored).scale.flatten().tolist() == [2.0**-42, 2.0**-42, 2.0**-7]
    # a group at 448 * 2^-5 exactly: fp32(1 / 448) * 14 is 2^-5 after rounding, no step up
    assert quantize(_groups(14.0), floored).scale.flatten().tolist() == [2.0**-5]
