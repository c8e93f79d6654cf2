"""QuantizedLinear.weight_block_size: the [block_n, block_k] engines' FP8 configs hand their
block kernels, read from the layer's own specs (square or not), refused for other layers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from harness.core.quantize import QuantizedLinear, quantize_linear
from harness.core.schemes import Scheme, get_scheme
from harness.linear.designs import blocks_variant


def _layer(scheme_name: str, variant: Callable[[Scheme], Scheme] | None = None) -> QuantizedLinear:
    n, k = 256, 384
    scheme = get_scheme(scheme_name)
    if variant is not None:
        scheme = variant(scheme)
    w = torch.linspace(-1, 1, n * k).reshape(n, k)
    return quantize_linear(w, torch.zeros(n) + 0.5, scheme)


@pytest.mark.parametrize(("block_n", "block_k"), [(128, 128), (128, 64), (64, 128)])
def test_block_layers_give_their_blocks_in_engine_order(block_n: int, block_k: int) -> None:
    variant = None if (block_n, block_k) == (128, 128) else blocks_variant(block_n, block_k)
    layer = _layer("fp8_per_block", variant=variant)
    assert layer.weight_block_size() == [block_n, block_k]


@pytest.mark.parametrize("scheme_name", ["fp8_per_channel", "w_mxfp4"])
def test_other_layers_are_refused(scheme_name: str) -> None:
    with pytest.raises(ValueError, match="not a block-FP8 layer"):
        _layer(scheme_name).weight_block_size()
