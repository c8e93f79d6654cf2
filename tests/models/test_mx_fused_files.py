"""``fused_global_shared`` on compressed-tensors NVFP4 files, without a quantization tool.

The fused NVFP4 designs of the loading suite (harness.loading.fused_nvfp4) laid out as
llm-compressor writes NVFP4 (packed codes, E4M3 block scales, the global as a float32
divisor 1 / g per shard): shards that share their global pass every file check, shards
each with its own global fail ``fused_global_shared`` alone.
"""

from __future__ import annotations

import torch

from harness.core.formats import pack_fp4
from harness.loading.fused_nvfp4 import fused_nvfp4_checkpoint
from harness.models.mx_files import LAYOUTS, mx_fused_checks

LAYOUT = LAYOUTS[("compressed-tensors", "w_nvfp4")]


def _files(design: str) -> tuple[dict[str, torch.Tensor], tuple[str, ...], dict[str, torch.Tensor]]:
    ckpt = fused_nvfp4_checkpoint(design)
    tensors, floats = {}, {}
    modules = tuple(f"layer.{n}" for n in ckpt.names)
    for i, (m, shard) in enumerate(zip(modules, ckpt.shards, strict=True)):
        assert shard.global_scale is not None
        tensors[f"{m}.weight_packed"] = pack_fp4(shard.codes)
        tensors[f"{m}.weight_scale"] = shard.scale.float().to(torch.float8_e4m3fn)
        tensors[f"{m}.weight_global_scale"] = (1.0 / shard.global_scale.reshape(1)).float()
        floats[f"{m}.weight"] = ckpt.shard_values(i).float()
    return tensors, modules, floats


def _failed(design: str) -> dict[str, str]:
    tensors, modules, floats = _files(design)
    return {
        r.name: r.message for r in mx_fused_checks(tensors, modules, LAYOUT, floats) if r.failed
    }


def test_shards_sharing_their_global_pass() -> None:
    assert _failed("shared_global") == {}
    assert _failed("shared_global_tiny_blocks") == {}


def test_shards_with_their_own_globals_fail_fused_global_shared_alone() -> None:
    for design in ("unequal_globals", "unequal_globals_gate_up"):
        failed = _failed(design)
        assert set(failed) == {"fused_global_shared"}, failed


def test_an_unfused_layer_has_no_shared_global_to_check() -> None:
    tensors, modules, floats = _files("unequal_globals")
    names = [r.name for r in mx_fused_checks(tensors, modules[:1], LAYOUT, floats)]
    assert "fused_global_shared" not in names
