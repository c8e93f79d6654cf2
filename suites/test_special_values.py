"""NaN and +-Inf activations through every scheme x path: the family where NaN is expected.

The expected behaviour per format and path is the reference's, stated as rules in
harness/linear/special_values.py and asserted explicitly here: the reference quantizer
follows the rule under the path's activation conventions (MX: scale code 0xFF for the
block; FP8 static: the NaN code, or the saturated code for +-Inf; an Inf block a declared
convention saturates: the saturated activation's block scale and codes), the special row
of the path's output holds exactly the expected NaN / Inf / finite pattern, and every
other row is bit-identical to the clean run. A path's known finding declared on a case
(`KnownFinding`, suite ``special_values``) explains a raise or the special row alone: the
rule and the other rows are never covered.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.core.checks import CheckResult, failed, first_offender, passed
from harness.core.formats import decode
from harness.core.quantize import quantize_activation, scale_from_stored, stored_scale
from harness.core.schemes import get_scheme
from harness.linear.paths import get_path
from harness.linear.special_values import (
    ROW_NAN,
    ROW_SATURATED,
    SPECIAL_COL,
    SPECIAL_ROW,
    SpecialCase,
    expected_special_row,
    special_cases,
    special_inputs,
)
from harness.paths.base import path_conventions, with_activation_conventions
from harness.paths.findings import known_finding
from harness.platform.info import PlatformInfo
from harness.plugin import RecordChecks, RecordResult, xfail_known

OUT_DTYPE = torch.float32


def _reference_rule(
    case: SpecialCase, rule: str, inputs: Any, conventions: frozenset[str]
) -> CheckResult:
    """The reference quantizer, under the path's activation conventions, does what the rule
    says for this format."""
    name = "reference_follows_rule"
    scheme = with_activation_conventions(get_scheme(case.scheme), conventions)
    xq = quantize_activation(inputs.special, scheme, inputs.layer.input_scale)
    if xq is None:
        return passed(name)
    spec = xq.spec
    if rule == ROW_SATURATED and spec.scale_fmt.nan_for_nonfinite_block:
        # an Inf block saturated by a declared convention: the saturated block's scale
        sat = quantize_activation(inputs.saturated, scheme, inputs.layer.input_scale)
        assert sat is not None
        at = (SPECIAL_ROW, SPECIAL_COL // spec.block[1])  # type: ignore[operator]
        ok = bool(xq.scale[at] == sat.scale[at]) and bool(
            (xq.codes[SPECIAL_ROW] == sat.codes[SPECIAL_ROW]).all()
        )
        what = f"block scale {float(xq.scale[at])} vs saturated {float(sat.scale[at])}"
        return passed(name) if ok else failed(name, f"{what}; codes of the row must match")
    if spec.scale_fmt.nan_for_nonfinite_block:  # MX 0xFF, NVFP4's E4M3 NaN code
        codes = stored_scale(xq.scale, spec)
        block = codes[SPECIAL_ROW, SPECIAL_COL // spec.block[1]]  # type: ignore[operator]
        ok = bool(torch.isnan(scale_from_stored(block.reshape(1), spec)).all())
        what = f"{spec.scale_format} scale code {int(block):#x}, want a NaN code"
        return passed(name) if ok else failed(name, what)
    code = xq.codes[SPECIAL_ROW, SPECIAL_COL : SPECIAL_COL + 1]
    if rule == ROW_SATURATED:  # +-Inf under a static scale: the code of +-qmax
        sat = quantize_activation(inputs.saturated, scheme, inputs.layer.input_scale)
        assert sat is not None
        want = sat.codes[SPECIAL_ROW, SPECIAL_COL : SPECIAL_COL + 1]
        ok, what = bool((code == want).all()), f"the saturated code {int(want):#x}"
    elif spec.dynamic:  # the tile's fp32 scale is NaN or Inf
        ok, what = not bool(torch.isfinite(xq.scale).all()), "a non-finite tile scale"
    else:  # NaN under a static scale: the format's NaN code
        ok, what = bool(torch.isnan(decode(code, spec.format)).all()), "a NaN code"
    detail = f"{spec.format} code {int(code):#x}, scale {xq.scale.flatten()[:4].tolist()}"
    return passed(name) if ok else failed(name, f"{detail}; the rule wants {what}")


def _special_row(y: torch.Tensor, rule: str, inputs: Any, y_saturated: Any) -> CheckResult:
    name = "special_row_as_defined"
    row = y[SPECIAL_ROW].double()
    if rule == ROW_NAN:
        bad = ~torch.isnan(row)
        want: Any = "NaN"
    elif rule == ROW_SATURATED:
        want = y_saturated[SPECIAL_ROW].double()
        bad = ~(row == want)  # bit-equal values; NaN is never equal
    else:  # ROW_SIGNED_INF: x = +-Inf times each dequantized weight in that column
        w = inputs.layer.weight.dequantize(torch.float64)[:, SPECIAL_COL]
        sign = 1.0 if inputs.special[SPECIAL_ROW, SPECIAL_COL] > 0 else -1.0
        want = torch.where(w == 0, torch.nan, sign * w.sign() * torch.inf)
        bad = ~((row == want) | (torch.isnan(row) & torch.isnan(want)))
    if not bool(bad.any()):
        return passed(name)
    return failed(
        name,
        f"{int(bad.sum())}/{row.numel()} outputs of the special row break rule {rule}",
        first_offender(bad, row, want),
    )


def _other_rows(y: torch.Tensor, y_clean: torch.Tensor) -> CheckResult:
    name = "other_rows_unchanged"
    keep = torch.ones(y.shape[0], dtype=torch.bool)
    keep[SPECIAL_ROW] = False
    a, b = y[keep], y_clean[keep]
    differ = ~((a == b) & torch.isfinite(a))  # NaN never passes here
    if not bool(differ.any()):
        return passed(name)
    return failed(
        name,
        f"{int(differ.sum())}/{a.numel()} outputs of rows without a special value changed",
        first_offender(differ, a, b),
    )


@pytest.mark.parametrize("case", list(special_cases()), ids=lambda c: c.id)
def test_special_values(
    case: SpecialCase,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    scheme = get_scheme(case.scheme)
    path = get_path(case.path)
    support = path.supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    conventions = path_conventions(path)  # the path's activation quantizer's, if any
    rule = expected_special_row(with_activation_conventions(scheme, conventions), case.kind)
    inputs = special_inputs(case.scheme, case.kind, conventions)
    device = qh_platform.torch_device
    layer = inputs.layer.to(device)

    def run(x: torch.Tensor) -> torch.Tensor:
        try:
            return path.forward(layer, x.to(device), OUT_DTYPE).cpu()
        except Exception as exc:
            # an engine finding this case may reproduce, counted as xfail
            finding = known_finding(path, case.finding_case())
            if finding is not None:
                xfail_known(record_result, finding, f"{type(exc).__name__}: {exc}")
            pytest.fail(f"path {case.path!r} raised: {type(exc).__name__}: {exc}", pytrace=False)

    y, y_clean = run(inputs.special), run(inputs.clean)
    y_saturated = None if inputs.saturated is None else run(inputs.saturated)
    # the rule and the other rows first (a gate no finding covers), then the special row,
    # which an engine finding declared on this case may explain (an xfail with its text)
    record_checks([_reference_rule(case, rule, inputs, conventions), _other_rows(y, y_clean)])
    record_checks(
        [_special_row(y, rule, inputs, y_saturated)],
        known_finding=known_finding(path, case.finding_case()),
    )
