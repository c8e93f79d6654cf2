"""Hostile checkpoint files: deeply nested or non-integer layout metadata, huge but finite
scales that would load into inf/NaN weights, and files that are not files. Each is one
clear `CheckpointError` naming the file and the field or tensor; the file is left as it was."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability_helpers import assert_clear_error, tree_fingerprint
from safetensors import safe_open
from safetensors.torch import save_file

from harness.loading.cases import build_case_checkpoint
from harness.loading.checkpoint import (
    LAYOUT_KEY,
    CheckpointError,
    read_checkpoint,
    save_checkpoint,
)
from harness.loading.loaders import get_loader

PROBES = settings(max_examples=25, deadline=None)
SCHEMES = ("fp8_per_tensor", "fp8_per_channel", "fp8_per_block", "fp8_w_per_channel_a_static")


def _rewrite(path: Path, *, metadata: dict[str, str] | None = None, tensors=None) -> None:
    with safe_open(str(path), framework="pt") as fh:
        old_meta = dict(fh.metadata() or {})
        old = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118
    save_file({**old, **(tensors or {})}, str(path), metadata={**old_meta, **(metadata or {})})


def _saved(directory: Path, scheme: str = "fp8_per_tensor") -> Path:
    ckpt, _ = build_case_checkpoint(scheme, "fused_spread_scales")
    path = directory / "layer.safetensors"
    save_checkpoint(ckpt, path)
    return path


def _probe(path: Path, *must_name: str) -> None:
    before = tree_fingerprint(path.parent)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(path)
    assert_clear_error(str(info.value), str(path), *must_name)
    assert tree_fingerprint(path.parent) == before


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_layout_metadata(tmp_path: Path, depth: int) -> None:
    path = _saved(tmp_path)
    _rewrite(path, metadata={LAYOUT_KEY: "[" * depth + "]" * depth})
    _probe(path, LAYOUT_KEY)


bad_widths = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -1, True, False, "4", None, [4]]),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)),
    st.integers(max_value=-1),
)


@PROBES
@given(width=bad_widths, index=st.integers(0, 2))
def test_layout_widths_must_be_non_negative_integers(width: object, index: int) -> None:
    """JSON parsers accept Infinity and NaN; int(inf) used to be an OverflowError traceback."""
    with tempfile.TemporaryDirectory() as tmp:
        path = _saved(Path(tmp))
        with safe_open(str(path), framework="pt") as fh:
            layout = json.loads(fh.metadata()[LAYOUT_KEY])
        layout["shards"][index][1] = width
        _rewrite(path, metadata={LAYOUT_KEY: json.dumps(layout)})
        _probe(path, LAYOUT_KEY, f"['shards'][{index}]")


@PROBES
@given(
    scheme=st.sampled_from(SCHEMES),
    scale=st.floats(min_value=1e36, max_value=3e38),
    field=st.sampled_from(["weight_scale", "input_scale"]),
)
def test_huge_finite_scales_are_rejected_before_they_load_into_inf(
    scheme: str, scale: float, field: str
) -> None:
    if field == "input_scale" and scheme != "fp8_w_per_channel_a_static":
        field = "weight_scale"  # only static schemes store an input scale
    with tempfile.TemporaryDirectory() as tmp:
        path = _saved(Path(tmp), scheme)
        with safe_open(str(path), framework="pt") as fh:
            name = next(k for k in fh.keys() if k.endswith(field))  # noqa: SIM118
            old = fh.get_tensor(name)
        huge = old.clone()
        huge.reshape(-1)[0] = scale
        _rewrite(path, tensors={name: huge})
        _probe(path, name, "too large")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_largest_accepted_scale_loads_finite(tmp_path: Path, scheme: str) -> None:
    """The limit is not arbitrary: a scale just under it loads into finite weights through
    both loaders and both FP8 flavours."""
    from harness.loading.checkpoint import FLOAT32_MAX, SCALE_HEADROOM

    path = _saved(tmp_path, scheme)
    with safe_open(str(path), framework="pt") as fh:
        name = next(k for k in fh.keys() if k.endswith("weight_scale"))  # noqa: SIM118
        scale = fh.get_tensor(name)
    limit = torch.tensor(FLOAT32_MAX / (448.0 * SCALE_HEADROOM), dtype=torch.float32)
    edge = torch.nextafter(limit, torch.tensor(0.0))
    _rewrite(path, tensors={name: torch.full_like(scale, float(edge))})
    ckpt = read_checkpoint(path)
    for loader in ("fp8", "quark"):
        for target in ("e4m3fn", "e4m3fnuz"):
            layer = get_loader(loader).load(ckpt, target).layer
            weights = layer.weight.dequantize()
            assert bool(torch.isfinite(weights).all()), (loader, target)
            assert float(weights.abs().max()) > 1e30, "the probe must reach the edge"
            if layer.input_scale is not None:
                assert bool(torch.isfinite(layer.input_scale).all()), (loader, target)


def test_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    path = tmp_path / "layer.safetensors"
    os.mkfifo(path)
    _probe(path, "FIFO")


def test_a_directory_and_a_symlink_loop_are_refused(tmp_path: Path) -> None:
    directory = tmp_path / "dir.safetensors"
    directory.mkdir()
    _probe(directory, "a directory")
    loop = tmp_path / "loop.safetensors"
    os.symlink(loop.name, loop)
    _probe(loop, "symlink loop")
