"""A weight-only (W8A16) kernel selected for a W8A8 checkpoint, declared in its numerics
(``Numerics.unquantized_activation``), is held to the unquantized activation times the
dequantized weight, bit for bit where the rounding is unique; undeclared, or declared by a
kernel that does quantize its activation, the same checks fail.

The two kernels modelled are the two step orders of vLLM's CPU ``fp8_scaled_mm_cpu``
(W8A16 by its documentation): above 4 tokens, weights dequantized to bf16 (``code * scale``
in float32, then rounded) and one float32 GEMM with the bias added before one rounding to
bf16; at 4 tokens or fewer, exact codes, float32 partial sums per 128-wide K block scaled
into an accumulator that starts at the bias, then one rounding.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.core.quantize import QuantizedLinear
from harness.linear.cases import load_linear_case
from harness.linear.checks import expected_output, linear_checks
from harness.linear.paths import get_path
from harness.paths.base import Numerics, layer_under_conventions

OUT = torch.bfloat16
K_BLOCK = 128


def _weight_codes_and_scales(layer: QuantizedLinear) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight's FP8 code values and each element's float32 scale, both [N, K]."""
    codes = layer.weight.codes.view(torch.float8_e4m3fn).float()
    n, k = codes.shape
    grid = layer.weight.scale.float()
    rows, cols = -(-n // grid.shape[0]), -(-k // grid.shape[1])
    scales = grid.repeat_interleave(rows, 0)[:n].repeat_interleave(cols, 1)[:, :k]
    return codes, scales


def brgemm_w8a16(layer: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
    """bf16(x) @ bf16(code * scale)^T in float32, plus the bias, rounded once to bf16."""
    codes, scales = _weight_codes_and_scales(layer)
    w = (codes * scales).to(OUT).float()
    y = x.to(OUT).double() @ w.double().t()  # exact; float32 sums err within the bound
    if layer.bias is not None:
        y = y + layer.bias.to(OUT).double()
    return y.float().to(OUT)


def tinygemm_w8a16(layer: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
    """Exact codes; per 128-wide K block a float32 partial sum, fma'd with its scale into
    an accumulator that starts at the bias; one rounding to bf16."""
    codes, scales = _weight_codes_and_scales(layer)
    a = x.to(OUT).float()
    n, k = codes.shape
    acc = torch.zeros(a.shape[0], n, dtype=torch.float32)
    if layer.bias is not None:
        acc = acc + layer.bias.to(OUT).float()
    for start in range(0, k, K_BLOCK):
        block = slice(start, min(k, start + K_BLOCK))
        partial = (a[:, block].double() @ codes[:, block].double().t()).float()
        scale = scales[:, start].double()  # one scale per output column and K block
        acc = (partial.double() * scale + acc.double()).float()  # fma: one rounding
    return acc.to(OUT)


BRGEMM = Numerics(OUT, operand_dtype=OUT, unquantized_activation=OUT)
TINYGEMM = Numerics(OUT, unquantized_activation=OUT)
WEIGHT_ONLY = {
    # (shape, kernel, numerics): above 4 tokens brgemm with bf16 weights, at most 4 tiny
    "brgemm": ((8, 128, 256), brgemm_w8a16, BRGEMM),
    "tinygemm": ((1, 16, 256), tinygemm_w8a16, TINYGEMM),
}
SCHEMES = ("fp8_per_tensor", "fp8_per_block")


def _case(golden_store: Any, scheme: str, shape: tuple[int, int, int], bias: bool) -> Any:
    return load_linear_case(golden_store.load(f"linear/{scheme}"), scheme, shape, bias=bias)


def _failed(results: list[Any]) -> set[str]:
    return {r.name for r in results if r.failed}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("kernel", sorted(WEIGHT_ONLY))
def test_declared_weight_only_kernel_passes_every_check(
    golden_store: Any, kernel: str, scheme: str, bias: bool
) -> None:
    shape, compute, numerics = WEIGHT_ONLY[kernel]
    loaded = _case(golden_store, scheme, shape, bias)
    y = compute(loaded.layer, loaded.x)
    same = layer_under_conventions(loaded.layer, frozenset(), numerics)
    assert same.scheme.activation is None  # emulated runs the weight-only counterpart
    y_emulated = get_path("emulated").forward(same, loaded.x, OUT)
    exp = expected_output(loaded, loaded.layer.scheme, bias, numerics)
    results = linear_checks(y, y_emulated, exp, kernel)
    assert _failed(results) == set(), [r.message for r in results if r.failed]
    # the rounding interval fixes most outputs, so the pass is a bit-for-bit statement
    assert float(exp.determined.double().mean()) > 0.5


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("kernel", sorted(WEIGHT_ONLY))
def test_undeclared_weight_only_kernel_fails(golden_store: Any, kernel: str, scheme: str) -> None:
    """Held to the W8A8 scheme it does not compute, the kernel fails: the declaration is
    what makes it pass, not a wide bound."""
    shape, compute, _ = WEIGHT_ONLY[kernel]
    loaded = _case(golden_store, scheme, shape, True)
    y = compute(loaded.layer, loaded.x)
    exp = expected_output(loaded, loaded.layer.scheme, True, Numerics(OUT))
    y_emulated = get_path("emulated").forward(loaded.layer, loaded.x, OUT)
    assert {"vs_golden", "rounding_interval"} <= _failed(linear_checks(y, y_emulated, exp, kernel))


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("kernel", sorted(WEIGHT_ONLY))
def test_quantizing_kernel_declared_weight_only_fails(
    golden_store: Any, kernel: str, scheme: str
) -> None:
    """The reverse: a kernel that quantizes its activation (the emulated W8A8 path) under
    the weight-only declaration lands outside the declared interval."""
    shape, _, numerics = WEIGHT_ONLY[kernel]
    loaded = _case(golden_store, scheme, shape, True)
    y = get_path("emulated").forward(loaded.layer, loaded.x, OUT)
    exp = expected_output(loaded, loaded.layer.scheme, True, numerics)
    assert "rounding_interval" in _failed(linear_checks(y, None, exp, kernel))


def test_weight_only_numerics_describe_the_activation() -> None:
    assert "activation unquantized in bfloat16" in WEIGHT_ONLY["brgemm"][2].describe()
    assert Numerics(OUT).activation_quantized
    assert not WEIGHT_ONLY["tinygemm"][2].activation_quantized


@pytest.mark.parametrize("field", ["unquantized_activation", "operand_dtype", "out_dtype"])
def test_numerics_names_a_dtype_that_is_not_one(field: str) -> None:
    """A plugin's declaration with a dtype's name instead of the dtype is refused, naming
    the field, instead of comparing against a wrong reference."""
    fields: dict[str, Any] = {"out_dtype": OUT, field: "bfloat16"}
    with pytest.raises(TypeError, match=field):
        Numerics(**fields)
