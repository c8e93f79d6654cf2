"""The torchao linear paths' scheme tables agree with the scheme registry's fields.

The torchao linear paths dispatch through explicit tables of scheme names (never name
prefixes), harness `DispatchTable`s checked against their kernels' contracts. These tests
hold each table to the specs: every entry exists and is something torchao runs, and every
registered scheme it could run is in the table, so a new scheme cannot silently skip. Each
skips, counted and with the reason, where the adapter is not installed
(``python3 scripts/engine.py torchao``).
"""

from __future__ import annotations

import pytest

from harness import dispatch_problems
from harness.core.schemes import SCHEMES
from harness.linear.cases import OUT_DTYPES
from harness.paths import LinearProblem
from harness.platform.info import detect


def test_torchao_mx_linear_table_matches_the_specs() -> None:
    linear = pytest.importorskip(
        "qharness_torchao.linear",
        reason="torchao adapter not installed (python3 scripts/engine.py torchao)",
    )
    assert linear.table_problems() == []
    runnable = {
        name
        for name, scheme in SCHEMES.items()
        if not linear._mx_spec_problem(scheme.weight, "weight")
        and not linear._mx_spec_problem(scheme.activation, "activation")
    }
    assert set(linear.MX_LINEAR_SCHEMES) == runnable


def test_torchao_mx_linear_refusals_name_their_reason() -> None:
    linear = pytest.importorskip(
        "qharness_torchao.linear",
        reason="torchao adapter not installed (python3 scripts/engine.py torchao)",
    )
    path = linear.TorchaoMXLinearPath()
    platform = detect()
    bf16 = LinearProblem(8, 128, 256, True, OUT_DTYPES["bf16"])
    for name, scheme in SCHEMES.items():
        support = path.supports(scheme, bf16, platform)
        assert support.ok == (name in linear.MX_LINEAR_SCHEMES), name
        assert support.ok or support.reason, name
    fp16 = LinearProblem(8, 128, 256, True, OUT_DTYPES["fp16"])
    assert "float16" in path.supports(SCHEMES["w_mxfp8_a_mxfp8"], fp16, platform).reason
    partial = LinearProblem(3, 144, 176, True, OUT_DTYPES["bf16"])
    assert "176" in path.supports(SCHEMES["w_mxfp8_a_mxfp8"], partial, platform).reason


def test_torchao_float8_linear_table_matches_the_specs() -> None:
    linear = pytest.importorskip(
        "qharness_torchao.float8_linear",
        reason="torchao adapter not installed (python3 scripts/engine.py torchao)",
    )
    assert dispatch_problems(SCHEMES, linear.KERNELS, linear.FLOAT8_LINEAR_DISPATCH) == []
    for name in linear.FLOAT8_LINEAR_SCHEMES:
        scheme = SCHEMES[name]
        assert scheme.activation is not None, name
        for spec in (scheme.weight, scheme.activation):
            assert (spec.format, spec.scale_format, spec.granularity) == (
                "e4m3fn",
                "fp32",
                "per_row",
            ), name
        assert scheme.activation.dynamic, name
