"""On-disk layouts: a fused layer stored fused on disk, and scales in their stored dtype.

A layer fused on disk is one stored shard listing its logical shards; it round-trips through
a file, loads with the built-in loaders to the same values, and a weight loader that fills
only the first of its engine's per-shard scale slots is refused, not loaded. E8M0 scale
formats store their scales as float8_e8m0fnu bytes, exactly the float32 values.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from harness.core.compare import bit_mismatches
from harness.core.schemes import FP8_PER_BLOCK_UE8M0
from harness.loading.cases import (
    FUSED_ON_DISK,
    build_case_checkpoint,
    checkpoint_in_layout,
    fused_on_disk,
    loading_params,
)
from harness.loading.checkpoint import (
    LAYOUT_KEY,
    CheckpointError,
    LinearCheckpoint,
    read_checkpoint,
    save_checkpoint,
    scale_values,
    validate_checkpoint,
)
from harness.loading.invariants import shard_violations, shared_scale_violations
from harness.loading.loaders import FP8_LOADER, fuse_shards
from harness.loading.transforms import SCALE_SLOT_SENTINEL, LoadError, LoadState


@pytest.mark.parametrize("scheme", ["fp8_per_tensor", "fp8_per_channel", "fp8_per_block"])
def test_fused_on_disk_is_one_shard_holding_the_same_values(scheme: str) -> None:
    """One stored shard of every row, logical shards listed; its values are the correctly
    loaded per-shard layer's (per-tensor: requantized to the largest scale)."""
    per_shard, _ = build_case_checkpoint(scheme, "fused_spread_scales")
    fused = fused_on_disk(per_shard)
    validate_checkpoint(fused)
    assert len(fused.shards) == 1
    assert fused.shards[0].name == "qkv_proj"
    assert fused.logical_widths == per_shard.widths
    assert fused.logical_shards == tuple((s.name, s.width) for s in per_shard.shards)
    expected = FP8_LOADER.load(per_shard, "e4m3fn").layer.weight.dequantize()
    assert torch.equal(fused.dequantize_shard(0), expected)
    loaded = FP8_LOADER.load(fused, "e4m3fnuz")
    assert shard_violations(fused, loaded) == []
    assert shared_scale_violations(fused, loaded) == []


def test_fused_on_disk_round_trips_through_a_file(tmp_path: Path) -> None:
    per_shard, _ = build_case_checkpoint("fp8_per_tensor", "fused_spread_scales")
    fused = checkpoint_in_layout(per_shard, FUSED_ON_DISK)
    path = tmp_path / "qkv.safetensors"
    save_checkpoint(fused, path)
    back = read_checkpoint(path)
    assert back.logical == fused.logical
    names = ("input_scale", "weight", "weight_scale")
    assert sorted(back.tensors()) == [f"model.layers.0.proj.qkv_proj.{n}" for n in names]


def test_logical_shards_must_add_up_to_the_stored_shard() -> None:
    fused = fused_on_disk(build_case_checkpoint("fp8_per_tensor", "fused_spread_scales")[0])
    wrong = replace(fused, logical=(("q_proj", 1), ("k_proj", 1)))
    with pytest.raises(CheckpointError, match="logical shards"):
        validate_checkpoint(wrong)


def test_a_logical_layout_with_a_bad_width_is_refused(tmp_path: Path) -> None:
    fused = fused_on_disk(build_case_checkpoint("fp8_per_tensor", "fused_spread_scales")[0])
    path = tmp_path / "qkv.safetensors"
    save_checkpoint(fused, path)
    with safe_open(str(path), framework="pt") as fh:
        metadata = dict(fh.metadata())
    layout = json.loads(metadata[LAYOUT_KEY])
    layout["logical"][1][1] = 1.5
    metadata[LAYOUT_KEY] = json.dumps(layout)
    save_file(load_file(str(path)), str(path), metadata=metadata)
    with pytest.raises(CheckpointError, match=r"\['logical'\]\[1\] width"):
        read_checkpoint(path)


def _first_slot_only(ckpt: LinearCheckpoint, target_format: str) -> LoadState:
    """A weight loader that writes a fused-on-disk layer's one scale into the first of the
    engine's per-logical-shard slots only (the rest keep the sentinel)."""
    state = fuse_shards(ckpt, target_format)
    slots = torch.full((len(ckpt.logical_widths),), SCALE_SLOT_SENTINEL)
    slots[0] = state.weight_scale.reshape(-1)[0]
    flagged = tuple(range(1, len(slots)))
    return replace(state, weight_scale=slots, widths=ckpt.logical_widths, unloaded=flagged)


def test_a_loader_filling_one_slot_of_a_fused_on_disk_layer_is_refused() -> None:
    """The loading suite's teeth for engines' fused-on-disk weight loaders."""
    fused = fused_on_disk(build_case_checkpoint("fp8_per_tensor", "fused_spread_scales")[0])
    stale = replace(FP8_LOADER, name="first_slot_only", fuse=_first_slot_only)
    with pytest.raises(LoadError, match=r"never loaded for .*k_proj\.weight_scale"):
        stale.load(fused, "e4m3fn")


def test_e8m0_scales_are_stored_as_their_bytes() -> None:
    ckpt, _ = build_case_checkpoint(FP8_PER_BLOCK_UE8M0, "fused_spread_scales")
    for shard in ckpt.shards:
        assert shard.weight_scale is not None
        assert shard.weight_scale.dtype == torch.float8_e8m0fnu
        values = scale_values(shard.weight_scale)
        assert bool((torch.frexp(values).mantissa == 0.5).all())  # powers of two
    shards = tuple(replace(s, weight_scale=scale_values(s.weight_scale)) for s in ckpt.shards)  # type: ignore[arg-type]
    as_float = replace(ckpt, shards=shards)
    validate_checkpoint(as_float)  # float32 power-of-two values are accepted too
    a = FP8_LOADER.load(ckpt, "e4m3fnuz").layer
    b = FP8_LOADER.load(as_float, "e4m3fnuz").layer
    assert bit_mismatches(a.weight.scale, b.weight.scale) == 0
    assert bit_mismatches(a.weight.codes, b.weight.codes) == 0


def test_only_fused_cases_get_the_fused_on_disk_layout() -> None:
    params = list(loading_params(layouts=("", FUSED_ON_DISK)))
    fused = {p.case for p in params if p.layout == FUSED_ON_DISK}
    assert "unfused" not in fused
    assert "fused_spread_scales" in fused
    assert all(not p.id.endswith(FUSED_ON_DISK) for p in params if not p.layout)
