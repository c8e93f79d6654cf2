"""The tolerance policy: bounds hold for real float32 arithmetic and reject real errors."""

from __future__ import annotations

import math

import torch

from harness.core.compare import (
    bit_mismatches,
    gamma_bound,
    outside_interval,
    rounding_bound,
    rounding_interval,
    sqnr_db,
    unit_roundoff,
    within_bound,
)
from harness.core.inputs import generator


def _operands(k: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = generator(f"compare/{k}")
    return torch.randn(16, k, generator=gen), torch.randn(8, k, generator=gen)


def test_unit_roundoffs_match_the_formats() -> None:
    assert unit_roundoff(torch.float32) == 2.0**-24
    assert unit_roundoff(torch.bfloat16) == 2.0**-8
    assert unit_roundoff(torch.float16) == 2.0**-11
    # u is half the spacing just above 1.0 in each dtype
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        assert unit_roundoff(dtype) == torch.finfo(dtype).eps / 2


def test_float32_matmul_stays_within_the_dot_bound() -> None:
    for k in (32, 256, 4096):
        a, b = _operands(k)
        exact = a.double() @ b.double().t()
        bound = gamma_bound(a.double().abs() @ b.double().abs().t(), k + 1, torch.float32)
        assert within_bound(a @ b.t(), exact, bound).ok


def test_bound_rejects_an_error_of_one_bf16_ulp_in_float32_output() -> None:
    a, b = _operands(256)
    exact = a.double() @ b.double().t()
    bound = gamma_bound(a.double().abs() @ b.double().abs().t(), 257) + rounding_bound(
        exact, torch.float32
    )
    wrong = (a @ b.t()) * (1 + 2.0**-8)
    assert not within_bound(wrong, exact, bound).ok


def test_nan_and_inf_never_pass() -> None:
    expected = torch.ones(4)
    huge = torch.full((4,), math.inf)
    for bad in (float("nan"), float("inf")):
        actual = torch.ones(4)
        actual[2] = bad
        result = within_bound(actual, expected, huge)
        assert not result.ok
        assert result.n_nonfinite == 1


def test_rounding_to_each_dtype_is_within_one_rounding_bound() -> None:
    y = torch.randn(1000, generator=generator("compare/rounding"), dtype=torch.float64) * 100
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert within_bound(y.to(dtype), y, rounding_bound(y, dtype)).ok


def test_sqnr_and_bit_mismatches() -> None:
    ref = torch.ones(100)
    assert sqnr_db(ref, ref) == math.inf
    # 50% error: signal/noise = 2; rel_tol covers the two float64 log10 implementations
    assert math.isclose(sqnr_db(ref, ref * 1.5), 20 * math.log10(2.0), rel_tol=1e-12)
    assert sqnr_db(ref, torch.full((100,), math.nan)) == -math.inf
    a = torch.tensor([0.0, 1.0, math.nan])
    assert bit_mismatches(a, a.clone()) == 0
    assert bit_mismatches(torch.tensor([0.0]), torch.tensor([-0.0])) == 1  # -0 differs in bits


def test_rounding_interval_pins_bf16_results_and_catches_one_ulp() -> None:
    a, b = _operands(256)
    center = a.double() @ b.double().t()
    radius = gamma_bound(a.double().abs() @ b.double().abs().t(), 257, torch.float32)
    lo, hi = rounding_interval(center, radius, torch.bfloat16)
    y = (a @ b.t()).to(torch.bfloat16)
    assert not bool(outside_interval(y, lo, hi).any())
    determined = lo == hi
    # the float32 accumulation interval is a small fraction of a bf16 ULP for most outputs
    assert float(determined.float().mean()) > 0.5
    one_ulp_up = torch.nextafter(y, torch.full_like(y, math.inf))
    assert bool(outside_interval(one_ulp_up, lo, hi)[determined].all())
