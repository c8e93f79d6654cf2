"""NVFP4 (E2M1 in 1x16 blocks, E4M3 block scales times an FP32 per-tensor scale) against an
independent oracle: numpy float32 arithmetic and ml_dtypes' float8_e4m3fn / float4_e2m1fn
casts (round to nearest even), following docs/SCHEMES.md#nvfp4 step by step. Codes, block
scales and the global scale must match bit for bit, on ordinary data and at every edge of
both levels: the per-tensor scale at its extremes, block scales that saturate E4M3 or fall
into its subnormals or to zero, zero and tiny blocks, NaN and Inf, partial blocks, strided
inputs. The fast codec and the reference (``reference=True``) must agree everywhere.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from harness.core.formats import decode
from harness.core.inputs import generator
from harness.core.quantize import QuantizedTensor, quantize, scale_from_stored, stored_scale
from harness.core.scale_formats import E4M3_X_FP32, SCALE_FORMATS, e4m3_scale_encode
from harness.core.schemes import QuantSpec, get_scheme, nvfp4_spec
from harness.memory.budget import HELD, PACKED, tensor_bytes

SPEC = nvfp4_spec()
E2M1_MAX, E4M3_MAX = np.float32(6.0), np.float32(448.0)
E4M3_MIN_SUBNORMAL = 2.0**-9


def oracle(
    x: np.ndarray, global_scale: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """(E2M1 codes, E4M3 block scales as float32, global scale) of float32 ``x`` [R, K]."""
    x = x.astype(np.float32)
    rows, k = x.shape
    blocks = -(-k // 16)
    padded = np.zeros((rows, blocks * 16), np.float32)
    padded[:, :k] = x
    tiles = padded.reshape(rows, blocks, 16)
    with np.errstate(all="ignore"):
        amax = np.abs(tiles).max(axis=-1)  # NaN propagates
        if global_scale is None:
            g = np.float32(amax.max() / np.float32(E2M1_MAX * E4M3_MAX))
            g = np.float32(1.0) if g == 0 else g
        else:
            g = np.float32(global_scale)
        target = (amax / E2M1_MAX) / g
        block = np.clip(target, 0, E4M3_MAX).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
        block = np.where(np.isfinite(amax), block, np.float32(np.nan)).astype(np.float32)
        divisor = (block * g).astype(np.float32)
        divisor = np.where(divisor == 0, np.float32(np.inf), divisor)
        q = tiles / divisor[..., None]
        q = np.where(np.isnan(q), q, np.clip(q, -E2M1_MAX, E2M1_MAX))
    fp4 = q.astype(ml_dtypes.float4_e2m1fn).reshape(rows, blocks * 16)[:, :k]
    codes = fp4.view(np.uint8) & 0x0F
    return codes, block, g


def check_against_oracle(x: torch.Tensor, global_scale: float | None = None) -> QuantizedTensor:
    given = None if global_scale is None else torch.tensor([[global_scale]], dtype=torch.float32)
    fast = quantize(x, SPEC, given)
    ref = quantize(x, SPEC, given, reference=True)
    codes, block, g = oracle(x.float().numpy(), global_scale)
    assert fast.global_scale is not None
    assert ref.global_scale is not None
    for q in (fast, ref):
        assert np.array_equal(q.codes.numpy(), codes), "element codes differ from the oracle"
        got = q.scale.numpy()
        assert np.array_equal(got.view(np.int32), block.view(np.int32)) or (
            np.array_equal(np.isnan(got), np.isnan(block))
            and np.array_equal(got[~np.isnan(got)], block[~np.isnan(block)])
        ), f"block scales differ: {got} vs {block}"
        got_g = q.global_scale.numpy().reshape(())
        assert got_g.view(np.int32) == np.float32(g).view(np.int32) or (
            np.isnan(got_g) and np.isnan(g)
        ), f"global scale {got_g} vs {g}"
    return fast


def seeded(name: str, rows: int, k: int) -> torch.Tensor:
    x = torch.randn(rows, k, generator=generator(name))
    spread = torch.logspace(-3, 3, rows)[:, None]  # rows span six decades
    return (x * spread).to(torch.bfloat16).float()


@pytest.mark.parametrize("shape", [(4, 16), (7, 64), (3, 40), (5, 83), (2, 1)])
def test_codes_and_scales_match_the_oracle(shape: tuple[int, int]) -> None:
    """Whole and partial blocks of 16 (40 = 2.5 blocks, 83, a lone element)."""
    check_against_oracle(seeded(f"nvfp4/{shape}", *shape))


def test_ties_round_to_even() -> None:
    """Element ties under a global scale of exactly 1 and block scale 1 (block amax 6):
    0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4."""
    row = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -2.5, -5.0, 0.5, 1, 3, 4]
    q = check_against_oracle(torch.tensor([row]), global_scale=1.0)
    assert float(q.scale) == 1.0
    want = [6.0, 0, 1, 1, 2, 2, 4, 4, -0.0, -1, -2, -4, 0.5, 1, 3, 4]
    assert decode(q.codes, "e2m1").tolist() == [want]


@pytest.mark.parametrize(
    "amax",
    [3.0e38, 2.0**-126, 2.0**-133, 2.0**-149],  # huge; float32 min normal; subnormal g; tiny
)
def test_per_tensor_scale_at_its_extremes(amax: float) -> None:
    """amax / 2688 at the top of float32, as a float32 subnormal, and underflowing to zero
    (the global scale is then 1 and every block scale rounds to zero: codes +-0)."""
    x = seeded(f"nvfp4/extreme/{amax}", 3, 32)
    x = x / x.abs().max() * amax
    q = check_against_oracle(x)
    g = float(q.global_scale)  # type: ignore[arg-type]
    if np.float32(amax) / np.float32(2688) == 0:
        assert g == 1.0
        assert not bool(q.scale.any())
        assert not bool(decode(q.codes, "e2m1").any())
    else:
        assert g > 0
        assert bool(torch.isfinite(q.scale).all())


def test_block_scales_saturate_e4m3_under_a_small_static_global() -> None:
    """A calibrated global scale below what the data needs: block scales saturate at 448,
    elements at +-6."""
    x = seeded("nvfp4/saturate", 4, 48)
    g = float(x.abs().max()) / 2688 / 16  # 16x too small
    q = check_against_oracle(x, global_scale=g)
    assert float(q.scale.max()) == 448.0
    assert float(decode(q.codes, "e2m1").abs().max()) == 6.0


def test_block_scales_in_e4m3_subnormals_and_zero() -> None:
    """Blocks far below the tensor's amax: E4M3 subnormal block scales (2^-9 .. 2^-7 step
    2^-9), and blocks below half the smallest subnormal get scale 0 and codes +-0 (signs
    kept), while a zero block has scale 0 too."""
    g = 1.0
    big = [6.0 * 448] + [1.0] * 15  # block scale 448: the tensor's largest block
    sub = [6.0 * 3 * E4M3_MIN_SUBNORMAL] + [-E4M3_MIN_SUBNORMAL] * 15  # scale 3 * 2^-9
    half = [6.0 * 2.0**-10] + [-(2.0**-12)] * 15  # scale exactly half the subnormal step: tie to 0
    above_half = [6.0 * 1.25 * 2.0**-10] + [2.0**-12] * 15  # rounds up to 2^-9
    zero = [0.0] * 16
    x = torch.tensor([big + sub + half + above_half + zero])
    q = check_against_oracle(x, global_scale=g)
    assert q.scale.tolist() == [[448.0, 3 * E4M3_MIN_SUBNORMAL, 0.0, E4M3_MIN_SUBNORMAL, 0.0]]
    values = decode(q.codes, "e2m1")[0]
    assert bool((values[32:48] == 0).all())
    assert bool(torch.signbit(values[33]))


def test_tiny_block_next_to_a_large_one() -> None:
    """Dynamic global scale: a block 2^-20 of the tensor's amax keeps no information (scale
    0), one at 2^-12 lands in the subnormals; the oracle agrees on both."""
    x = seeded("nvfp4/tiny", 2, 48)
    x[0, 16:32] *= 2.0**-20 / float(x[0, 16:32].abs().max()) * float(x.abs().max())
    x[1, 32:48] *= 2.0**-12 / float(x[1, 32:48].abs().max()) * float(x.abs().max())
    check_against_oracle(x)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_special_values_poison_their_block_only_under_a_static_global(value: float) -> None:
    """Under a calibrated global scale a NaN or Inf element makes its block's scale NaN (its
    E4M3 code is a NaN code) and leaves every other block as it was."""
    x = seeded("nvfp4/special", 3, 48)
    g = float(x.abs().max()) / 2688
    clean = check_against_oracle(x, global_scale=g)
    x[1, 20] = value
    q = check_against_oracle(x, global_scale=g)
    nan = torch.isnan(q.scale)
    assert nan.tolist() == [[False] * 3, [False, True, False], [False] * 3]
    assert bool(torch.isnan(scale_from_stored(stored_scale(q.scale, SPEC), SPEC))[1, 1])
    keep = torch.ones_like(q.codes, dtype=torch.bool)
    keep[1, 16:32] = False
    assert torch.equal(q.codes[keep], clean.codes[keep])
    assert bool(torch.isnan(q.dequantize(torch.float64)[1, 16:32]).all())


def test_nan_in_a_tensor_with_a_dynamic_global_makes_every_scale_nan() -> None:
    """Without a calibrated global scale NaN reaches the per-tensor level: all of it is NaN."""
    x = seeded("nvfp4/nan-global", 2, 32)
    x[0, 3] = float("nan")
    q = check_against_oracle(x)
    assert bool(torch.isnan(q.global_scale).all())  # type: ignore[arg-type]


@pytest.mark.parametrize("layout", ["transposed", "every_other_column", "row_slice"])
def test_strided_inputs_quantize_as_their_values(layout: str) -> None:
    base = seeded("nvfp4/strided", 6, 96)
    views = {
        "transposed": base[:, :48].t().contiguous().t(),
        "every_other_column": base[:, ::2],
        "row_slice": base[1:5, 8:56],
    }
    x = views[layout]
    assert not x.is_contiguous()
    got = check_against_oracle(x)
    want = quantize(x.contiguous(), SPEC)
    assert torch.equal(got.codes, want.codes)
    assert torch.equal(got.scale, want.scale)


def test_large_tensor_fast_path_matches_the_reference() -> None:
    """2^20 elements: the compiled kernels (harness.core.fused) give the reference's bits."""
    x = seeded("nvfp4/large", 1024, 1024)
    fast, ref = quantize(x, SPEC), quantize(x, SPEC, reference=True)
    assert torch.equal(fast.codes, ref.codes)
    assert torch.equal(fast.scale, ref.scale)
    assert torch.equal(fast.dequantize(), ref.dequantize(reference=True))


