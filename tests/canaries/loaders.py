"""Loader canaries (``qharness.loaders``): the built-in ``fp8`` loader with one step changed.

Control: `CONTROL_LOADER`, the ``fp8`` pipeline under another name.
"""

from __future__ import annotations

import dataclasses

import torch

from harness.core.formats import decode
from harness.core.quantize import quantize
from harness.core.schemes import WHOLE
from harness.loading.checkpoint import LinearCheckpoint
from harness.loading.loaders import FP8_LOADER, Loader, fuse_shards
from harness.loading.transforms import (
    E4M3FN_PER_E4M3FNUZ,
    LoadError,
    LoadState,
    Transform,
    _positive_zeros,
    _reinterpret,
    loaded_slots,
    normalize_to_platform_fp8,
    requantize_with_max_scale,
)


def _replace_step(name: str, old: Transform, new: Transform, description: str) -> Loader:
    steps = tuple(new if t is old else t for t in FP8_LOADER.transforms)
    assert steps != FP8_LOADER.transforms, f"{old.__name__} not in the fp8 loader"
    return Loader(name, steps, description)


CONTROL_LOADER = dataclasses.replace(FP8_LOADER, name="control_loader")


# -------------------------------------------------- step order on fnuz (seed bug)
def requantize_in_checkpoint_format(state: LoadState) -> LoadState:
    """`requantize_with_max_scale` written for the order "requantize, then normalize": it
    reads the codes as e4m3fn (the checkpoint's flavour) even after normalization ran.
    Otherwise a verbatim copy of the built-in step."""
    spec = state.scheme.weight
    if spec.block != (WHOLE, WHOLE):
        return state
    slots = state.weight_scale.reshape(-1)
    if slots.numel() != len(state.widths):
        raise LoadError("requantize_in_checkpoint_format: one scale slot per shard expected")
    loaded = loaded_slots(slots)
    flagged = tuple(i for i in range(len(state.widths)) if not bool(loaded[i]))
    if not bool(loaded.any()):
        raise LoadError("requantize_in_checkpoint_format: no shard's weight scale was loaded")
    max_scale = slots[loaded].max()
    grid = max_scale.reshape(1, 1)
    starts = state.offsets
    parts = []
    for i, width in enumerate(state.widths):
        codes = state.codes[starts[i] : starts[i + 1]]
        if i in flagged:
            parts.append(torch.zeros_like(codes))
        elif width == 0 or bool(slots[i] == max_scale):
            parts.append(_positive_zeros(codes, spec.format))
        else:
            values = decode(codes, "e4m3fn") * slots[i]  # the one change: a fixed flavour
            parts.append(_positive_zeros(quantize(values, spec, grid).codes, spec.format))
    return dataclasses.replace(
        state,
        codes=torch.cat(parts, dim=0),
        weight_scale=max_scale.reshape(1),
        unloaded=tuple(sorted(set(state.unloaded) | set(flagged))),
    )


STEP_ORDER = _replace_step(
    "canary_loader_step_order",
    requantize_with_max_scale,
    requantize_in_checkpoint_format,
    "seed bug: requantization after fnuz normalization reads codes as e4m3fn",
)


# ---------------------------------------------- fused-shard requantization
def requantize_to_whole_tensor_scale(state: LoadState) -> LoadState:
    """Fused per-tensor shards requantized with one scale taken from the whole fused
    weight's amax (amax / qmax) instead of the largest shard scale."""
    out = requantize_with_max_scale(state)
    spec = out.scheme.weight
    if spec.block != (WHOLE, WHOLE) or len(state.widths) == 1:
        return out
    values = decode(out.codes, spec.format) * out.weight_scale.reshape(())
    kept = [i for i in range(len(state.widths)) if i not in out.unloaded]
    starts = state.offsets
    live = torch.cat([values[starts[i] : starts[i + 1]] for i in kept])
    scale = quantize(live, spec).scale  # the one change: scale from the data
    codes = quantize(values, spec, scale.reshape(1, 1)).codes
    return dataclasses.replace(
        out, codes=_positive_zeros(codes, spec.format), weight_scale=scale.reshape(1)
    )


