"""Outputs beyond the output dtype's range are held to the path's declared rule
(`Numerics.overflow`, docs/SCHEMES.md#output-overflow): IEEE (+-Inf) by default, +-max when
a path declares saturation; the other outputs keep every bound."""

from __future__ import annotations

import pytest
import torch

from harness.core.schemes import get_scheme
from harness.linear.checks import expected_output, linear_checks
from harness.linear.designs import design_case
from harness.linear.paths import get_path
from harness.paths.base import Numerics

SCHEME = "fp8_per_channel"
FP16_MAX = torch.finfo(torch.float16).max


def _outputs() -> tuple[object, torch.Tensor]:
    loaded = design_case("fp16_overflow", SCHEME)
    y = get_path("emulated").forward(loaded.layer, loaded.x, torch.float16)
    return loaded, y


def _failed(overflow: str, y: torch.Tensor, y_emulated: torch.Tensor | None) -> list[str]:
    loaded, _ = _outputs()
    numerics = Numerics(torch.float16, overflow=overflow)
    exp = expected_output(loaded, get_scheme(SCHEME), True, numerics)  # type: ignore[arg-type]
    return [r.name for r in linear_checks(y, y_emulated, exp, "kernel") if r.failed]


def test_the_design_overflows_and_emulated_gives_inf() -> None:
    _, y = _outputs()
    assert bool(torch.isinf(y).any())
    assert bool(torch.isfinite(y).any())


def test_ieee_outputs_pass_the_default_rule() -> None:
    _, y = _outputs()
    assert _failed("ieee", y, y) == []


def test_saturation_passes_when_declared() -> None:
    _, y = _outputs()
    saturated = y.clamp(-FP16_MAX, FP16_MAX)
    assert _failed("saturate", saturated, y) == []


def test_undeclared_saturation_fails_the_rounding_interval() -> None:
    _, y = _outputs()
    saturated = y.clamp(-FP16_MAX, FP16_MAX)
    assert _failed("ieee", saturated, y) == ["rounding_interval"]


def test_inf_where_saturation_is_declared_fails_finite() -> None:
    _, y = _outputs()
    assert _failed("saturate", y, y) == ["finite", "rounding_interval"]


def test_nan_never_passes_beyond_the_range() -> None:
    _, y = _outputs()
    broken = torch.where(torch.isinf(y), torch.full_like(y, torch.nan), y)
    assert "finite" in _failed("ieee", broken, y)


def test_an_unknown_overflow_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="overflow"):
        Numerics(torch.float16, overflow="wrap")