def test_dequantize_is_code_times_block_times_global() -> None:
    x = seeded("nvfp4/dequant", 5, 40)
    q = quantize(x, SPEC)
    assert q.global_scale is not None
    codes = decode(q.codes, "e2m1").double()
    per_block = (q.scale.double() * q.global_scale.double()).repeat_interleave(16, dim=1)
    assert torch.equal(q.dequantize(torch.float64), codes * per_block[:, :40])  # exact
    eff32 = (q.scale * q.global_scale).repeat_interleave(16, dim=1)[:, :40]
    assert torch.equal(q.dequantize(torch.float32), codes.float() * eff32)


def test_stored_block_scales_are_e4m3_codes_losslessly() -> None:
    q = quantize(seeded("nvfp4/stored", 3, 64), SPEC)
    stored = stored_scale(q.scale, SPEC)
    want = q.scale.numpy().astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert stored.dtype == torch.uint8
    assert np.array_equal(stored.numpy(), want)
    assert torch.equal(scale_from_stored(stored, SPEC), q.scale)
    with pytest.raises(ValueError, match="not E4M3 values"):
        e4m3_scale_encode(torch.tensor([0.3]))
    with pytest.raises(ValueError, match="not E4M3 values"):
        e4m3_scale_encode(torch.tensor([512.0]))


