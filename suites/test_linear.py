"""Linear layers: every scheme x path x shape x bias x output dtype, against the goldens;
and the input designs (`harness.linear.designs`), each built to show one bug class,
against the reference quantizer's float64 product."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from harness.core.checks import CheckResult, failure_summary
from harness.core.compare import bit_mismatches
from harness.core.quantize import QuantizedLinear, quantize, quantize_activation, stored_scale
from harness.core.schemes import get_scheme
from harness.linear.call_cases import BATCH, ORDER_SHAPES, SEQ, CallCase, call_cases, call_layer
from harness.linear.cases import (
    LinearCase,
    LoadedLinearCase,
    OperandCase,
    QuantizeCase,
    linear_cases,
    load_linear_case,
    operand_cases,
    quantize_cases,
)
from harness.linear.checks import expected_output, linear_checks
from harness.linear.designs import DESIGNS_BY_NAME, DesignCase, design_case, design_cases
from harness.linear.operand_designs import DesignedCase, designed_cases
from harness.linear.operands import expected_operands, operand_checks
from harness.linear.paths import get_path, linear_paths
from harness.linear.repro import linear_bundle_tensors
from harness.paths.base import (
    activation_in_model_dtype,
    is_reference,
    layer_under_conventions,
    linear_numerics,
    path_conventions,
    takes_leading_dims,
)
from harness.paths.findings import FindingCase, finding_rules, known_finding, matching_findings
from harness.paths.operands import (
    QuantizedOperands,
    exposes_operands,
    operands_shown,
    path_operands,
)
from harness.platform.info import PlatformInfo
from harness.plugin import (
    MeasureMemory,
    RecordChecks,
    RecordResult,
    ReproCase,
    load_golden,
    xfail_known,
)
from harness.store.golden_store import GoldenStore


@pytest.mark.parametrize("case", list(quantize_cases()), ids=lambda c: c.id)
def test_quantize_matches_golden(
    case: QuantizeCase,
    golden_store: GoldenStore,
    qh_platform: PlatformInfo,
    measure_memory: MeasureMemory,
) -> None:
    """The reference quantizer reproduces the golden codes and scales bit for bit, on device."""
    scheme = get_scheme(case.scheme)
    data = load_golden(golden_store, case.golden_entry)
    loaded = load_linear_case(data, case.scheme, case.shape, bias=True)
    device = qh_platform.torch_device
    w_in = loaded.inputs["w"].to(device)
    with measure_memory():  # records peak_bytes of the reference quantizer
        w = quantize(w_in, scheme.weight)
    assert bit_mismatches(w.codes, loaded.layer.weight.codes) == 0, "weight codes differ"
    assert bit_mismatches(w.scale, loaded.layer.weight.scale) == 0, "weight scales differ"
    if w.global_scale is not None:  # a two-level format's per-tensor level (NVFP4)
        assert loaded.layer.weight.global_scale is not None, "golden has no weight global scale"
        assert bit_mismatches(w.global_scale, loaded.layer.weight.global_scale) == 0
    xq = quantize_activation(loaded.x.to(device), scheme, loaded.layer.input_scale)
    key = "x".join(map(str, case.shape))
    if xq is not None:
        assert bit_mismatches(xq.codes, data.tensors[f"{key}.x_codes"]) == 0, "activation codes"
        stored = stored_scale(xq.scale, xq.spec)  # E8M0 codes for MX, float32 otherwise
        assert bit_mismatches(stored, data.tensors[f"{key}.x_scale"]) == 0, "activation scales"
        if xq.global_scale is not None:
            want = data.tensors[f"{key}.x_global_scale"]
            assert bit_mismatches(xq.global_scale, want) == 0, "activation global scale"


def _run(
    case: LinearCase | DesignCase,
    layer: QuantizedLinear,
    x: torch.Tensor,
    path_name: str,
    record_result: RecordResult,
) -> torch.Tensor:
    path = get_path(path_name)
    dtype = case.problem.out_dtype
    try:
        y = path.forward(layer, x, dtype)
    except Exception as exc:
        finding = known_finding(path, case.finding_case())
        if finding is not None:
            xfail_known(record_result, finding, f"{type(exc).__name__}: {exc}")
        pytest.fail(
            f"path {path_name!r} raised on {case.id}: {type(exc).__name__}: {exc}", pytrace=False
        )
    if y.shape != (case.shape[0], case.shape[1]) or y.dtype != dtype:
        pytest.fail(
            f"path {path_name!r} returned {tuple(y.shape)} {y.dtype}, "
            f"expected {(case.shape[0], case.shape[1])} {dtype}",
            pytrace=False,
        )
    return y


@pytest.mark.parametrize("case", list(linear_cases()), ids=lambda c: c.id)
def test_linear(
    case: LinearCase,
    golden_store: GoldenStore,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
    measure_memory: MeasureMemory,
    repro_case: ReproCase,
) -> None:
    """Every check of `harness.linear.checks.LINEAR_CHECKS`, each evaluated and recorded."""
    scheme = get_scheme(case.scheme)
    path = get_path(case.path)
    support = path.supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    data = load_golden(golden_store, case.golden_entry)
    loaded = load_linear_case(data, case.scheme, case.shape, case.bias)
    device = qh_platform.torch_device
    layer, x = loaded.layer.to(device), loaded.x.to(device)
    out_dtype = case.problem.out_dtype

    with measure_memory():  # records peak_bytes of the path's forward call
        y = _run(case, layer, x, case.path, record_result)
    y = y.cpu()
    conventions = path_conventions(path)  # the path's activation quantizer's, if any
    if conventions:
        record_result(conventions=sorted(conventions))
    numerics = linear_numerics(path, scheme, case.problem)  # what the bounds derive from
    record_result(numerics=numerics.describe())  # the declaration held to
    y_emulated = None
    if not is_reference(path):  # same quantized operands through the emulated path
        same = layer_under_conventions(layer, conventions, numerics)
        y_emulated = get_path("emulated").forward(same, x, out_dtype).cpu()
    expected = expected_output(loaded, scheme, case.bias, numerics, conventions)
    repro_case("linear", **linear_bundle_tensors(loaded.layer, loaded.x, y, expected))
    checks = linear_checks(y, y_emulated, expected, case.path)
    finding = _scoped_finding(path, case.finding_case(), checks, y, loaded, x, case.bias)
    record_checks(checks, known_finding=finding)


@pytest.mark.parametrize("case", list(design_cases(linear_paths())), ids=lambda c: c.id)
def test_linear_design(
    case: DesignCase,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
    repro_case: ReproCase,
) -> None:
    """The checks of `harness.linear.checks.LINEAR_CHECKS` on an input design (no golden:
    the reference quantizer's float64 product, `harness.linear.designs.design_case`); a
    failure leaves a repro bundle, as `test_linear`'s do."""
    scheme = case.scheme_spec  # the registered scheme, or the design's variant of it
    path = get_path(case.path)
    support = path.supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    model_dtype = activation_in_model_dtype(path)
    rounded = case.problem.out_dtype != torch.float32  # a float32 model's x stays float32
    if DESIGNS_BY_NAME[case.design].float32_activation and model_dtype and rounded:
        pytest.skip(f"{case.path}: {model_dtype}")  # its engine never sees float32 values
    loaded = design_case(case.design, case.scheme)
    device = qh_platform.torch_device
    held = loaded.layer if case.bias else dataclasses.replace(loaded.layer, bias=None)
    layer, x = held.to(device), loaded.x.to(device)
    out_dtype = case.problem.out_dtype
    y = _run(case, layer, x, case.path, record_result).cpu()
    conventions = path_conventions(path)
    if conventions:
        record_result(conventions=sorted(conventions))
    numerics = linear_numerics(path, scheme, case.problem)
    record_result(numerics=numerics.describe())  # the declaration held to
    y_emulated = None
    if not is_reference(path):
        same = layer_under_conventions(layer, conventions, numerics)
        y_emulated = get_path("emulated").forward(same, x, out_dtype).cpu()
    expected = expected_output(loaded, scheme, case.bias, numerics, conventions)
    repro_case("linear", **linear_bundle_tensors(held, loaded.x, y, expected))
    checks = linear_checks(y, y_emulated, expected, case.path)
    finding = _scoped_finding(path, case.finding_case(), checks, y, loaded, x, case.bias)
    record_checks(checks, known_finding=finding)


def _scoped_finding(
    path: Any,
    fc: FindingCase,
    checks: list[CheckResult],
    y: torch.Tensor,
    loaded: LoadedLinearCase,
    x: torch.Tensor,
    bias: bool,
) -> str | None:
    """The text of the known finding that covers this case, if it explains the failures.

    A finding naming its rules (`KnownFinding.behaves_as`) explains them only if every check
    passes again with the output held to the reference under those rules (in place of the
    conventions it replaces): a second fault in the same case then still fails it. A
    finding without rules covers its whole case."""
    text = known_finding(path, fc)
    if text is None or failure_summary(checks) is None:
        return text
    conventions = path_conventions(path)
    rules = finding_rules(matching_findings(path, fc), conventions)
    if rules is None:
        return text
    scheme = loaded.layer.scheme
    problem = fc.problem
    assert problem is not None
    numerics = linear_numerics(path, scheme, problem)
    held = loaded.layer if bias else dataclasses.replace(loaded.layer, bias=None)
    same = layer_under_conventions(held.to(x.device), rules, numerics)
    y_model = get_path("emulated").forward(same, x, problem.out_dtype).cpu()
    expected = expected_output(loaded, scheme, bias, numerics, rules)
    if failure_summary(linear_checks(y, y_model, expected, path.name)) is None:
        return text
    return None  # the failures are more than the finding says: they fail the case


def _model_dtype(path: object, case: OperandCase | DesignedCase) -> torch.dtype | None:
    """The dtype the path hands its engine the activation in, where it declares that it
    does so (`activation_in_model_dtype`): the output dtype; else None (as given)."""
    return case.problem.out_dtype if activation_in_model_dtype(path) else None


def _on_cpu(operands: QuantizedOperands) -> QuantizedOperands:
    act = None if operands.activation is None else operands.activation.to("cpu")
    return QuantizedOperands(act, operands.weight.to("cpu"))


@pytest.mark.parametrize("case", list(operand_cases()), ids=lambda c: c.id)
def test_linear_operands(
    case: OperandCase,
    golden_store: GoldenStore,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    """For paths that show the operands they feed their kernel: the activation's and the
    weight's codes and scales bit for bit against the reference quantizer
    (`harness.linear.operands.OPERAND_CHECKS`), under the path's declared conventions."""
    scheme = get_scheme(case.scheme)
    path = get_path(case.path)
    support = path.supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    shown = operands_shown(path, scheme, case.problem)
    if not shown.ok:
        pytest.skip(shown.reason)
    data = load_golden(golden_store, case.golden_entry)
    loaded = load_linear_case(data, case.scheme, case.shape, bias=False)
    device = qh_platform.torch_device
    finding = known_finding(path, case.finding_case())
    try:
        got = path_operands(
            path, loaded.layer.to(device), loaded.x.to(device), case.problem.out_dtype
        )
    except Exception as exc:
        if finding is not None:
            xfail_known(record_result, finding, f"{type(exc).__name__}: {exc}")
        pytest.fail(
            f"path {case.path!r} raised showing operands of {case.id}: {type(exc).__name__}: {exc}",
            pytrace=False,
        )
    conventions = path_conventions(path)
    if conventions:
        record_result(conventions=sorted(conventions))
    want = expected_operands(loaded.layer, loaded.x, conventions, _model_dtype(path, case))
    record_checks(operand_checks(_on_cpu(got), want, case.path), known_finding=finding)


@pytest.mark.parametrize("case", list(designed_cases(list(linear_paths()))), ids=lambda c: c.id)
def test_linear_designed(
    case: DesignedCase,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
    repro_case: ReproCase,
) -> None:
    """Designed inputs where one small quantized value alone decides outputs
    (`harness.linear.operand_designs`): every output check of `test_linear` and, for paths that
    show their operands, every operand check. A failure leaves a repro bundle (its re-run
    repeats the output checks)."""
    scheme = get_scheme(case.scheme)
    path = get_path(case.path)
    support = path.supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    design = case.build()
    assert design.holds == "", (
        f"design {case.design} does not hold for {case.scheme}: {design.holds}"
    )
    loaded = design.loaded()
    device = qh_platform.torch_device
    layer, x = loaded.layer.to(device), loaded.x.to(device)
    out_dtype = case.problem.out_dtype
    finding = known_finding(path, case.finding_case())
    try:
        y = path.forward(layer, x, out_dtype).cpu()
        shows = exposes_operands(path) and operands_shown(path, scheme, case.problem).ok
        got = path_operands(path, layer, x, out_dtype) if shows else None
    except Exception as exc:
        if finding is not None:
            xfail_known(record_result, finding, f"{type(exc).__name__}: {exc}")
        pytest.fail(
            f"path {case.path!r} raised on {case.id}: {type(exc).__name__}: {exc}", pytrace=False
        )
    conventions = path_conventions(path)
    numerics = linear_numerics(path, scheme, case.problem)
    record_result(numerics=numerics.describe())  # the declaration held to
    y_emulated = None
    if not is_reference(path):
        same = layer_under_conventions(layer, conventions, numerics)
        y_emulated = get_path("emulated").forward(same, x, out_dtype).cpu()
    expected = expected_output(loaded, scheme, False, numerics, conventions)
    repro_case("linear", **linear_bundle_tensors(loaded.layer, loaded.x, y, expected))
    checks = linear_checks(y, y_emulated, expected, case.path)
    if got is not None:
        want = expected_operands(loaded.layer, loaded.x, conventions, _model_dtype(path, case))
        checks += operand_checks(_on_cpu(got), want, case.path)
    record_checks(checks, known_finding=finding)


@pytest.mark.parametrize("case", list(call_cases(list(linear_paths()))), ids=lambda c: c.id)
def test_linear_calls(
    case: CallCase, qh_platform: PlatformInfo, record_result: RecordResult
) -> None:
    """The same layer and input called two ways give the same bits
    (`harness.linear.call_cases`): ``order``, A then B then A again (nothing a call leaves
    behind changes a later one); ``batched``, [batch, seq, K] against [batch * seq, K]."""
    scheme = get_scheme(case.scheme)
    path = get_path(case.path)
    for problem in case.problems:
        support = path.supports(scheme, problem, qh_platform)
        if not support.ok:
            pytest.skip(support.reason)
    if case.kind == "batched" and not takes_leading_dims(path):
        pytest.skip(f"{case.path}: takes [tokens, hidden] activations only (its kernel's API)")
    device = qh_platform.torch_device
    out_dtype = case.problem.out_dtype
    finding = known_finding(path, case.finding_case())

    def call(layer: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
        try:
            return path.forward(layer.to(device), x.to(device), out_dtype).cpu()
        except Exception as exc:
            if finding is not None:
                xfail_known(record_result, finding, f"{type(exc).__name__}: {exc}")
            pytest.fail(
                f"path {case.path!r} raised on {case.id}: {type(exc).__name__}: {exc}",
                pytrace=False,
            )

    layer, x = call_layer(case.scheme, case.shape)
    first = call(layer, x)
    if case.kind == "order":
        call(*call_layer(case.scheme, ORDER_SHAPES[1]))
        second = call(layer, x)
        what = f"{case.shape} again after {ORDER_SHAPES[1]}"
    else:
        second = call(layer, x.reshape(BATCH, SEQ, -1))
        assert second.shape == (BATCH, SEQ, first.shape[-1]), (
            f"batched output shape {tuple(second.shape)}, expected {(BATCH, SEQ, first.shape[-1])}"
        )
        second = second.reshape(first.shape)
        what = f"x as [{BATCH}, {SEQ}, K]"
    differ = bit_mismatches(second, first)
    record_result(elements_differing=int(differ))
    if differ and finding is not None:
        xfail_known(record_result, finding, f"{differ} elements differ ({what})")
    assert not bool(torch.isnan(first).any()), f"{case.id}: NaN in the output"
    assert differ == 0, f"{differ} of {first.numel()} output elements differ ({what})"