FUSED_REQUANT = _replace_step(
    "canary_loader_fused_requant",
    requantize_with_max_scale,
    requantize_to_whole_tensor_scale,
    "fused shards requantized to a whole-tensor amax scale",
)


# ---------------------------------------------- fused shards keep their own scales
def keep_shard_scales(state: LoadState) -> LoadState:
    """Fused per-tensor shards kept as each was quantized, with its own scale: no
    requantization to the largest, and the layer's one scale slot takes the first loaded
    shard's scale, so every other shard is read with a scale that is not its own."""
    out = requantize_with_max_scale(state)  # for `unloaded`, and every other granularity
    spec = state.scheme.weight
    if spec.block != (WHOLE, WHOLE) or len(state.widths) == 1:
        return out
    slots = state.weight_scale.reshape(-1)
    first = next(i for i in range(len(state.widths)) if i not in out.unloaded)
    codes = _positive_zeros(state.codes, spec.format)  # the one change: codes kept as stored
    return dataclasses.replace(out, codes=codes, weight_scale=slots[first].reshape(1))


SHARD_SCALES = _replace_step(
    "canary_loader_shard_scales",
    requantize_with_max_scale,
    keep_shard_scales,
    "fused per-tensor shards keep each shard's own scale",
)


# ------------------------------------------------------- fnuz normalization
def normalize_without_input_scale(state: LoadState) -> LoadState:
    """fn -> fnuz normalization that doubles the weight scales but not the input scale."""
    out = normalize_to_platform_fp8(state)
    if out.scheme.weight.format == state.scheme.weight.format or state.input_scale is None:
        return out
    return dataclasses.replace(out, input_scale=state.input_scale)  # the one change


FNUZ_SCALE = _replace_step(
    "canary_loader_fnuz_scale",
    normalize_to_platform_fp8,
    normalize_without_input_scale,
    "fnuz normalization forgets to double the static input scale",
)


def normalize_keeping_0x80(state: LoadState) -> LoadState:
    """fn -> fnuz normalization that keeps code 0x80 (-0 in e4m3fn, NaN in e4m3fnuz)."""
    if (state.scheme.weight.format, state.target_format) != ("e4m3fn", "e4m3fnuz"):
        return normalize_to_platform_fp8(state)
    return _reinterpret(state, state.codes, "e4m3fnuz", 1 / E4M3FN_PER_E4M3FNUZ)


FNUZ_0X80 = _replace_step(
    "canary_loader_0x80",
    normalize_to_platform_fp8,
    normalize_keeping_0x80,
    "fnuz normalization keeps the 0x80 code",
)

__all__ = [
    "CONTROL_LOADER",
    "FNUZ_0X80",
    "FNUZ_SCALE",
    "FUSED_REQUANT",
    "SHARD_SCALES",
    "STEP_ORDER",
]


# ------------------------------------------------ a neighbour's block or channel scales
def fuse_with_scale_rows_reversed(ckpt: LinearCheckpoint, target_format: str) -> LoadState:
    """`fuse_shards` with the shards' scale rows (per-channel rows, block-scale rows) laid
    out in reverse shard order, as a loader that maps scale shard ids the other way round
    does: each shard's codes are its own, its scales another shard's. Per-tensor slots are
    left as they are (the shard-scale canaries cover those)."""
    state = fuse_shards(ckpt, target_format)
    spec = ckpt.scheme.weight
    if spec.block == (WHOLE, WHOLE) or len(ckpt.shards) == 1:
        return state
    rows_per = [
        s.width if spec.block[0] == 1 else max(s.width, 1) // spec.block[0] for s in ckpt.shards
    ]
    scale = state.weight_scale
    chunks, start = [], 0
    for n in rows_per:
        chunks.append(scale[start : start + n])
        start += n
    reversed_rows = torch.cat(chunks[::-1], dim=0)  # the one change: shard order of scales
    return dataclasses.replace(state, weight_scale=reversed_rows)


NEIGHBOUR_SCALES = dataclasses.replace(
    FP8_LOADER,
    name="canary_loader_neighbour_scales",
    description="fused shards' per-channel or block scale rows in reverse shard order",
    fuse=fuse_with_scale_rows_reversed,
)
