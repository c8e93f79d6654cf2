"""The designed inputs do what they are for (harness/core/hard_inputs.py): each shows its
fault through the reference quantizer itself, independently of any canary."""

from __future__ import annotations

import pytest
import torch

from harness.core.conventions import with_conventions
from harness.core.hard_inputs import (
    binade_crossing,
    calibration_amax,
    near_ties,
    plant_reciprocal_ties,
    reciprocal_tie_scale,
    subnormal_block_scales,
    tail_amax,
)
from harness.core.inputs import scaled_normal
from harness.core.quantize import calibrate_input_scale, quantize, tile_amax
from harness.core.schemes import get_scheme


def _bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).float()


@pytest.mark.parametrize("scheme", ["w_mxfp4_a_mxfp4", "w_mxfp8_a_mxfp8", "w_mxfp4_a_mxfp4@rceil"])
def test_binade_crossing_moves_every_e8m0_scale_one_binade_in_bf16(scheme: str) -> None:
    spec = get_scheme(scheme).activation
    assert spec is not None
    x = binade_crossing(scaled_normal(f"hard/{scheme}", 4, 128, spec), spec)
    right = quantize(x, spec).scale
    from_copy = quantize(_bf16(x), spec).scale
    ratio = (from_copy / right).reshape(-1)
    assert bool(((ratio == 2) | (ratio == 0.5)).all()), ratio


@pytest.mark.parametrize("fmt_scheme", ["fp8_per_tensor", "fp8_per_tensor_fnuz_clamp224"])
def test_reciprocal_ties_split_division_from_reciprocal_multiply(fmt_scheme: str) -> None:
    spec = get_scheme(fmt_scheme).activation
    assert spec is not None
    rt = reciprocal_tie_scale(spec.format)
    assert rt.scale != 2.0 ** round(torch.tensor(rt.scale).log2().item())
    scale = rt.scale * 2.0**-3
    x = scaled_normal("hard/ties", 4, 64, spec) * 2.0**-8
    x, planted = plant_reciprocal_ties(x, spec, scale)
    assert planted >= 6
    assert torch.equal(_bf16(x), x)  # bf16 values: model-dtype engines see them too
    grid = torch.tensor([[scale]], dtype=torch.float32)
    divided = quantize(x, spec, grid).codes
    multiplied = quantize(x, with_conventions(spec, {"reciprocal_scale"}), grid).codes
    per_row = planted // 2
    assert bool((divided[:2, :per_row] != multiplied[:2, :per_row]).all())
    cal = x.clone()
    cal[-1, -1] = calibration_amax(scale, spec)
    assert float(calibrate_input_scale(cal, spec)) == scale


@pytest.mark.parametrize("scheme", ["fp8_per_channel", "w_mxfp4", "w_nvfp4", "fp8_per_block"])
def test_near_ties_are_float32_values_a_bf16_copy_moves(scheme: str) -> None:
    spec = get_scheme(scheme).weight
    x = scaled_normal(f"hard/near/{scheme}", 8, 256, spec)
    moved = near_ties(x, spec)
    changed = moved != x
    assert int(changed.sum()) > 100
    assert bool((_bf16(moved[changed]) != moved[changed]).all())
    assert torch.equal(quantize(moved, spec).scale, quantize(x, spec).scale)
    differ = quantize(_bf16(moved), spec).codes != quantize(moved, spec).codes
    assert int(differ.sum()) > 10


def test_tail_amax_puts_each_row_peak_past_any_prefix() -> None:
    x = scaled_normal("hard/tail", 4, 4160, None)
    y = tail_amax(x, 64)
    assert bool((y.abs().argmax(dim=1) >= 4160 - 64).all())
    assert bool((y.abs()[:, :1024].amax(dim=1) * 2 <= y.abs().amax(dim=1)).all())
    assert torch.equal(_bf16(y), y)
    spec = get_scheme("fp8_per_channel").activation
    assert spec is not None
    assert bool((tile_amax(y, spec) > tile_amax(y[:, :4096], spec)).all())


def test_subnormal_block_scales_show_a_floor_at_e4m3s_smallest_normal() -> None:
    """Half the NVFP4 blocks get E4M3 subnormal scales (every code 1..7) under an unchanged
    global scale; bounding block scales at 2^-6 (the `e4m3_block_scale_min_normal` rule)
    changes those blocks' scales and codes, bounding them at 2^-9 changes nothing."""
    spec = get_scheme("w_nvfp4").weight
    x = scaled_normal("hard/subnormal_blocks", 8, 256, spec)
    y = subnormal_block_scales(x, spec)
    q = quantize(y, spec)
    assert torch.equal(q.global_scale, quantize(x, spec).global_scale)
    sub = (q.scale > 0) & (q.scale < 2.0**-6)
    assert {round(v * 2**9) for v in q.scale[sub].tolist()} == set(range(1, 8))
    assert int(sub.sum()) >= 50  # of 128 blocks: 64 rewritten, 7.75 steps round to 2^-6
    floored = quantize(y, with_conventions(spec, ["e4m3_block_scale_min_normal"]))
    assert bool((floored.scale[sub] == 2.0**-6).all())
    assert torch.equal(floored.scale[~sub], q.scale[~sub])
    rows = sub.repeat_interleave(16, dim=1)
    assert int((floored.codes[rows] != q.codes[rows]).sum()) > 100
    assert torch.equal(floored.codes[~rows], q.codes[~rows])
    with pytest.raises(ValueError, match="no subnormals"):
        subnormal_block_scales(x, get_scheme("w_mxfp4").weight)