def test_scale_format_table_rows() -> None:
    assert set(SCALE_FORMATS) == {"fp32", "e8m0", "e4m3", "e4m3_x_fp32"}
    assert E4M3_X_FP32.per_tensor_level
    assert E4M3_X_FP32.stored_bytes == 1
    assert SPEC.scale_fmt is E4M3_X_FP32


def test_memory_model_counts_the_global_scale() -> None:
    """[N, K] = [128, 256]: 16 block scales per row, plus the one float32 global scale."""
    held = tensor_bytes(SPEC, (128, 256), HELD)
    packed = tensor_bytes(SPEC, (128, 256), PACKED)
    assert (held.codes, held.scales) == (128 * 256, 128 * 16 * 4 + 4)
    assert (packed.codes, packed.scales) == (128 * 128, 128 * 16 + 4)


def test_schemes_registered_with_derived_floors() -> None:
    """e2m1's rounding (1/4) dominates the E4M3 scale's saturation loss (1/17): the floors
    are those of MXFP4 (12.0 dB weight-only, 4.9 dB W4A4)."""
    assert get_scheme("w_nvfp4").sqnr_floor_db == 12.0
    assert get_scheme("w_nvfp4_a_nvfp4").sqnr_floor_db == 4.9
    act = get_scheme("w_nvfp4_a_nvfp4").activation
    assert act is not None
    assert not act.dynamic  # static per-tensor level, blocks per call


def test_one_level_e4m3_block_scales_match_the_oracle_with_global_one() -> None:
    """The table's one-level `e4m3` format (E4M3 block scales alone, rule e4m3_rne) is the
    two-level definition with the global scale fixed at 1: same block scales and codes,
    including a block whose scale rounds to zero (codes +-0)."""
    spec = QuantSpec("e2m1", (1, 16), "e4m3", "e4m3_rne")
    x = seeded("nvfp4/one-level", 4, 48)
    x[2, 16:32] = torch.linspace(-1, 1, 16) * 2.0**-14  # amax / 6 below 2^-10: scale 0
    codes, block, _ = oracle(x.numpy(), global_scale=1.0)
    for q in (quantize(x, spec), quantize(x, spec, reference=True)):
        assert q.global_scale is None
        assert np.array_equal(q.codes.numpy(), codes)
        assert np.array_equal(q.scale.numpy(), block)
    assert float(quantize(x, spec).scale[2, 1]) == 0.0


def test_scale_format_block_ranges() -> None:
    """The block level's range: E4M3's largest over its smallest normal value (448 / 2^-6);
    E8M0 2^-127 .. 2^127; float32 its normal range."""
    assert SCALE_FORMATS["e4m3"].block_range == E4M3_X_FP32.block_range == 448 * 2.0**6
    assert SCALE_FORMATS["e8m0"].block_range == 2.0**254
    info = torch.finfo(torch.float32)
    assert SCALE_FORMATS["fp32"].block_range == info.max / info.tiny
