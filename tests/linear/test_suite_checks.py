"""The suites' named checks name what broke: deliberately broken outputs, run through the
check functions directly (one small golden case each), fail exactly the checks that should
fail, with the first offending element where the check is element-wise."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

from harness.core.checks import (
    CheckResult,
    check_bit_exact,
    check_within_bound,
    failed,
    failure_summary,
    passed,
)
from harness.linear.cases import load_linear_case
from harness.linear.checks import LINEAR_CHECKS, ExpectedOutput, expected_output, linear_checks
from harness.linear.paths import get_path
from harness.loading.cases import checkpoint_from_golden, golden_entry
from harness.loading.checks import loader_agreement_checks, output_bound, output_checks
from harness.loading.loaders import get_loader
from harness.moe.cases import MoECase, load_moe_case
from harness.moe.checks import MOE_CHECKS, moe_block_checks
from harness.moe.model import MoETrace
from harness.moe.paths import get_moe_path
from harness.paths.base import Numerics
from harness.platform.info import detect
from harness.plugin import RECORD_KEY


def _failed(results: list[CheckResult]) -> list[str]:
    return [r.name for r in results if r.failed]


def _by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def _one_ulp_up(t: torch.Tensor, index: tuple[int, int]) -> torch.Tensor:
    """``t`` with one element moved one ULP away from zero (its bit pattern plus one)."""
    bits = {2: torch.int16, 4: torch.int32}[t.element_size()]
    out = t.clone()
    out.view(bits)[index] += 1
    return out


# ----------------------------------------------------------------------- core
def test_summary_names_every_failed_check_in_order() -> None:
    results = [passed("a"), failed("b", "too big"), passed("c"), failed("d", "NaN")]
    assert failure_summary(results) == "2 check(s) failed:\n  b: too big\n  d: NaN"
    assert failure_summary(results[:1]) is None


def test_bound_check_reports_the_first_offending_element() -> None:
    expected = torch.zeros(3, 4)
    actual = expected.clone()
    actual[1, 2], actual[2, 0] = 0.5, float("nan")
    result = check_within_bound("x", actual, expected, torch.full((3, 4), 0.25), "x vs zero")
    assert result.failed
    assert result.offender is not None
    assert (result.offender.index, result.offender.got, result.offender.bound) == (
        (1, 2),
        0.5,
        0.25,
    )
    assert "2/12 elements outside the bound" in result.verdict()


def test_bit_exact_check_tells_minus_zero_from_zero() -> None:
    result = check_bit_exact("z", torch.tensor([1.0, -0.0]), torch.tensor([1.0, 0.0]), "zeros")
    assert result.failed
    assert result.offender is not None
    assert result.offender.index == (1,)


def test_record_checks_records_every_verdict_and_fails_naming_each(
    record_checks: Any, request: pytest.FixtureRequest
) -> None:
    with pytest.raises(pytest.fail.Exception) as info:
        record_checks([passed("a", m=1.0), failed("b", "off"), failed("c", "worse")])
    assert "b: off" in str(info.value)
    assert "c: worse" in str(info.value)
    record = dict(request.node.user_properties)[RECORD_KEY]
    assert record["checks"] == {"a": "pass", "b": "fail: off", "c": "fail: worse"}
    assert record["m"] == 1.0


def test_record_checks_turns_a_known_finding_into_a_recorded_xfail(
    record_checks: Any, request: pytest.FixtureRequest
) -> None:
    with pytest.raises(pytest.xfail.Exception) as info:
        record_checks([passed("a"), failed("b", "off")], known_finding="engine bug X")
    assert "engine bug X" in str(info.value)
    assert "b: off" in str(info.value)
    record = dict(request.node.user_properties)[RECORD_KEY]
    assert record["known_finding"] == "engine bug X"
    assert record["checks"] == {"a": "pass", "b": "fail: off"}


def test_record_checks_lets_a_known_finding_case_that_passes_pass(
    record_checks: Any, request: pytest.FixtureRequest
) -> None:
    record_checks([passed("a")], known_finding="engine bug X")
    assert "known_finding" not in dict(request.node.user_properties)[RECORD_KEY]


# --------------------------------------------------------------------- linear
SHAPE = (37, 16, 128)


def _linear(golden_store: Any, bias: bool) -> tuple[torch.Tensor, ExpectedOutput]:
    """fp8_per_tensor 37x16x128 to bf16 through emulated: the output and what it must meet."""
    loaded = load_linear_case(
        golden_store.load("linear/fp8_per_tensor"), "fp8_per_tensor", SHAPE, bias
    )
    y = get_path("emulated").forward(loaded.layer, loaded.x, torch.bfloat16)
    scheme = loaded.layer.scheme
    return y, expected_output(loaded, scheme, bias, Numerics(torch.bfloat16))


def test_linear_checks_pass_the_correct_output(golden_store: Any) -> None:
    y, exp = _linear(golden_store, bias=True)
    results = linear_checks(y, y.clone(), exp, "native")
    assert [r.name for r in results] == list(LINEAR_CHECKS)
    assert _failed(results) == []


def test_a_dropped_bias_fails_the_golden_and_interval_checks(golden_store: Any) -> None:
    y_without_bias, _ = _linear(golden_store, bias=False)
    y, exp = _linear(golden_store, bias=True)
    results = linear_checks(y_without_bias, y, exp, "native")
    assert {"vs_golden", "rounding_interval", "bits_vs_emulated", "vs_emulated"} <= set(
        _failed(results)
    )
    assert "finite" not in _failed(results)


def test_one_ulp_off_fails_the_bit_exact_checks_at_that_element(golden_store: Any) -> None:
    y, exp = _linear(golden_store, bias=True)
    index = tuple(int(i) for i in exp.determined.nonzero()[5])  # a uniquely rounded output
    broken = _one_ulp_up(y, index)
    results = _by_name(linear_checks(broken, y, exp, "native"))
    for name in ("rounding_interval", "bits_vs_emulated"):
        offender = results[name].offender
        assert results[name].failed, name
        assert offender is not None, name
        assert offender.index == index, name
        assert offender.got == float(broken[index]), name
    assert not results["sqnr_floor"].failed
    assert not results["finite"].failed


def _bias_after_rounding(golden_store: Any) -> tuple[torch.Tensor, Any]:
    """fp8_per_tensor 37x16x128 with a bias that cancels 63/64 of row 0's product, computed
    in vLLM's block-FP8 step order: the product rounded to fp16, then the bias added there."""
    loaded = load_linear_case(
        golden_store.load("linear/fp8_per_tensor"), "fp8_per_tensor", SHAPE, bias=False
    )
    product = get_path("emulated").forward(loaded.layer, loaded.x, torch.float32)
    # The bias is a model-dtype parameter, so it is exact in fp16.
    cancelling = -(product[0].double() * (1 - 2**-6)).to(torch.float16)
    loaded.inputs["bias"] = cancelling.float()
    y = product.to(torch.float16) + cancelling
    return y, loaded


