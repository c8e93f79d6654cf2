"""Linear-suite inputs stress the scales: tiles differ by orders of magnitude, none is zero."""

from __future__ import annotations

import pytest
import torch

from harness.core.quantize import quantize, tile_amax
from harness.core.schemes import SCHEMES, QuantSpec, get_scheme
from harness.linear.cases import LINEAR_SHAPES, linear_inputs


def _check_tiles(x: torch.Tensor, spec: QuantSpec, what: str) -> None:
    q = quantize(x, spec)
    values = q.dequantize()
    amax = tile_amax(values, spec)
    assert bool((amax > 0).all()), f"{what}: a tile quantized to all zeros"
    if amax.numel() > 1:
        spread = (amax.max() / amax.min()).item()
        assert spread >= 100, f"{what}: tile maxima span only {spread:.3g}x"


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_every_tile_is_nonzero_and_tiles_differ(name: str) -> None:
    scheme = get_scheme(name)
    for shape in LINEAR_SHAPES:
        inputs = linear_inputs(name, shape)
        _check_tiles(inputs["w"], scheme.weight, f"{name} {shape} weight")
        if scheme.activation is not None:
            _check_tiles(inputs["x"], scheme.activation, f"{name} {shape} activation")


def test_linear_shapes_keep_the_required_cases() -> None:
    ms = {m for m, _, _ in LINEAR_SHAPES}
    assert 1 in ms
    assert any(m % 16 for m in ms if m > 1)
    assert all(k % 128 == 0 for _, _, k in LINEAR_SHAPES)
    assert any(n % 128 == 0 and k >= 256 for _, n, k in LINEAR_SHAPES)  # block kernels run
