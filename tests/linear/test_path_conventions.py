"""A linear path that declares engine conventions for its activation quantizer is held to
the activation the reference quantizer computes under them, and only to that.

One per-token FP8 case whose first row has amax below 1/512, where vLLM's scale floor
1/(448*512) (``min_scale_1_over_512max``) picks a coarser scale than amax/448: the emulated
path run under the convention passes every check when the convention is declared; the same
run fails when it is not declared, and the reference run fails when it is.
"""

from __future__ import annotations

import torch

from harness.core.quantize import quantize_activation, quantize_linear
from harness.core.schemes import get_scheme
from harness.linear.cases import LoadedLinearCase
from harness.linear.checks import expected_output, linear_checks
from harness.linear.paths import get_path
from harness.paths.base import Numerics, layer_under_conventions, path_conventions

FLOOR = frozenset({"min_scale_1_over_512max"})
OUT = torch.bfloat16


def _case() -> LoadedLinearCase:
    scheme = get_scheme("fp8_per_channel")
    g = torch.Generator().manual_seed(11)
    w = torch.randn(16, 64, generator=g).bfloat16().float()
    x = torch.randn(4, 64, generator=g).bfloat16().float()
    x[0] *= 2.0**-12  # amax about 2^-10: below the floor's 1/512
    layer = quantize_linear(w, None, scheme)
    xq = quantize_activation(x, scheme, None)
    assert xq is not None
    # the golden's definition: float64 product of the reference-quantized operands
    y_ref = (xq.dequantize(torch.float64) @ layer.weight.dequantize(torch.float64).t()).float()
    return LoadedLinearCase(layer, x, y_ref, {"x": x, "w": w, "bias": torch.zeros(16)})


def _failed(
    y: torch.Tensor, y_em: torch.Tensor, case: LoadedLinearCase, conv: frozenset[str]
) -> list[str]:
    exp = expected_output(case, case.layer.scheme, False, Numerics(OUT), conv)
    return [r.name for r in linear_checks(y, y_em, exp, "under_test") if r.failed]


def test_the_convention_changes_the_case() -> None:
    case = _case()
    emulated = get_path("emulated")
    plain = emulated.forward(case.layer, case.x, OUT)
    floored = emulated.forward(layer_under_conventions(case.layer, FLOOR), case.x, OUT)
    assert not torch.equal(plain[0], floored[0])  # the tiny row differs
    assert torch.equal(plain[1:], floored[1:])  # the others do not


def test_a_path_following_its_declared_convention_passes() -> None:
    case = _case()
    run = layer_under_conventions(case.layer, FLOOR)
    y = get_path("emulated").forward(run, case.x, OUT)
    assert _failed(y, y.clone(), case, FLOOR) == []


def test_following_an_undeclared_convention_fails() -> None:
    case = _case()
    emulated = get_path("emulated")
    y = emulated.forward(layer_under_conventions(case.layer, FLOOR), case.x, OUT)
    y_em = emulated.forward(case.layer, case.x, OUT)
    assert "vs_golden" in _failed(y, y_em, case, frozenset())


def test_declaring_a_convention_the_path_does_not_follow_fails() -> None:
    case = _case()
    emulated = get_path("emulated")
    y = emulated.forward(case.layer, case.x, OUT)
    y_em = emulated.forward(layer_under_conventions(case.layer, FLOOR), case.x, OUT)
    assert "vs_golden" in _failed(y, y_em, case, FLOOR)


def test_paths_declare_no_conventions_by_default() -> None:
    assert path_conventions(get_path("emulated")) == frozenset()
    assert path_conventions(object()) == frozenset()
