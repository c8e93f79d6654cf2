"""The long-hidden MoE design does what it is for (harness/moe/designs.py)."""

from __future__ import annotations

import pytest
import torch

from harness.core.quantize import tile_amax
from harness.core.scales import compute_scale
from harness.core.schemes import get_scheme
from harness.moe.designs import (
    LONG_K_SCHEMES,
    LONG_TAIL,
    crosses_bf16_binade,
    long_hidden,
    long_k_case,
    long_k_cases,
)
from harness.moe.paths import moe_paths


@pytest.mark.parametrize("scheme", LONG_K_SCHEMES)
def test_long_hidden_rows_peak_in_their_tail(scheme: str) -> None:
    """H >= 4096 and no multiple of 256; every token's amax lies in its last columns, at
    least twice the amax of any prefix that stops before them."""
    x = long_k_case(scheme).x
    h = long_hidden(get_scheme(scheme))
    assert x.shape[1] == h
    assert h >= 4096
    assert h % 256 != 0
    head = x[:, : h - LONG_TAIL].abs().amax(dim=1)
    assert bool((x[:, h - LONG_TAIL :].abs().amax(dim=1) >= 2 * head).all())


@pytest.mark.parametrize(
    "scheme", [s for s in LONG_K_SCHEMES if crosses_bf16_binade(get_scheme(s).activation)]
)
def test_mx_block_scales_differ_on_a_bf16_copy(scheme: str) -> None:
    """For MX activations most block scales change when x is rounded to bf16 first."""
    spec = get_scheme(scheme).activation
    assert spec is not None
    x = long_k_case(scheme).x
    exact = compute_scale(tile_amax(x, spec), spec)
    from_bf16 = compute_scale(tile_amax(x.to(torch.bfloat16).float(), spec), spec)
    assert int((exact != from_bf16).sum()) * 2 >= exact.numel()


def test_every_scheme_class_and_path_is_run() -> None:
    """Per-token dynamic, 128-wide tiles, MX activations, static and weight-only schemes,
    each on every registered MoE path."""
    cases = list(long_k_cases())
    assert {c.path for c in cases} == set(moe_paths())
    specs = [get_scheme(s).activation for s in LONG_K_SCHEMES]
    assert any(a is not None and a.dynamic and a.block == (1, None) for a in specs)
    assert any(a is not None and not a.dynamic for a in specs)
    assert any(a is None for a in specs)
    assert any(crosses_bf16_binade(a) for a in specs)
    assert {long_hidden(get_scheme(s)) for s in LONG_K_SCHEMES} == {4160, 4224}
