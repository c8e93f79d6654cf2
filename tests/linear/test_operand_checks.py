"""The operand checks fail exactly where the shown operands differ from the reference, and
a declared convention moves the expected activation (harness.linear.operands)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.core.checks import CheckResult
from harness.core.quantize import QuantizedLinear, quantize_activation, quantize_linear
from harness.core.schemes import get_scheme
from harness.linear.operands import OPERAND_CHECKS, expected_operands, operand_checks
from harness.linear.paths import get_path
from harness.paths.operands import QuantizedOperands, exposes_operands, path_operands
from tests.canaries.common import KernelModelPath


def _layer(scheme: str) -> tuple[QuantizedLinear, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    w = torch.randn(16, 64, generator=g).bfloat16().float()
    x = torch.randn(4, 64, generator=g).bfloat16().float()
    s = get_scheme(scheme)
    calibration = None if s.activation is None or s.activation.dynamic else x
    return quantize_linear(w, None, s, calibration), x


def _failed(results: list[CheckResult]) -> list[str]:
    assert [r.name for r in results] == list(OPERAND_CHECKS)
    return [r.name for r in results if r.failed]


@pytest.mark.parametrize("scheme", ["fp8_per_channel", "w_mxfp4_a_mxfp4", "w_nvfp4_a_nvfp4"])
def test_emulated_operands_match_the_reference(scheme: str) -> None:
    layer, x = _layer(scheme)
    got = path_operands(get_path("emulated"), layer, x, torch.bfloat16)
    assert _failed(operand_checks(got, expected_operands(layer, x), "emulated")) == []


def test_one_flushed_code_fails_activation_codes_only() -> None:
    layer, x = _layer("w_mxfp8_a_mxfp8")
    want = expected_operands(layer, x)
    assert want.activation is not None
    codes = want.activation.codes.clone()
    codes[1, 3] = 0 if codes[1, 3] != 0 else 1
    got = dataclasses.replace(want, activation=dataclasses.replace(want.activation, codes=codes))
    assert _failed(operand_checks(got, want, "p")) == ["activation_codes"]


def test_one_scale_a_binade_off_fails_weight_scales_only() -> None:
    layer, x = _layer("w_mxfp4_a_mxfp4")
    want = expected_operands(layer, x)
    scale = want.weight.scale.clone()
    scale[2, 1] *= 2
    got = dataclasses.replace(want, weight=dataclasses.replace(want.weight, scale=scale))
    assert _failed(operand_checks(got, want, "p")) == ["weight_scales"]


def test_a_global_scale_off_fails_the_scales() -> None:
    layer, x = _layer("w_nvfp4_a_nvfp4")
    want = expected_operands(layer, x)
    assert want.weight.global_scale is not None
    g = want.weight.global_scale * 2
    got = dataclasses.replace(want, weight=dataclasses.replace(want.weight, global_scale=g))
    assert _failed(operand_checks(got, want, "p")) == ["weight_scales"]


def test_a_missing_activation_fails_both_its_checks_and_none_is_not_applicable() -> None:
    layer, x = _layer("fp8_per_tensor")
    want = expected_operands(layer, x)
    got = dataclasses.replace(want, activation=None)
    assert _failed(operand_checks(got, want, "p")) == ["activation_codes", "activation_scales"]
    weight_only, xw = _layer("w_mxfp4")
    results = operand_checks(
        expected_operands(weight_only, xw), expected_operands(weight_only, xw), "p"
    )
    assert [r.applicable for r in results] == [False, False, True, True]


def test_a_declared_convention_moves_the_expected_activation() -> None:
    layer, x = _layer("fp8_per_channel")
    x = x.clone()
    x[0] *= 2.0**-12  # amax under 1/512: vLLM's scale floor picks another scale
    floor = frozenset({"min_scale_1_over_512max"})
    plain = expected_operands(layer, x)
    floored = expected_operands(layer, x, floor)
    assert plain.activation is not None
    assert floored.activation is not None
    assert _failed(operand_checks(floored, plain, "p")) == ["activation_codes", "activation_scales"]
    xq = quantize_activation(x, layer.scheme, None)
    assert xq is not None
    assert torch.equal(xq.codes, plain.activation.codes)


def test_only_paths_with_the_method_show_operands() -> None:
    assert exposes_operands(get_path("emulated"))
    assert exposes_operands(get_path("native"))
    # overrides forward, inherits emulated's quantized_operands: shows nothing
    assert not exposes_operands(KernelModelPath())
    assert not exposes_operands(object())


def test_a_wrong_return_type_is_the_paths_error() -> None:
    class Wrong:
        name = "wrong"

        def quantized_operands(self, *args: object) -> object:
            return (None, None)

    layer, x = _layer("fp8_per_tensor")
    with pytest.raises(TypeError, match="not QuantizedOperands"):
        path_operands(Wrong(), layer, x, torch.bfloat16)
    assert isinstance(
        path_operands(get_path("native"), layer, x, torch.bfloat16), QuantizedOperands
    )
