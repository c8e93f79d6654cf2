"""Linear layers fed float32 activations that carry bits below bfloat16 precision.

The golden inputs are bfloat16-valued, as most models' activations are, so a path that
rounds its activation to bfloat16 before scaling and quantizing it is invisible there. Here
the activation holds float32 bits (as fp32 residual streams and fp16 models give): the
reference quantizer (itself checked bit for bit against the goldens by test_linear.py)
quantizes it, the float64 product of the dequantized operands is the reference, and the
linear suite's named checks (`harness.linear.checks`: bound, rounding interval, bits vs
emulated, SQNR) apply as they do to golden cases. No golden is stored: it is computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from harness.core.hard_inputs import binade_crossing, subnormal_block_scales, tail_amax
from harness.core.inputs import generator
from harness.core.quantize import quantize_activation, quantize_linear
from harness.core.schemes import get_scheme
from harness.core.spec import MX_BLOCK
from harness.linear.cases import LoadedLinearCase, linear_inputs, normalize_output
from harness.linear.checks import expected_output, linear_checks
from harness.linear.paths import get_path, linear_paths
from harness.paths import LinearProblem
from harness.paths.base import (
    activation_in_model_dtype,
    is_reference,
    layer_under_conventions,
    linear_numerics,
)
from harness.paths.case import Case
from harness.platform.info import PlatformInfo
from harness.plugin import RecordChecks, RecordResult

# One scheme per activation handling: static per-tensor, dynamic per-token, unquantized,
# MX blocks, NVFP4 (a static per-tensor scale over per-call E4M3 block scales).
SCHEMES = ("fp8_per_tensor", "fp8_per_channel", "w_mxfp4", "w_mxfp8_a_mxfp8", "w_nvfp4_a_nvfp4")
SHAPE = (8, 128, 256)
OUT = torch.bfloat16


# A long row: K >= 4096 and no multiple of 256..1024 (130 MX blocks), every row of both
# operands peaking in its last 64 columns, and (MX activations) every block's amax moved to
# where its bf16 rounding changes the block's scale, (NVFP4 activations) half the blocks
# with E4M3-subnormal block scales (harness.core.hard_inputs).
LONG_SHAPE = (4, 16, 4160)
LONG_TAIL = 64


def _perturbed(x: torch.Tensor, name: str) -> torch.Tensor:
    """``x`` with every element perturbed below bf16 precision (a relative 2^-10 .. 2^-9,
    sign seeded), so almost no element is a bf16 value."""
    gen = generator(name)
    u = torch.rand(x.shape, generator=gen)
    sign = torch.where(torch.rand(x.shape, generator=gen) < 0.5, -1.0, 1.0)
    return (x * (1 + sign * (1 + u) * 2.0**-10)).float()


def _float32_activation(scheme: str) -> torch.Tensor:
    """The golden case's bf16 activation, perturbed below bf16 precision."""
    return _perturbed(linear_inputs(scheme, SHAPE)["x"], f"float32_activations/{scheme}")


def _long_inputs(scheme: str) -> dict[str, torch.Tensor]:
    """Seeded inputs of LONG_SHAPE: rows peaking in their tails, the activation perturbed
    below bf16 precision and, for MX activations, crossing a scale point in bf16 (for
    NVFP4 activations, half its blocks with E4M3-subnormal block scales)."""
    inputs = linear_inputs(scheme, LONG_SHAPE)
    x = _perturbed(tail_amax(inputs["x"], LONG_TAIL), f"float32_activations/long/{scheme}")
    act = get_scheme(scheme).activation
    if act is not None and act.block[1] == MX_BLOCK:
        x = binade_crossing(x, act)
    if act is not None and act.scale_fmt.element is not None:  # E4M3 block scales
        x = subnormal_block_scales(x, act)
    w = normalize_output(x, tail_amax(inputs["w"], LONG_TAIL))
    return {**inputs, "x": x, "w": w}


def _case(scheme: str, shape: tuple[int, int, int] = SHAPE) -> LoadedLinearCase:
    """The case as a golden would hold it, computed here: layer, input and the float64
    product of the dequantized operands (rounded to float32, as goldens store it)."""
    spec = get_scheme(scheme)
    if shape == SHAPE:
        inputs = linear_inputs(scheme, SHAPE)
        x = _float32_activation(scheme)
    else:
        inputs = _long_inputs(scheme)
        x = inputs["x"]
    layer = quantize_linear(inputs["w"], inputs["bias"], spec, calibration=x)
    xq = quantize_activation(x, spec, layer.input_scale)
    a = x.double() if xq is None else xq.dequantize(torch.float64)
    y_ref = (a @ layer.weight.dequantize(torch.float64).t()).float()
    return LoadedLinearCase(layer, x, y_ref, {**inputs, "x": x})


@dataclass(frozen=True)
class Float32Case(Case):
    SUITE = "float32_activations"
    ID = ("scheme", "path", "shape")
    RECORD = ("scheme", "path", "shape", "bias", "out_dtype")
    bias = True
    out_dtype = "bf16"

    scheme: str
    path: str
    shape: tuple[int, int, int] = SHAPE


@pytest.mark.parametrize(
    "case", [Float32Case(s, p) for s in SCHEMES for p in linear_paths()], ids=lambda c: c.id
)
def test_float32_activation(
    case: Float32Case,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    """The checks of `harness.linear.checks.LINEAR_CHECKS` on a float32-valued activation."""
    _check_case(case, qh_platform, record_checks, record_result)


@pytest.mark.parametrize(
    "case",
    [Float32Case(s, p, LONG_SHAPE) for s in SCHEMES for p in linear_paths()],
    ids=lambda c: c.id,
)
def test_float32_activation_long_k(
    case: Float32Case,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    """The same checks on a long row (LONG_SHAPE) peaking in its tail, whose MX blocks'
    maxima cross a scale point in bf16."""
    _check_case(case, qh_platform, record_checks, record_result)


def _check_case(
    case: Float32Case,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    scheme, path = case.scheme, case.path
    spec = get_scheme(scheme)
    m, n, k = case.shape
    problem = LinearProblem(m, n, k, True, OUT)
    linear_path = get_path(path)
    support = linear_path.supports(spec, problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    model_dtype = activation_in_model_dtype(linear_path)
    if model_dtype:  # the engine's layer never sees float32 values in a bf16 model
        pytest.skip(f"{path}: {model_dtype}")
    loaded = _case(scheme, case.shape)
    x = loaded.x
    assert float((x != x.to(torch.bfloat16).float()).float().mean()) > 0.9
    device = qh_platform.torch_device
    layer = loaded.layer.to(device)
    y = linear_path.forward(layer, x.to(device), OUT).cpu()
    assert y.shape == (m, n)
    assert y.dtype == OUT
    numerics = linear_numerics(linear_path, spec, problem)  # what the bounds derive from
    record_result(numerics=numerics.describe())  # the declaration held to
    y_emulated = None
    if not is_reference(linear_path):
        same = layer_under_conventions(layer, frozenset(), numerics)
        y_emulated = get_path("emulated").forward(same, x.to(device), OUT).cpu()
    expected = expected_output(loaded, spec, True, numerics)
    record_checks(linear_checks(y, y_emulated, expected, path))
