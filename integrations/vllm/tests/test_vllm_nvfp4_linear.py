"""vLLM's emulated NVFP4 linear (`qharness_vllm.nvfp4_linear`) at the edges of NVFP4.

The linear suite runs the path on its seeded cases (``-k vllm_nvfp4``); here: its dispatch
table, why vLLM's own selection picks no kernel on this CPU (the adapter's one choice), the
checkpoint layout vLLM loads, and layers at the edges the NVFP4 codec tests cover (zero and
tiny blocks, block scales in E4M3's subnormals, saturating block scales under a small
calibrated global, the per-tensor scale at its extremes, partial blocks).

Each edge case is checked three ways: (1) the operands vLLM multiplies (captured from
``run_nvfp4_emulations``) are, bit for bit, the declared operand arithmetic
(`vllm_operands`: the harness's codes and block scales, the activation's quantized under
the path's conventions, dequantized as vLLM writes it); (2) the output is a rounding of
the float32 accumulation of those operands (the path's declared numerics, `harness.paths.
bounds`); (3) it is within the derived bound of the harness reference (codes times
``s * g`` in float64), the bound widened by the exact effect of the declared operand
arithmetic, which itself stays within its own derived size (`operand_deviation_bound`).
Skips, counted and with the reason, where the vLLM adapter is not installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
import torch

nvfp4_linear = pytest.importorskip(
    "qharness_vllm.nvfp4_linear",
    reason="vLLM adapter not installed (python scripts/engine.py vllm installs it in its own venv)",
)

from vllm.model_executor.layers.quantization.utils import (  # noqa: E402
    nvfp4_emulation_utils as emu,
)

from harness import EMULATE, dispatch_problems  # noqa: E402
from harness.core.compare import gamma, rounding_bound, unit_roundoff  # noqa: E402
from harness.core.formats import decode, unpack_fp4  # noqa: E402
from harness.core.inputs import generator  # noqa: E402
from harness.core.quantize import (  # noqa: E402
    QuantizedLinear,
    QuantizedTensor,
    quantize_activation,
    quantize_linear,
)
from harness.core.schemes import SCHEMES, get_scheme  # noqa: E402
from harness.paths.base import LinearProblem, Numerics, with_activation_conventions  # noqa: E402
from harness.paths.bounds import linear_gemm_interval  # noqa: E402
from harness.platform.info import detect  # noqa: E402

PATH = nvfp4_linear.VllmNvfp4EmulationPath()
SCHEME = get_scheme("w_nvfp4_a_nvfp4")
U32 = unit_roundoff(torch.float32)


# --------------------------------------------------------------------------- the table
def test_table_names_every_registered_scheme_once() -> None:
    assert (
        dispatch_problems(SCHEMES, nvfp4_linear.KERNELS, nvfp4_linear.NVFP4_LINEAR_DISPATCH) == []
    )
    assert nvfp4_linear.table_problems() == []


def test_the_configuration_accepts_exactly_the_schemes_sent_to_it() -> None:
    """From the QuantSpec fields: the W4A4 configuration accepts w_nvfp4_a_nvfp4 and no
    other registered scheme (w_nvfp4 has no activation spec; every other is not NVFP4)."""
    row = nvfp4_linear.NVFP4_LINEAR_DISPATCH[nvfp4_linear.VLLM_CPU]
    for name, scheme in sorted(SCHEMES.items()):
        accepted = {k for k, c in nvfp4_linear.KERNELS.items() if c.accepts(scheme).ok}
        sent = {dec for dec, names in row.items() if name in names} - {EMULATE}
        assert accepted == sent, name


def test_weight_only_nvfp4_is_refused_with_vllms_reason() -> None:
    problem = LinearProblem(4, 16, 64, False, torch.bfloat16)
    support = PATH.supports(get_scheme("w_nvfp4"), problem, detect())
    assert not support.ok
    assert "no weight-only NVFP4 emulation" in support.reason


# ------------------------------------------------------------ vLLM's own kernel choice
def test_vllm_cpu_selects_no_nvfp4_kernel() -> None:
    """Why the adapter names the kernel: vllm-cpu's selection has no CPU row, for W4A4 and
    for W4A16 (which forces Marlin). A vLLM that selects one here fails this test, and the
    adapter's choice gets revisited."""
    w4a4 = nvfp4_linear.kernel_refusal(use_a16=False)
    assert "Failed to find a kernel" in w4a4, w4a4
    w4a16 = nvfp4_linear.kernel_refusal(use_a16=True)
    assert "Marlin" in w4a16, w4a16


