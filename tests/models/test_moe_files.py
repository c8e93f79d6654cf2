"""The MoE block checks of a checkpoint's files, without a quantization tool.

A MoE block (router + 3 experts) is written as llm-compressor writes one
(per-expert gate/up/down projections, per-channel e4m3fn codes, bf16 scales), from float
weights named as Mixtral's float checkpoint names them, with the harness's own quantizer;
each check passes on it and fails on the bug it exists for.
"""

from __future__ import annotations

from pathlib import Path

import torch

from harness.core.checks import CheckResult
from harness.core.inputs import generator
from harness.core.quantize import quantize
from harness.core.schemes import get_scheme
from harness.models.files import ModelCheckpoint
from harness.models.moe_files import EXPERT_PROJECTIONS, codes_match, moe_block_checks

SCHEME = get_scheme("fp8_per_channel")
BLOCK = "model.layers.0.block_sparse_moe.experts"
EXPERTS, HIDDEN, INTER = 3, 128, 64
SHAPES = {"gate_proj": (INTER, HIDDEN), "up_proj": (INTER, HIDDEN), "down_proj": (HIDDEN, INTER)}


def _block() -> tuple[ModelCheckpoint, dict[str, torch.Tensor]]:
    gen = generator("models-moe-files")
    tensors: dict[str, torch.Tensor] = {}
    floats: dict[str, torch.Tensor] = {}
    for j in range(EXPERTS):
        for proj, float_name in EXPERT_PROJECTIONS.items():
            n, k = SHAPES[proj]
            # each expert its own magnitude, so the experts' scales differ
            w = (torch.randn(n, k, generator=gen) * (1 + j) / k**0.5).to(torch.bfloat16)
            floats[f"{BLOCK}.{j}.{float_name}.weight"] = w
            scale = quantize(w.float(), SCHEME.weight).scale.to(torch.bfloat16)
            q = quantize(w.float(), SCHEME.weight, scale=scale.float())
            tensors[f"{BLOCK}.{j}.{proj}.weight"] = q.codes.view(torch.float8_e4m3fn)
            tensors[f"{BLOCK}.{j}.{proj}.weight_scale"] = scale
    tensors["model.layers.0.block_sparse_moe.gate.weight"] = torch.randn(
        EXPERTS, HIDDEN, generator=gen
    ).to(torch.bfloat16)
    ckpt = ModelCheckpoint(Path("synthetic"), {}, SCHEME, tensors, ())
    return ckpt, floats


def _failed(results: list[CheckResult]) -> set[str]:
    return {r.name for r in results if r.failed}


def _with(ckpt: ModelCheckpoint, **changes: torch.Tensor | None) -> ModelCheckpoint:
    tensors = dict(ckpt.tensors)
    for key, value in changes.items():
        name = key.replace("__", ".")
        if value is None:
            tensors.pop(name)
        else:
            tensors[name] = value
    return ModelCheckpoint(ckpt.folder, ckpt.config, ckpt.scheme, tensors, ckpt.quantized)


def test_a_faithful_block_passes_every_check() -> None:
    ckpt, floats = _block()
    results = moe_block_checks(ckpt, BLOCK, EXPERTS, floats)
    assert [r.name for r in results] == [
        "experts_complete",
        "router_float",
        "expert_scales_uniform",
        "expert_codes_match_float",
    ]
    assert _failed(results) == set()


def test_one_experts_scales_used_for_another_fail() -> None:
    ckpt, floats = _block()
    a, b = (f"{BLOCK}.{j}.up_proj.weight_scale" for j in (0, 2))
    swapped = dict(ckpt.tensors)
    swapped[a], swapped[b] = ckpt.tensors[b], ckpt.tensors[a]
    bad = ModelCheckpoint(ckpt.folder, ckpt.config, SCHEME, swapped, ())
    assert _failed(moe_block_checks(bad, BLOCK, EXPERTS, floats)) == {"expert_codes_match_float"}


def test_a_missing_expert_a_quantized_router_and_mixed_layouts_fail() -> None:
    ckpt, floats = _block()
    gone = {f"{BLOCK}.1.down_proj.weight_scale".replace(".", "__"): None}
    assert "experts_complete" in _failed(moe_block_checks(_with(ckpt, **gone), BLOCK, 3, floats))
    router = "model.layers.0.block_sparse_moe.gate"
    codes = ckpt.tensors[f"{router}.weight"].to(torch.float8_e4m3fn)
    quantized = _with(ckpt, **{f"{router}.weight".replace(".", "__"): codes})
    assert _failed(moe_block_checks(quantized, BLOCK, EXPERTS, floats)) == {"router_float"}
    key = f"{BLOCK}.1.gate_proj.weight_scale"
    as_f32 = _with(ckpt, **{key.replace(".", "__"): ckpt.tensors[key].float()})
    assert _failed(moe_block_checks(as_f32, BLOCK, EXPERTS, floats)) == {"expert_scales_uniform"}


def test_codes_one_step_off_fail_and_saturation_is_allowed() -> None:
    ckpt, floats = _block()
    codes = ckpt.tensors[f"{BLOCK}.0.gate_proj.weight"]
    scale = ckpt.tensors[f"{BLOCK}.0.gate_proj.weight_scale"]
    weight = floats[f"{BLOCK}.0.w1.weight"]
    assert codes_match(codes, weight, scale) is None
    moved = codes.view(torch.uint8).clone()
    moved[0, 0] = moved[0, 0] ^ 1  # the neighbouring code: one e4m3 step away
    assert codes_match(moved.view(torch.float8_e4m3fn), weight, scale) is not None
    # a scale a little below amax / 448 (bf16 rounding) puts w/s above 448: the code saturates
    assert codes_match(codes, weight.double() * (1 + 2**-9), scale) is None