def test_a_rounding_before_the_bias_is_declared_relative_to_the_product(
    golden_store: Any,
) -> None:
    """vLLM's step order passes once declared (``roundings_before_bias``), and fails the
    two-rounding bound relative to the result without the declaration: the check measures
    the first rounding's error, it does not just widen everything."""
    y, loaded = _bias_after_rounding(golden_store)
    scheme = loaded.layer.scheme
    plain = Numerics(torch.float16, output_roundings=2)
    declared = Numerics(torch.float16, output_roundings=2, roundings_before_bias=1)
    bound_without = expected_output(loaded, scheme, True, plain)
    bound_with = expected_output(loaded, scheme, True, declared)
    assert check_vs_golden_failed(y, bound_without)
    assert not check_vs_golden_failed(y, bound_with)
    # Where the bias outweighs the product, the declared bound is the tighter one: the
    # declaration moves the first rounding's error to the product, it does not only widen.
    assert bool((bound_with.bound < bound_without.bound).any())
    # Without a bias the declaration changes nothing.
    no_bias = expected_output(loaded, scheme, False, declared)
    assert torch.equal(no_bias.bound, expected_output(loaded, scheme, False, plain).bound)


def check_vs_golden_failed(y: torch.Tensor, exp: ExpectedOutput) -> bool:
    return _by_name(linear_checks(y, None, exp, "native"))["vs_golden"].failed


def test_numerics_rejects_more_roundings_before_the_bias_than_it_has() -> None:
    with pytest.raises(ValueError, match="roundings_before_bias"):
        Numerics(torch.float16, output_roundings=1, roundings_before_bias=2)


# ------------------------------------------------------------------------ MoE
def _moe(golden_store: Any) -> tuple[MoETrace, Any, MoECase]:
    case = MoECase("w_mxfp4_a_mxfp4", "emulated", 7, 8, 2, False)
    loaded = load_moe_case(golden_store.load("moe/w_mxfp4_a_mxfp4"), case)
    platform = detect()
    trace = get_moe_path("emulated").forward(loaded.layer, loaded.x, loaded.routing, platform)
    return trace, loaded, case


