"""Checking one's own FP8 linear kernel against qharness's goldens and references.

``my_fp8_linear`` stands for the kernel under test. Each case loads a golden from the store
qharness ships (quantized weight codes and scales, the seeded activation, the float64
reference product ``y_ref``), runs the kernel, and holds its output to every check the
``linear`` suite applies (finite, vs the golden within the derived bound, the rounding
interval, bit agreement with the emulated path, SQNR floor). docs/OWN-KERNEL.md explains it.
"""

from __future__ import annotations

import pytest
import torch

from harness import (
    Numerics,
    QuantizedLinear,
    expected_output,
    get_path,
    get_scheme,
    linear_checks,
    load_linear_case,
    quantize_activation,
)

SCHEME = "fp8_per_tensor"
SHAPES = [(1, 16, 256), (8, 128, 256), (37, 16, 128)]  # (M, N, K) cases the golden holds
OUT_DTYPE = torch.bfloat16


def my_fp8_linear(x: torch.Tensor, layer: QuantizedLinear, out_dtype: torch.dtype) -> torch.Tensor:
    """The kernel under test: quantize the activation as the scheme says, multiply the
    dequantized operands in float32, add the bias, round once to ``out_dtype``."""
    xq = quantize_activation(x, layer.scheme, layer.input_scale)
    a = x.float() if xq is None else xq.dequantize(torch.float32)
    y = a @ layer.weight.dequantize(torch.float32).t()
    if layer.bias is not None:
        y = y + layer.bias.float()
    return y.to(out_dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_my_kernel_against_the_goldens(
    shape: tuple[int, int, int], golden_store, record_checks, record_result
) -> None:
    scheme = get_scheme(SCHEME)
    loaded = load_linear_case(golden_store.load(f"linear/{SCHEME}"), SCHEME, shape, bias=True)
    # suite, scheme, path and shape put this case into the report's matrix
    record_result(
        suite="linear", scheme=SCHEME, path="my_fp8_linear", shape="x".join(map(str, shape))
    )
    y = my_fp8_linear(loaded.x, loaded.layer, OUT_DTYPE)
    y_emulated = get_path("emulated").forward(loaded.layer, loaded.x, OUT_DTYPE)
    # how the kernel rounds: exact operands, a float32 sum, one rounding to OUT_DTYPE
    expected = expected_output(loaded, scheme, True, Numerics(out_dtype=OUT_DTYPE))
    record_checks(linear_checks(y, y_emulated, expected, "my_fp8_linear"))
