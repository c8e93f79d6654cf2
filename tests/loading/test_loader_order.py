"""Step order self-test: faulty pipelines built on purpose must be reported.

1. Every pair of steps of every registered loader is swapped. A pair that
   harness.loading.loaders.COMMUTING_STEPS declares order-free must still pass every invariant and
   match the original loader bit for bit; any other swap must make the invariant check
   report a violation on some case and flavour.
2. The historical bug: steps written as engines wrote them (requantization that encodes
   into the *platform* format, normalization that converts whatever it is given) depend on
   their order. The engine-style pipeline in `fp8` order passes; swapped into `quark` order,
   the invariant check reports wrong weights on e4m3fnuz platforms.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from harness.core.formats import decode
from harness.core.quantize import quantize
from harness.core.schemes import SCHEMES, WHOLE
from harness.loading.cases import CASES, FLAVOURS, build_case_checkpoint, fp8_schemes
from harness.loading.invariants import check_loader
from harness.loading.loaders import COMMUTING_STEPS, Loader, loaders
from harness.loading.transforms import (
    NEGATIVE_ZERO_CODE,
    LoadState,
    Transform,
    contiguous_kernel_layout,
    loaded_slots,
    merge_input_scales,
    scales_to_tile_grid,
)


def _violations(
    loader: Loader, reference: Loader, checkpoint_formats: tuple[str, ...] = FLAVOURS
) -> list[str]:
    """Invariant violations over every FP8 scheme whose checkpoint is in these formats."""
    found = []
    for scheme in fp8_schemes():
        if SCHEMES[scheme].weight.format not in checkpoint_formats:
            continue
        for case in CASES:
            ckpt, _ = build_case_checkpoint(scheme, case.name)
            for flavour in FLAVOURS:
                if not reference.supports(ckpt.scheme, flavour).ok:
                    continue
                found += [
                    f"{scheme}/{case.name}/{flavour}: {p}"
                    for p in check_loader(loader, ckpt, flavour, reference)
                ]
    return found


def _swapped(loader: Loader, i: int, j: int) -> Loader:
    steps = list(loader.transforms)
    steps[i], steps[j] = steps[j], steps[i]
    return loader.with_transforms(tuple(steps), f"{loader.name}-swap-{i}-{j}")


SWAPS = [
    (name, i, j)
    for name, loader in loaders().items()
    for i in range(len(loader.transforms))
    for j in range(i + 1, len(loader.transforms))
]


def _reordered_pairs(steps: tuple[str, ...], i: int, j: int) -> set[frozenset[str]]:
    """Pairs whose relative order changes when positions i < j are swapped."""
    middle = steps[i + 1 : j]
    return {
        frozenset({steps[i], steps[j]}),
        *(frozenset({steps[i], m}) for m in middle),
        *(frozenset({m, steps[j]}) for m in middle),
    }


@pytest.mark.parametrize(("loader", "i", "j"), SWAPS, ids=lambda v: str(v))
def test_swapped_steps_commute_or_are_reported(loader: str, i: int, j: int) -> None:
    original = loaders()[loader]
    faulty = _swapped(original, i, j)
    reordered = _reordered_pairs(original.steps, i, j)
    order_sensitive = sorted(sorted(p) for p in reordered - set(COMMUTING_STEPS))
    problems = _violations(faulty, original)
    if not order_sensitive:
        assert not problems, f"{faulty.steps} reorders only commuting steps, but: {problems[:3]}"
    else:
        assert problems, f"{faulty.steps} reorders {order_sensitive}, and went unreported"


def test_some_swap_in_every_loader_is_order_sensitive() -> None:
    """Guard against a vacuous self-test: each loader has a pair whose swap is reported."""
    for name, loader in loaders().items():
        steps = loader.steps
        pairs = {frozenset({a, b}) for a in steps for b in steps if a != b}
        assert pairs - set(COMMUTING_STEPS), f"{name}: every pair of steps commutes"


# ------------------------------------------------- engine-style steps, faulty on purpose
ENGINE_CLAMP = {"e4m3fnuz": 224.0}  # engines clamp e4m3fnuz quantization at 224


def engine_normalize(state: LoadState) -> LoadState:
    """As engines wrote it: on an e4m3fnuz platform, zero 0x80 and double the scales,
    whatever format the codes are already in."""
    if state.target_format != "e4m3fnuz":
        return state
    codes = torch.where(state.codes == NEGATIVE_ZERO_CODE, 0, state.codes).to(torch.uint8)
    spec = replace(state.scheme.weight, format="e4m3fnuz", clamp_max=ENGINE_CLAMP["e4m3fnuz"])
    act = state.scheme.activation
    scheme = replace(
        state.scheme,
        weight=spec,
        activation=None
        if act is None
        else replace(act, format="e4m3fnuz", clamp_max=ENGINE_CLAMP["e4m3fnuz"]),
    )
    doubled = torch.where(loaded_slots(state.weight_scale), state.weight_scale * 2, -1.0)
    inputs = state.input_scale
    return replace(
        state,
        scheme=scheme,
        codes=codes,
        weight_scale=doubled,
        input_scale=None if inputs is None else torch.where(loaded_slots(inputs), inputs * 2, -1),
    )


def engine_requantize(state: LoadState) -> LoadState:
    """As engines wrote it: requantize every shard to the max scale, encoding into the
    platform's FP8 format (the quant op writes the platform dtype)."""
    spec = state.scheme.weight
    if spec.block != (WHOLE, WHOLE):
        return state
    slots = state.weight_scale.reshape(-1)
    top = slots[loaded_slots(slots)].max()
    target = replace(
        spec, format=state.target_format, clamp_max=ENGINE_CLAMP.get(state.target_format)
    )
    parts = []
    starts = state.offsets
    for i, width in enumerate(state.widths):
        codes = state.codes[starts[i] : starts[i + 1]]
        if width == 0:
            parts.append(codes)
            continue
        values = decode(codes, spec.format) * slots[i]
        new = quantize(values, target, top.reshape(1, 1)).codes
        # Zeros as +0, as harness's requantization stores them, so only the order differs.
        parts.append(torch.where(new == NEGATIVE_ZERO_CODE, 0, new).to(torch.uint8))
    return replace(
        state,
        scheme=replace(state.scheme, weight=target),
        codes=torch.cat(parts),
        weight_scale=top.reshape(1),
    )


TAIL: tuple[Transform, ...] = (merge_input_scales, scales_to_tile_grid, contiguous_kernel_layout)


def test_engine_style_steps_are_order_sensitive_and_the_swap_is_reported() -> None:
    reference = loaders()["fp8"]
    fp8_order = Loader("engine-fp8-order", (engine_normalize, engine_requantize, *TAIL), "")
    quark_order = Loader("engine-quark-order", (engine_requantize, engine_normalize, *TAIL), "")
    # Engines wrote these steps for e4m3fn checkpoints (the common case the bug hit).
    fn_only = ("e4m3fn",)
    assert not _violations(fp8_order, reference, fn_only), "engine steps in fp8 order are correct"
    problems = _violations(quark_order, reference, fn_only)
    assert problems, "the swapped (quark) order of engine-style steps went unreported"
    assert all("/e4m3fnuz:" in p for p in problems), "only fnuz platforms are affected"
    assert any("more than one e4m3fnuz ULP" in p or "differ" in p for p in problems)
