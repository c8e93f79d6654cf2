"""`Numerics.rounding_mode`: a kernel whose float32 -> output conversion truncates (Triton's
interpreter for bfloat16) declares "toward_zero" and keeps a bit-exact rounding interval;
its outputs pass under that declaration and fail under "nearest", and a kernel that
rounds to nearest fails the truncating declaration. `round_output` is checked against
independent oracles: bfloat16 as float32's top 16 bits, float16 by search in the table of
every float16 value."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.core.inputs import generator
from harness.linear.cases import load_linear_case
from harness.linear.checks import expected_output, linear_checks
from harness.linear.paths import get_path
from harness.paths.base import Numerics

BF16, FP16 = torch.bfloat16, torch.float16


def _samples() -> torch.Tensor:
    """Float32 values across the binades, both signs, ties, exact values, huge and tiny."""
    gen = generator("rounding-mode")
    mags = torch.exp2(torch.empty(20_000).uniform_(-30, 20, generator=gen))
    signs = torch.where(torch.rand(20_000, generator=gen) < 0.5, -1.0, 1.0)
    x = (mags * signs).float()
    special = torch.tensor(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            1 + 2**-8,
            1 + 3 * 2**-9,
            65519.0,
            65520.0,
            70000.0,
            -1e30,
            3e38,
            float("inf"),
            -float("inf"),
        ]
    )
    return torch.cat([x, special.float()])


def _bf16_by_bits(x: torch.Tensor) -> torch.Tensor:
    """float32 -> bfloat16 toward zero: keep the top 16 bits."""
    bits = x.float().view(torch.int32) & torch.tensor(-65536, dtype=torch.int32)  # 0xFFFF0000
    return bits.view(torch.float32)


def _fp16_by_table(x: torch.Tensor) -> torch.Tensor:
    """float32 -> float16 toward zero: the float16 value of largest magnitude not above |x|
    (65504 for finite values past the range), found in the table of every finite float16."""
    table = torch.arange(0, 0x7C00, dtype=torch.int32).to(torch.int16).view(FP16).double()
    mag = x.double().abs()
    index = torch.searchsorted(table, mag, right=True) - 1
    out = table[index] * torch.where(torch.signbit(x), -1.0, 1.0).double()
    return torch.where(torch.isinf(x), x.double(), out).float()


@pytest.mark.parametrize(("dtype", "oracle"), [(BF16, _bf16_by_bits), (FP16, _fp16_by_table)])
def test_round_output_toward_zero_matches_an_independent_oracle(dtype: Any, oracle: Any) -> None:
    x = _samples()
    got = Numerics(dtype, rounding_mode="toward_zero").round_output(x)
    want = oracle(x)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))  # -0 stays -0
    nearest = Numerics(dtype).round_output(x)
    assert bool((nearest != got).any())  # the modes differ somewhere on these samples


def test_unknown_rounding_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="rounding_mode"):
        Numerics(BF16, rounding_mode="truncate")


SHAPE = (8, 128, 256)


def _case(golden_store: Any, bias: bool) -> Any:
    data = golden_store.load("linear/fp8_per_tensor")
    return load_linear_case(data, "fp8_per_tensor", SHAPE, bias=bias)


def _truncating_kernel(loaded: Any) -> torch.Tensor:
    """The emulated product in float32, converted to bf16 by dropping the low bits."""
    y32 = get_path("emulated").forward(loaded.layer, loaded.x, torch.float32)
    return _bf16_by_bits(y32).to(BF16)


def _failed(results: list[Any]) -> set[str]:
    return {r.name for r in results if r.failed}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_truncating_kernel_passes_its_declaration_bit_for_bit(
    golden_store: Any, bias: bool
) -> None:
    loaded = _case(golden_store, bias)
    y = _truncating_kernel(loaded)
    y_em = get_path("emulated").forward(loaded.layer, loaded.x, BF16)
    exp = expected_output(
        loaded, loaded.layer.scheme, bias, Numerics(BF16, rounding_mode="toward_zero")
    )
    results = {r.name: r for r in linear_checks(y, y_em, exp, "truncating")}
    assert {n for n, r in results.items() if r.failed} == set()
    assert results["rounding_interval"].verdict() == "pass"  # applied, not n/a
    assert results["bits_vs_emulated"].verdict().startswith("n/a")  # emulated: nearest
    assert float(exp.determined.double().mean()) > 0.5


def test_truncating_kernel_fails_the_nearest_interval(golden_store: Any) -> None:
    loaded = _case(golden_store, True)
    y = _truncating_kernel(loaded)
    exp = expected_output(loaded, loaded.layer.scheme, True, Numerics(BF16))
    assert "rounding_interval" in _failed(linear_checks(y, None, exp, "truncating"))


def test_nearest_kernel_fails_the_truncating_interval(golden_store: Any) -> None:
    loaded = _case(golden_store, True)
    y = get_path("emulated").forward(loaded.layer, loaded.x, BF16)
    exp = expected_output(
        loaded, loaded.layer.scheme, True, Numerics(BF16, rounding_mode="toward_zero")
    )
    assert "rounding_interval" in _failed(linear_checks(y, None, exp, "nearest"))
