"""Linear layers fed float32 activations that carry bits below bfloat16 precision.

The golden inputs are bfloat16-valued, as most models' activations are, so a path that
rounds its activation to bfloat16 before scaling and quantizing it is invisible there. Here
the activation holds float32 bits (as fp32 residual streams and fp16 models give): the
reference quantizer (itself checked bit for bit against the goldens by test_linear.py)
quantizes it, and every path must return a correct rounding of the accumulation interval
of the exact dequantized product and, if it is not the reference, agree with emulated bit
for bit wherever that rounding is unique. No golden is stored: the reference is computed.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.core.compare import (
    dot_error_bound,
    outside_interval,
    rounding_bound,
    rounding_interval,
    within_bound,
)
from harness.core.inputs import generator
from harness.core.quantize import quantize_activation, quantize_linear
from harness.core.schemes import get_scheme
from harness.linear.cases import linear_inputs, shape_id
from harness.paths import LinearProblem, get_path, linear_paths
from harness.paths.base import is_reference, output_roundings

# One scheme per activation handling: static per-tensor, dynamic per-token, unquantized,
# MX blocks.
SCHEMES = ("fp8_per_tensor", "fp8_per_channel", "w_mxfp4", "w_mxfp8_a_mxfp8")
SHAPE = (8, 128, 256)
OUT = torch.bfloat16


def _float32_activation(scheme: str) -> torch.Tensor:
    """The golden case's bf16 activation with every element perturbed below bf16 precision
    (a relative 2^-10 .. 2^-9, sign seeded), so almost no element is a bf16 value."""
    x = linear_inputs(scheme, SHAPE)["x"]
    gen = generator(f"float32_activations/{scheme}")
    u = torch.rand(x.shape, generator=gen)
    sign = torch.where(torch.rand(x.shape, generator=gen) < 0.5, -1.0, 1.0)
    return (x * (1 + sign * (1 + u) * 2.0**-10)).float()


@pytest.mark.parametrize(
    ("scheme", "path"),
    [(s, p) for s in SCHEMES for p in linear_paths()],
    ids=[f"{s}-{p}-{shape_id(SHAPE)}" for s in SCHEMES for p in linear_paths()],
)
def test_float32_activation(scheme: str, path: str, qh_platform: Any) -> None:
    spec = get_scheme(scheme)
    m, n, k = SHAPE
    problem = LinearProblem(m, n, k, True, OUT)
    support = get_path(path).supports(spec, problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    inputs = linear_inputs(scheme, SHAPE)
    x = _float32_activation(scheme)
    assert float((x != x.to(torch.bfloat16).float()).float().mean()) > 0.9
    layer = quantize_linear(inputs["w"], inputs["bias"], spec, calibration=x)
    device = qh_platform.torch_device
    y = get_path(path).forward(layer.to(device), x.to(device), OUT).cpu()
    assert y.shape == (m, n)
    assert y.dtype == OUT

    xq = quantize_activation(x, spec, layer.input_scale)
    a = x.double() if xq is None else xq.dequantize(torch.float64)
    w = layer.weight.dequantize(torch.float64)
    bias = inputs["bias"].double()
    center = a @ w.t() + bias
    abs_product = a.abs() @ w.abs().t() + bias.abs()
    # As in test_linear.py: K + 3 float32 roundings per term (Higham gamma_{K+3}), plus
    # gamma_K in float64 for `center`, plus the path's roundings to the output dtype.
    radius = dot_error_bound(abs_product, k + 2, torch.float32) + dot_error_bound(
        abs_product, k, torch.float64
    )
    roundings = output_roundings(get_path(path), spec, problem)
    result = within_bound(y, center, radius + rounding_bound(center, OUT, roundings=roundings))
    assert result.ok, f"{path} vs float64 reference: {result.describe()}"
    if roundings != 1:
        return
    lo, hi = rounding_interval(center, radius, OUT)
    outside = outside_interval(y, lo, hi)
    assert not bool(outside.any()), (
        f"{path}: {int(outside.sum())}/{y.numel()} outputs are not a rounding of any value "
        "within the accumulation bound"
    )
    if not is_reference(get_path(path)):
        y_emulated = get_path("emulated").forward(layer, x, OUT).cpu()
        differ = int(((y != y_emulated) & (lo == hi)).sum())
        assert differ == 0, f"{path} and emulated differ in {differ} determined outputs"
