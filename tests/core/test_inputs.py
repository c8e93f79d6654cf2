"""Linear-suite inputs reach the corners: ties, subnormals, the clamp bound, static scales
from another batch, partial blocks, strided activations, and block scales that all matter."""

from __future__ import annotations

import pytest
import torch

from harness.core.compare import gamma_bound, rounding_bound
from harness.core.formats import decode, get_format
from harness.core.inputs import beyond_points, tie_points
from harness.core.quantize import (
    expand_scale,
    quantize,
    quantize_linear,
    scale_grid,
    tile_amax,
    tile_shape,
)
from harness.core.schemes import MX_BLOCK, SCHEMES, QuantSpec, get_scheme
from harness.linear.cases import ACTIVATION_LAYOUTS, LINEAR_SHAPES, activation_view, linear_inputs

FP8_BLOCK = 128


def _check_tiles(x: torch.Tensor, spec: QuantSpec, what: str) -> None:
    q = quantize(x, spec)
    values = q.dequantize()
    amax = tile_amax(values, spec)
    assert bool((amax > 0).all()), f"{what}: a tile quantized to all zeros"
    if amax.numel() > 1:
        spread = (amax.max() / amax.min()).item()
        assert spread >= 2, f"{what}: tile maxima span only {spread:.3g}x"


def _quotients(x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor) -> torch.Tensor:
    """What the element codec sees: x / scale in float32, as `quantize` computes it."""
    return x.float() / expand_scale(scale.float(), spec, x.shape)


def _ties(quotient: torch.Tensor, fmt: str) -> torch.Tensor:
    """Elements exactly halfway between two neighbouring codes of ``fmt`` (below the max)."""
    codes = torch.arange(1 << get_format(fmt).bits, dtype=torch.uint8)
    values = decode(codes, fmt).double().abs()
    mags = torch.unique(values[torch.isfinite(values)])
    mids = (mags[1:] + mags[:-1]) / 2
    return torch.isin(quotient.double().abs(), mids)


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_every_tile_is_nonzero_and_tiles_differ(name: str) -> None:
    scheme = get_scheme(name)
    for shape in LINEAR_SHAPES:
        inputs = linear_inputs(name, shape)
        _check_tiles(inputs["w"], scheme.weight, f"{name} {shape} weight")
        if scheme.activation is not None:
            _check_tiles(inputs["x"], scheme.activation, f"{name} {shape} activation")


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_quantizers_see_exact_ties_at_several_binades_and_subnormals(name: str) -> None:
    """Every quantized operand of every shape holds exact ties (after its scale) in at least
    three binades, and values that land on subnormal codes."""
    scheme = get_scheme(name)
    for shape in LINEAR_SHAPES:
        inputs = linear_inputs(name, shape)
        layer = quantize_linear(inputs["w"], None, scheme, calibration=inputs["calibration"])
        # effective_scale: the scale itself, or block x per-tensor scale for two levels (NVFP4)
        operands = [("weight", inputs["w"], scheme.weight, layer.weight.effective_scale())]
        if scheme.activation is not None:
            xq = quantize(inputs["x"], scheme.activation, layer.input_scale)
            operands.append(("activation", inputs["x"], scheme.activation, xq.effective_scale()))
        for role, t, spec, scale in operands:
            q = _quotients(t, spec, scale)
            ties = _ties(q, spec.format)
            binades = set(q[ties].abs().log2().floor().tolist())
            assert len(binades) >= 3, f"{name} {shape} {role}: ties in binades {binades}"
            fmt = get_format(spec.format)
            sub = (q.abs() >= fmt.min_subnormal) & (q.abs() < fmt.min_normal)
            assert int(sub.sum()) >= 2, f"{name} {shape} {role}: no subnormal values"


@pytest.mark.parametrize(
    "name", sorted(n for n, s in SCHEMES.items() if s.activation and not s.activation.dynamic)
)
def test_static_scales_come_from_another_batch_and_fed_values_exceed_them(name: str) -> None:
    scheme = get_scheme(name)
    spec = scheme.activation
    assert spec is not None
    for shape in LINEAR_SHAPES:
        inputs = linear_inputs(name, shape)
        layer = quantize_linear(inputs["w"], None, scheme, calibration=inputs["calibration"])
        assert layer.input_scale is not None
        static = layer.input_scale.float()
        dynamic = quantize(inputs["x"], spec)
        bound_scale = static
        if spec.scale_fmt.per_tensor_level:  # two levels: the static part is the per-tensor
            # scale, and values saturate past qmax x (largest block scale x it, in float32)
            element = spec.scale_fmt.element
            assert dynamic.global_scale is not None
            assert element is not None
            dynamic_scale = float(dynamic.global_scale)
            bound_scale = static * get_format(element).max_finite
        else:
            dynamic_scale = float(dynamic.scale)
        assert float(static) != dynamic_scale, f"{name} {shape}: static equals a dynamic scale"
        q = inputs["x"].abs() / bound_scale
        assert int((q > spec.qmax).sum()) >= 2, f"{name} {shape}: nothing beyond the bound"
        # beyond the bound, but below the format max: where a 240 clamp differs from 224
        top = beyond_points(spec)[-1]
        assert bool((q == top).any()), f"{name} {shape}: {top} x scale not fed"