def test_the_kernel_is_vllms_emulation_on_rocm_and_last_resort_on_cuda() -> None:
    from vllm.model_executor.kernels.linear import _POSSIBLE_NVFP4_KERNELS
    from vllm.platforms import PlatformEnum

    kernel = nvfp4_linear.emulation_kernel()
    assert kernel.__name__ == "EmulationNvFp4LinearKernel"
    assert kernel in _POSSIBLE_NVFP4_KERNELS[PlatformEnum.CUDA]


# ---------------------------------------------------------------------------- layers
def _seeded(name: str, rows: int, k: int) -> torch.Tensor:
    return torch.randn(rows, k, generator=generator(name)).bfloat16().float()


def ordinary() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    w, x = _seeded("vllm-nvfp4/w", 24, 64) * 0.05, _seeded("vllm-nvfp4/x", 5, 64)
    return w, x, x


def zero_and_tiny_blocks() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A zero block, a block 2^-14 below its neighbours (its E4M3 scale subnormal or zero)
    in the weight and in the activation (calibrated on the same batch)."""
    w, x, _ = ordinary()
    for t in (w, x):
        t[0, :16] = 0.0
        t[1, 16:32] *= 2.0**-14
        t[2, 32:48] *= 2.0**-9
    return w, x, x


def saturating_block_scales() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The activation's global calibrated on a batch 2^-6 as large: block scales saturate
    at 448 and elements clamp at 6."""
    w, x, _ = ordinary()
    return w, x, x * 2.0**-6


def huge_global() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Weight amax near 2^100, activation near 2^-100: globals far from 1 both ways."""
    w, x, _ = ordinary()
    return w * 2.0**100, x * 2.0**-100, x * 2.0**-100


def tiny_activation_global() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An activation global below 2^-128: its stored divisor fp32(1 / g) overflows to Inf,
    and vLLM's quantize gives every element code 0 (`two_level_inverted_global`)."""
    w, x, _ = ordinary()
    return w, x * 2.0**-120, x * 2.0**-120


EDGE_CASES: dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {
    f.__name__: f
    for f in (
        ordinary,
        zero_and_tiny_blocks,
        saturating_block_scales,
        huge_global,
        tiny_activation_global,
    )
}


def _layer(case: str, bias: bool) -> tuple[QuantizedLinear, torch.Tensor]:
    w, x, calibration = EDGE_CASES[case]()
    b = _seeded("vllm-nvfp4/b", 1, w.shape[0]).reshape(-1) if bias else None
    if b is not None and case == "huge_global":
        b = b * 2.0**-2  # outputs are O(1) there
    return quantize_linear(w, b, SCHEME, calibration=calibration), x


@contextmanager
def captured_operands() -> Iterator[dict[str, torch.Tensor]]:
    """The two operands ``run_nvfp4_emulations`` hands ``torch.matmul``."""
    seen: dict[str, torch.Tensor] = {}
    qdq, deq = emu.ref_nvfp4_quant_dequant, emu.dequantize_to_dtype

    def act(*args: Any, **kwargs: Any) -> torch.Tensor:
        seen["a"] = qdq(*args, **kwargs)
        return seen["a"]

    def weight(*args: Any, **kwargs: Any) -> torch.Tensor:
        seen["w"] = deq(*args, **kwargs)
        return seen["w"]

    with (
        mock.patch.object(emu, "ref_nvfp4_quant_dequant", act),
        mock.patch.object(emu, "dequantize_to_dtype", weight),
    ):
        yield seen


