"""Checkpoint files: safetensors round trip, and bad input rejected whole with a clear error."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from harness.core.compare import bit_mismatches
from harness.loading.cases import build_case_checkpoint
from harness.loading.checkpoint import (
    CONFIG_KEY,
    CheckpointError,
    LinearCheckpoint,
    read_checkpoint,
    save_checkpoint,
)
from harness.loading.invariants import runtime_differences
from harness.loading.loaders import LoadedLayer, get_loader


def _fused() -> LinearCheckpoint:
    ckpt, _ = build_case_checkpoint("fp8_per_tensor", "fused_spread_scales")
    return replace(ckpt, bias=torch.linspace(-1, 1, sum(ckpt.widths)))


def test_round_trip_keeps_float8_dtypes_config_and_every_bit(tmp_path: Path) -> None:
    ckpt = _fused()
    path = tmp_path / "layer.safetensors"
    save_checkpoint(ckpt, path)
    header_len = int.from_bytes(path.read_bytes()[:8], "little")
    header = json.loads(path.read_bytes()[8 : 8 + header_len])
    assert header["model.layers.0.proj.q_proj.weight"]["dtype"] == "F8_E4M3"
    with safe_open(str(path), framework="pt") as fh:
        assert json.loads(fh.metadata()[CONFIG_KEY]) == {
            "method": "fp8",
            "scheme": "fp8_per_tensor",
        }
    back = read_checkpoint(path)
    assert back.widths == ckpt.widths
    assert back.config == ckpt.config
    for name, tensor in ckpt.tensors().items():
        other = back.tensors()[name]
        assert bit_mismatches(other, tensor) == 0, name
    loaded = get_loader("fp8").load(back, "e4m3fnuz")
    assert not runtime_differences(loaded, get_loader("fp8").load(ckpt, "e4m3fnuz"))


def test_loading_never_modifies_the_checkpoint() -> None:
    ckpt = _fused()
    before = {k: v.clone() for k, v in ckpt.tensors().items()}
    for name in ("fp8", "quark"):
        get_loader(name).load(ckpt, "e4m3fnuz")
    for k, v in ckpt.tensors().items():
        assert bit_mismatches(v, before[k]) == 0, k


def _drop(name: str) -> Callable[[dict[str, torch.Tensor]], None]:
    def edit(t: dict[str, torch.Tensor]) -> None:
        del t[name]

    return edit


def _set(name: str, value: torch.Tensor) -> Callable[[dict[str, torch.Tensor]], None]:
    def edit(t: dict[str, torch.Tensor]) -> None:
        t[name] = value

    return edit


P = "model.layers.0.proj"
BAD_TENSORS = {
    "missing_scale": (_drop(f"{P}.k_proj.weight_scale"), f"'{P}.k_proj.weight_scale' is missing"),
    "scale_wrong_shape": (
        _set(f"{P}.k_proj.weight_scale", torch.ones(3)),
        rf"'{P}.k_proj.weight_scale' has shape \(3,\), expected one of \[\(\)\]",
    ),
    "weight_dtype_not_config": (
        _set(f"{P}.q_proj.weight", torch.zeros(32, 64, dtype=torch.float8_e5m2)),
        rf"'{P}.q_proj.weight' is torch.float8_e5m2, but scheme fp8_per_tensor stores e4m3fn",
    ),
    "nan_scale": (
        _set(f"{P}.v_proj.weight_scale", torch.tensor(float("nan"))),
        rf"'{P}.v_proj.weight_scale' holds 1 scale\(s\) that are not finite and positive",
    ),
    "nan_input_scale": (
        _set(f"{P}.q_proj.input_scale", torch.tensor(float("nan"))),
        rf"'{P}.q_proj.input_scale' holds 1 scale",
    ),
    "nan_weight_code": (
        _set(
            f"{P}.q_proj.weight",
            torch.full((32, 64), 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn),
        ),
        rf"'{P}.q_proj.weight' holds 2048 NaN codes",
    ),
}


def _write_edited(
    ckpt: LinearCheckpoint, path: Path, edit: Callable[[dict[str, torch.Tensor]], None]
) -> None:
    save_checkpoint(ckpt, path)
    from safetensors.torch import load_file, save_file

    with safe_open(str(path), framework="pt") as fh:
        metadata = fh.metadata()
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path), metadata=metadata)


class Module:
    """What an engine holds: the layer is replaced only by a complete, checked load."""

    def __init__(self) -> None:
        self.layer = get_loader("fp8").load(_fused(), "e4m3fn")

    def load_file(self, path: Path) -> None:
        self.layer = get_loader("fp8").load(read_checkpoint(path), "e4m3fnuz")


@pytest.mark.parametrize("bad", sorted(BAD_TENSORS))
def test_bad_tensor_is_rejected_whole(bad: str, tmp_path: Path) -> None:
    edit, message = BAD_TENSORS[bad]
    path = tmp_path / f"{bad}.safetensors"
    _write_edited(_fused(), path, edit)
    module = Module()
    previous = module.layer
    with pytest.raises(CheckpointError, match=message):
        module.load_file(path)
    assert module.layer is previous, "a failed load must leave the previous layer in place"


def test_truncated_file_is_rejected_whole(tmp_path: Path) -> None:
    path = tmp_path / "layer.safetensors"
    save_checkpoint(_fused(), path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) - 100])
    module = Module()
    previous = module.layer
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        module.load_file(path)
    assert module.layer is previous


def test_bad_in_memory_checkpoint_is_rejected_by_the_loader() -> None:
    ckpt = _fused()
    shards = list(ckpt.shards)
    shards[1] = replace(shards[1], weight_scale=torch.tensor(-1.0))
    with pytest.raises(CheckpointError, match=r"k_proj\.weight_scale"):
        get_loader("quark").load(replace(ckpt, shards=tuple(shards)), "e4m3fn")


def test_config_naming_an_unknown_scheme_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "layer.safetensors"
    save_checkpoint(replace(_fused(), config=replace(_fused().config, scheme="fp9")), path)
    with pytest.raises(CheckpointError, match="unknown scheme 'fp9'"):
        read_checkpoint(path)


def test_config_naming_a_scheme_loading_does_not_cover_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "layer.safetensors"
    save_checkpoint(replace(_fused(), config=replace(_fused().config, scheme="w_mxfp4")), path)
    with pytest.raises(
        CheckpointError, match=r"layer\.safetensors.*w_mxfp4 \(mx\) cannot be loaded"
    ):
        read_checkpoint(path)


def _with_codes(loaded: LoadedLayer, codes: torch.Tensor) -> LoadedLayer:
    weight = replace(loaded.layer.weight, codes=codes)
    return replace(loaded, layer=replace(loaded.layer, weight=weight))


@pytest.mark.parametrize("flavour", ["e4m3fn", "e4m3fnuz"])
def test_loader_agreement_counts_a_zero_codes_sign_only_where_0x80_is_not_zero(
    flavour: str,
) -> None:
    """A zero's sign depends on whether a loader converted the flavour before or after
    requantizing (e4m3fnuz has no -0): +0/-0 agree in e4m3fn; 0x80 in e4m3fnuz is NaN and
    differs; any other code change differs in both."""
    loaded = get_loader("fp8").load(_fused(), flavour)
    codes = loaded.layer.weight.codes
    zeros = codes == 0
    assert int(zeros.sum()) > 0
    assert int((~zeros).sum()) > 0
    signed = _with_codes(loaded, torch.where(zeros, torch.full_like(codes, 0x80), codes))
    problems = runtime_differences(loaded, signed)
    if flavour == "e4m3fn":
        assert problems == []
    else:
        assert problems == [
            f"weight codes: {int(zeros.sum())}/{codes.numel()} elements differ bit-wise"
        ]
    bumped = codes.clone()
    first_nonzero = int(torch.nonzero(~zeros.reshape(-1))[0])
    bumped.reshape(-1)[first_nonzero] ^= 1
    assert runtime_differences(loaded, _with_codes(loaded, bumped)) == [
        f"weight codes: 1/{codes.numel()} elements differ bit-wise"
    ]
