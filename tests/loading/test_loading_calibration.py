"""Loading checkpoints are as unkind as real ones: calibrated scales with margins, static
input scales from another batch that the fed activation exceeds, so a loader taking a
shortcut (one whole-tensor scale instead of the largest stored shard scale) is caught."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from harness.core.quantize import calibrate_input_scale, quantize, tile_amax
from harness.core.scales import compute_scale
from harness.core.schemes import WHOLE, get_scheme
from harness.loading.cases import (
    CASES,
    FLAVOURS,
    build_case_checkpoint,
    fp8_schemes,
    merged_input_scale,
)
from harness.loading.invariants import check_loader
from harness.loading.loaders import FP8_LOADER, get_loader
from harness.loading.transforms import LoadState, loaded_slots, requantize_with_max_scale

STATIC = [s for s in fp8_schemes() if not get_scheme(s).activation.dynamic]  # type: ignore[union-attr]
PER_TENSOR = [s for s in fp8_schemes() if get_scheme(s).weight.block == (WHOLE, WHOLE)]


# Power-of-two scale formats (E8M0) store their rule's scales: a headroom factor would take
# them off the format's grid (harness/loading/checkpoint.py).
HEADROOM = [s for s in fp8_schemes() if not get_scheme(s).weight.scale_fmt.power_of_two]


@pytest.mark.parametrize("scheme", HEADROOM)
def test_no_stored_weight_scale_is_amax_over_qmax(scheme: str) -> None:
    spec = get_scheme(scheme).weight
    for case in CASES:
        ckpt, _ = build_case_checkpoint(scheme, case.name)
        for i, shard in enumerate(ckpt.shards):
            if shard.weight_scale is None:
                continue
            values = ckpt.dequantize_shard(i)
            plain = compute_scale(tile_amax(values, spec), spec).reshape(shard.weight_scale.shape)
            assert not bool((shard.weight_scale == plain).any()), f"{case.name} shard {i}"


@pytest.mark.parametrize("scheme", STATIC)
def test_fed_activation_exceeds_the_static_scale_from_another_batch(scheme: str) -> None:
    act = get_scheme(scheme).activation
    assert act is not None
    for case in CASES:
        ckpt, x = build_case_checkpoint(scheme, case.name)
        merged = merged_input_scale(ckpt)
        assert merged is not None
        assert float(x.abs().max()) > act.qmax * float(merged), case.name
        assert not torch.equal(merged.reshape(()), calibrate_input_scale(x, act).reshape(()))


def _requantize_to_whole_tensor_amax(state: LoadState) -> LoadState:
    """A shortcut loaders take: one scale from the amax of all dequantized shards, instead
    of the largest stored shard scale. Identical when scales are exactly amax / qmax."""
    spec = state.scheme.weight
    if spec.block != (WHOLE, WHOLE):
        return state
    fixed = requantize_with_max_scale(state)  # for the flagged slots and the layout
    slots = state.weight_scale.reshape(-1)
    values = []
    starts = state.offsets
    for i in range(len(state.widths)):
        codes = state.codes[starts[i] : starts[i + 1]]
        if not bool(loaded_slots(slots[i : i + 1]).all()) or codes.shape[0] == 0:
            continue
        values.append(quantize.__globals__["decode"](codes, spec.format) * slots[i])
    whole = torch.cat(values)
    scale = compute_scale(tile_amax(whole, spec), spec)
    codes = []
    for i in range(len(state.widths)):
        part = state.codes[starts[i] : starts[i + 1]]
        if i in fixed.unloaded or part.shape[0] == 0:
            codes.append(fixed.codes[starts[i] : starts[i + 1]])
            continue
        v = quantize.__globals__["decode"](part, spec.format) * slots[i]
        codes.append(quantize(v, spec, scale).codes)
    return replace(fixed, codes=torch.cat(codes), weight_scale=scale.reshape(1))


def test_whole_tensor_requantization_is_caught() -> None:
    transforms = tuple(
        _requantize_to_whole_tensor_amax if t is requantize_with_max_scale else t
        for t in FP8_LOADER.transforms
    )
    shortcut = FP8_LOADER.with_transforms(transforms, "whole_tensor_requantize")
    found = [
        problem
        for scheme in PER_TENSOR
        for flavour in FLAVOURS
        if get_loader("fp8").supports(get_scheme(scheme), flavour).ok
        for problem in check_loader(
            shortcut, build_case_checkpoint(scheme, "fused_spread_scales")[0], flavour, FP8_LOADER
        )
    ]
    assert any("weight scale" in p for p in found), found