def vllm_operands(
    layer: QuantizedLinear, xq: QuantizedTensor, out_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """The declared operand arithmetic (module doc of qharness_vllm.nvfp4_linear), from the
    harness's codes and scales: activation ``code * fp32(s / g_inv)``, weight ``code *
    fp32(s * fp32(1 / G))`` with ``g_inv``, ``G`` the stored divisors, each float32, then
    cast to the model dtype."""
    assert layer.weight.global_scale is not None
    assert layer.input_scale is not None
    g_inv = nvfp4_linear.inverted(layer.input_scale)
    g_w = 1.0 / nvfp4_linear.inverted(layer.weight.global_scale)

    def values(q: QuantizedTensor, block: torch.Tensor) -> torch.Tensor:
        codes = decode(q.codes, "e2m1").float()
        rows, k = codes.shape
        scaled = codes.reshape(rows, -1, 16) * block.float().reshape(rows, -1, 1)
        return scaled.reshape(rows, k).to(out_dtype)

    return values(xq, xq.scale / g_inv), values(layer.weight, layer.weight.scale * g_w)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns (so -0 differs from +0, and NaN equals itself)."""
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def operand_deviation_bound(
    exact: torch.Tensor, roundings: int, dtype: torch.dtype
) -> torch.Tensor:
    """|vLLM's operand - exact code * s * g|: ``roundings`` float32 roundings (gamma), then
    the cast to the model dtype (u_out each, and half its smallest subnormal)."""
    f32 = gamma(roundings, U32) * exact.abs()
    return f32 + rounding_bound(exact.abs() + f32, dtype)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_case_layers(case: str, bias: bool, out_dtype: torch.dtype) -> None:
    if case == "huge_global" and out_dtype == torch.float16:
        pytest.skip("weights near 2^100 overflow float16 (vLLM dequantizes to the model dtype)")
    if case == "tiny_activation_global" and out_dtype == torch.float16:
        pytest.skip(
            "x * 2^-120 underflows float16 to zero: test_zero_activation_under_an_infinite_"
            "divisor checks that case (NaN, as the convention says)"
        )
    layer, x = _layer(case, bias)
    m, k = x.shape
    n = layer.weight.codes.shape[0]
    problem = LinearProblem(m, n, k, bias, out_dtype)
    assert PATH.supports(SCHEME, problem, detect()).ok
    with captured_operands() as seen:
        y = PATH.forward(layer, x, out_dtype)
    assert y.dtype == out_dtype
    assert y.shape == (m, n)
    assert bool(torch.isfinite(y).all()), "vLLM's output is not finite"

    # (1) the operands vLLM multiplies are the declared arithmetic, bit for bit
    x_model = x.to(out_dtype).float()  # vLLM receives the activation in the model dtype
    conv = with_activation_conventions(SCHEME, PATH.conventions)
    xq = quantize_activation(x_model, conv, layer.input_scale)
    assert xq is not None
    a_v, w_v = vllm_operands(layer, xq, out_dtype)
    assert torch.equal(_bits(seen["a"]), _bits(a_v)), "activation operand differs"
    assert torch.equal(_bits(seen["w"]), _bits(w_v)), "weight operand differs"

    # (2) a rounding of the float32 accumulation of those operands (declared numerics)
    numerics = PATH.numerics(SCHEME, problem)
    b64 = None if layer.bias is None else layer.bias.to(out_dtype).double()
    exact_ops = Numerics(out_dtype=out_dtype, output_roundings=numerics.output_roundings)
    acc = linear_gemm_interval(a_v.double(), w_v.double(), b64, exact_ops)
    yf = y.float()
    if numerics.output_roundings == 1:
        assert bool(((yf >= acc.lo) & (yf <= acc.hi)).all()), "outside the rounding interval"

    # (3) within the derived bound of the harness reference
    a, w = xq.dequantize(torch.float64), layer.weight.dequantize(torch.float64)
    reference = a @ w.t() + (torch.zeros(n).double() if b64 is None else b64)
    assert bool(((a_v.double() - a).abs() <= operand_deviation_bound(a, 3, out_dtype)).all())
    assert bool(((w_v.double() - w).abs() <= operand_deviation_bound(w, 4, out_dtype)).all())
    # the product rounds to the model dtype; with a bias, the sum rounds once more
    product = a_v.double() @ w_v.double().t()
    first = rounding_bound(product, out_dtype)
    second = 0 if b64 is None else rounding_bound(acc.center.abs() + first, out_dtype)
    bound = acc.radius + (acc.center - reference).abs() + first + second
    err = (yf.double() - reference).abs()
    assert bool((err <= bound).all()), f"worst error/bound {float((err / bound).max()):.3g}"


def test_the_loaded_layer_is_the_checkpoint() -> None:
    """What vLLM holds after loading: the packed codes and block scale bytes as given, the
    weight global inverted back from the stored divisor, the input divisor kept."""
    layer, _ = _layer("ordinary", False)
    with nvfp4_linear.vllm_config(torch.bfloat16):
        _, module = nvfp4_linear.build_layer(layer, torch.bfloat16)
    assert torch.equal(unpack_fp4(module.weight.data), layer.weight.codes)
    assert torch.equal(module.weight_scale.float(), layer.weight.scale)
    assert layer.weight.global_scale is not None
    assert layer.input_scale is not None
    stored_w = nvfp4_linear.inverted(layer.weight.global_scale)
    assert torch.equal(module.weight_global_scale.reshape(1), 1.0 / stored_w)
    assert torch.equal(
        module.input_global_scale_inv.reshape(1), nvfp4_linear.inverted(layer.input_scale)
    )


def test_a_weight_global_whose_divisor_overflows_is_refused() -> None:
    """A weight global below 2^-128 has no float32 divisor (fp32(1 / g) is Inf), so the
    layer has no compressed-tensors form: vLLM would load a zero weight. The adapter raises."""
    w, x, _ = ordinary()
    layer = quantize_linear(w * 2.0**-120, None, SCHEME, calibration=x)
    with pytest.raises(ValueError, match="divisor"), nvfp4_linear.vllm_config(torch.float32):
        nvfp4_linear.build_layer(layer, torch.float32)


def test_partial_blocks_are_refused() -> None:
    """K not a multiple of 16: vLLM's packed weight ([N, K/2]), its block scales
    ([N, K/16]) and ref_nvfp4_quant's reshape take whole blocks (an API limit)."""
    problem = LinearProblem(3, 16, 40, False, torch.bfloat16)
    support = PATH.supports(SCHEME, problem, detect())
    assert not support.ok
    assert "multiple of 16" in support.reason


def test_zero_activation_under_an_infinite_divisor() -> None:
    """An all-zero activation block under an input global below 2^-128 (stored divisor Inf):
    vLLM's block scale is Inf * 0 = NaN, and so is every output of the row; the reference
    under `two_level_inverted_global` says the same, row for row."""
    layer, x = _layer("tiny_activation_global", False)
    x = x.clone()
    x[0] = 0.0  # row 0 all zero; the other rows keep their tiny values
    y = PATH.forward(layer, x, torch.float32)
    conv = with_activation_conventions(SCHEME, PATH.conventions)
    xq = quantize_activation(x, conv, layer.input_scale)
    assert xq is not None
    reference = xq.dequantize(torch.float64) @ layer.weight.dequantize(torch.float64).t()
    assert bool(torch.isnan(y[0]).all())
    assert bool(torch.isnan(reference[0]).all())
    assert torch.equal(torch.isnan(y), torch.isnan(reference))