def test_the_fnuz_224_clamp_differs_from_240_on_the_fed_values() -> None:
    spec = get_scheme("fp8_per_tensor_fnuz_clamp224").activation
    assert spec is not None
    inputs = linear_inputs("fp8_per_tensor_fnuz_clamp224", (8, 128, 256))
    scale = quantize_linear(
        inputs["w"], None, get_scheme("fp8_per_tensor_fnuz_clamp224"), inputs["calibration"]
    ).input_scale
    assert scale is not None
    clamped = quantize(inputs["x"], spec, scale).codes
    unclamped = quantize(inputs["x"], QuantSpec("e4m3fnuz"), scale).codes
    assert int((clamped != unclamped).sum()) >= 1


def test_tie_points_are_exact_midpoints() -> None:
    for fmt in ("e4m3fn", "e4m3fnuz", "e2m1", "e2m3", "e3m2"):
        ties = torch.tensor(tie_points(fmt))
        assert bool(_ties(ties, fmt).all()), fmt
        assert bool((ties.to(torch.bfloat16).float() == ties).all()), fmt


def test_linear_shapes_keep_the_required_cases() -> None:
    ms = {m for m, _, _ in LINEAR_SHAPES}
    assert 1 in ms
    assert any(m % 16 for m in ms if m > 1)
    assert any(n % 128 == 0 and k >= 256 for _, n, k in LINEAR_SHAPES)  # block kernels run
    assert any(k % MX_BLOCK for _, _, k in LINEAR_SHAPES)  # a partial MX block
    # a partial 128-block in a dimension with several blocks, along N and along K
    assert any(n > FP8_BLOCK and n % FP8_BLOCK for _, n, _ in LINEAR_SHAPES)
    assert any(k > FP8_BLOCK and k % FP8_BLOCK for _, _, k in LINEAR_SHAPES)
    layouts = set(ACTIVATION_LAYOUTS.values())
    assert {"transposed", "strided"} <= layouts
    assert set(ACTIVATION_LAYOUTS) == set(LINEAR_SHAPES)


@pytest.mark.parametrize("layout", ["transposed", "strided", "contiguous"])
def test_activation_views_keep_values(layout: str) -> None:
    x = linear_inputs("fp8_per_channel", (37, 16, 128))["x"]
    view = activation_view(x, layout)
    assert torch.equal(view, x)
    assert view.is_contiguous() == (layout == "contiguous")


@pytest.mark.parametrize(
    "name", sorted(n for n, s in SCHEMES.items() if s.weight.block[1] is not None)
)
def test_every_weight_block_along_k_matters_to_the_output(name: str) -> None:
    """Doubling the scale of any one weight block along K moves some output by more than ten
    times the suite's float32-output bound: a block-index or one-block scale error cannot
    hide. Shapes where a weight block meets more than 32 products: at M=1 a 32-element MX
    block meets one activation row and can cancel to almost nothing (FP8 128-blocks pass
    there too). A static activation's row 0 holds its planted corners, values up to past the
    calibrated bound that can dominate that row's sum, so it is not counted: NVFP4 W4A4 at
    M=3 has two rows x 16 elements, as few products as the MX case at M=1."""
    scheme = get_scheme(name)
    static = scheme.activation is not None and not scheme.activation.dynamic
    bc = scheme.weight.block[1]
    assert bc is not None
    for shape in LINEAR_SHAPES:
        if (shape[0] - static) * bc <= MX_BLOCK:
            continue
        k = shape[2]
        inputs = linear_inputs(name, shape)
        layer = quantize_linear(inputs["w"], None, scheme, calibration=inputs["calibration"])
        a = inputs["x"].double()
        if scheme.activation is not None:
            a = quantize(inputs["x"], scheme.activation, layer.input_scale).dequantize(
                torch.float64
            )
        w = layer.weight
        wd = w.dequantize(torch.float64)
        y = a @ wd.t()
        # the suite's bound for fp32 output (suites/test_linear.py): accumulation + roundings
        bound = gamma_bound(a.abs() @ wd.abs().t(), k + 3) + rounding_bound(
            y, torch.float32, roundings=2
        )
        # Doubling block (r, c)'s scale adds its contribution once more to the outputs of
        # its rows: the contribution of column block c, a[:, c] @ w[rows of r, c]^T.
        br, bc = tile_shape(w.spec, w.codes.shape)
        rows, cols = scale_grid(w.spec, w.codes.shape)
        for c in range(cols):
            ks = slice(c * bc, (c + 1) * bc)
            ratio = (a[:, ks] @ wd[:, ks].t()).abs() / bound  # [M, N]
            per_row_block = ratio.amax(dim=0).split(br)
            for r in range(rows):
                worst = float(per_row_block[r].max())
                assert worst > 10, (
                    f"{name} {shape}: weight block ({r}, {c}) moves outputs {worst:.3g}x the bound"
                )


@pytest.mark.parametrize(
    "name", sorted(n for n, s in SCHEMES.items() if s.weight.scale_fmt.per_tensor_level)
)
def test_two_level_block_scales_stay_in_the_block_formats_normal_range(name: str) -> None:
    """`row_decades` spreads the rows only as far as the block level holds: every block
    scale of the linear inputs is a normal value of its format (none subnormal or zero)."""
    scheme = get_scheme(name)
    for shape in LINEAR_SHAPES:
        inputs = linear_inputs(name, shape)
        layer = quantize_linear(inputs["w"], None, scheme, calibration=inputs["calibration"])
        operands = [("weight", layer.weight)]
        if scheme.activation is not None:
            operands.append(
                ("activation", quantize(inputs["x"], scheme.activation, layer.input_scale))
            )
        for role, q in operands:
            element = q.spec.scale_fmt.element
            assert element is not None
            fmt = get_format(element)
            smallest = float(q.scale.min())
            assert smallest >= fmt.min_normal, f"{name} {shape} {role}: block scale {smallest}"
            assert float(q.scale.max()) <= fmt.max_finite