def test_moe_checks_name_the_broken_stage(golden_store: Any) -> None:
    trace, loaded, _ = _moe(golden_store)
    numerics = get_moe_path("emulated").numerics(loaded.layer.scheme, detect())
    results = moe_block_checks("emulated", trace, loaded, loaded.routing, numerics, None)
    assert [r.name for r in results] == list(MOE_CHECKS[4:])
    assert _failed(results) == []

    out = trace.out.clone()
    out[3, 5] *= 1.01  # the combine went wrong for one element
    broken = replace(trace, out=out)
    results = moe_block_checks("emulated", broken, loaded, loaded.routing, numerics, None)
    assert _failed(results) == ["output_vs_own_intermediate"]
    offender = _by_name(results)["output_vs_own_intermediate"].offender
    assert offender is not None
    assert offender.index == (3, 5)

    assert trace.y is not None
    y = trace.y.clone()
    y[2, 1] *= 1.01  # GEMM 2 wrong for one element: only the GEMM check sees it
    results = moe_block_checks(
        "emulated", replace(trace, y=y), loaded, loaded.routing, numerics, None
    )
    assert _failed(results) == ["gemm2_agreement"]
    offender = _by_name(results)["gemm2_agreement"].offender
    assert offender is not None
    assert offender.index == (2, 1)


# -------------------------------------------------------------------- loading
def _loading(golden_store: Any) -> tuple[Any, Any]:
    data = golden_store.load(golden_entry("fp8_per_tensor", "unfused"))
    return data, checkpoint_from_golden(data, "fp8_per_tensor", "unfused")


def test_a_scale_bug_fails_the_golden_check_as_well_as_the_bias_check(golden_store: Any) -> None:
    data, ckpt = _loading(golden_store)
    layer = get_loader("fp8").load(ckpt, "e4m3fn").layer
    x = data.tensors["x"].float()
    y_ref, bias = data.tensors["y_ref"].double(), data.tensors["bias"].double()
    bound = output_bound(
        y_ref, bias, data.tensors["abs_product"].double(), x.shape[1], True, torch.bfloat16
    )
    path = get_path("emulated")
    good = path.forward(layer, x, torch.bfloat16)
    assert _failed(output_checks(good, y_ref, bias, bound, True, "emulated")) == []

    doubled = replace(layer, weight=replace(layer.weight, scale=2 * layer.weight.scale))
    y = path.forward(doubled, x, torch.bfloat16)
    results = output_checks(y, y_ref, bias, bound, True, "emulated")
    assert _failed(results) == ["bias_applied_once", "output_vs_golden"]
    assert _by_name(results)["output_vs_golden"].offender is not None


def _truncated_to_bf16(v: torch.Tensor) -> torch.Tensor:
    """float32 -> bfloat16 rounding toward zero (dropping the low 16 bits), as a
    truncating kernel converts."""
    bits = v.float().view(torch.int32) & -65536  # 0xFFFF0000
    return bits.view(torch.float32).to(torch.bfloat16)


def test_the_loading_bound_holds_two_truncations_only_as_declared() -> None:
    # A product just below 1 + 2^-7 truncated to 1, a bias just below 2^-7 added and
    # truncated again: 2 bf16 ULPs (4u) off, which two roundings to nearest (2u) cannot
    # explain and two declared roundings toward zero (Numerics.rounding_units = 2) can.
    y_ref = torch.tensor([1 + 2**-7 - 2**-20], dtype=torch.float64)
    bias = torch.tensor([2**-7 - 2**-20], dtype=torch.float64)
    first = _truncated_to_bf16(y_ref).double()
    y = _truncated_to_bf16(first + bias).double()
    error = (y - (y_ref + bias)).abs()
    args = (y_ref, bias, y_ref.abs(), 1, True, torch.bfloat16)
    assert bool((error > output_bound(*args)).all())
    toward_zero = Numerics(out_dtype=torch.bfloat16, rounding_mode="toward_zero")
    assert bool((error <= output_bound(*args, toward_zero.rounding_units)).all())


def test_every_disagreeing_loader_is_named(golden_store: Any) -> None:
    _, ckpt = _loading(golden_store)
    reference = get_loader("fp8").load(ckpt, "e4m3fn")
    weight = reference.layer.weight
    wrong = replace(
        reference, layer=replace(reference.layer, weight=replace(weight, scale=weight.scale * 2))
    )
    results = loader_agreement_checks("fp8", reference, {"a": wrong, "b": reference, "c": wrong})
    assert _failed(results) == ["a_agrees_with_fp8", "c_agrees_with_fp8"]
    summary = failure_summary(results)
    assert summary is not None
    assert "fp8 vs a: weight scale" in summary
    assert "fp8 vs c:" in summary
