"""Checkpoint loading: every FP8 scheme x named case x platform FP8 flavour (x loader, path).

The checkpoint of each case comes from its golden entry; both registered loaders bring it
to the flavour under test, and the loaded layer must (1) dequantize shard by shard to the
checkpoint, (2) be bit-identical between loaders, (3) give the golden output through every
path with the bias applied exactly once.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.core.compare import dot_error_bound, rounding_bound, within_bound
from harness.loading.cases import (
    LoadingParams,
    checkpoint_from_golden,
    golden_entry,
    loading_params,
)
from harness.loading.invariants import (
    bias_application_counts,
    runtime_differences,
    shard_violations,
)
from harness.loading.loaders import get_loader, loaders
from harness.paths import get_path, linear_paths
from harness.paths.base import LinearProblem
from harness.store.golden import GoldenError

LOADERS = tuple(loaders())
OUT_DTYPE = torch.bfloat16


def _checkpoint(golden_store: Any, p: LoadingParams) -> Any:
    try:
        data = golden_store.load(golden_entry(p.scheme, p.case))
    except GoldenError as exc:
        pytest.fail(str(exc), pytrace=False)
    return data, checkpoint_from_golden(data, p.scheme, p.case)


def _load(loader: str, ckpt: Any, flavour: str) -> Any:
    support = get_loader(loader).supports(ckpt.scheme, flavour)
    if not support.ok:
        pytest.skip(support.reason)
    return get_loader(loader).load(ckpt, flavour)


@pytest.mark.parametrize("p", list(loading_params(loaders=LOADERS)), ids=lambda p: p.id)
def test_loaded_shards_dequantize_to_checkpoint(p: LoadingParams, golden_store: Any) -> None:
    """Exact where only flavour normalization ran; within one ULP where requantized."""
    _, ckpt = _checkpoint(golden_store, p)
    loaded = _load(p.loader, ckpt, p.flavour)
    assert loaded.layer.weight.spec.format == p.flavour
    problems = shard_violations(ckpt, loaded)
    assert not problems, "; ".join(problems)


@pytest.mark.parametrize("p", list(loading_params()), ids=lambda p: p.id)
def test_loaders_agree_bit_for_bit(p: LoadingParams, golden_store: Any) -> None:
    """Every loader gives the same runtime tensors as the first, whatever its step order."""
    _, ckpt = _checkpoint(golden_store, p)
    first, *others = LOADERS
    if not others:
        pytest.skip("only one loader is registered")
    reference = _load(first, ckpt, p.flavour)
    for name in others:
        problems = runtime_differences(reference, _load(name, ckpt, p.flavour))
        assert not problems, f"{first} vs {name}: " + "; ".join(problems)


@pytest.mark.parametrize(
    "p",
    list(loading_params(loaders=LOADERS, paths=tuple(linear_paths()), biases=(True, False))),
    ids=lambda p: p.id,
)
def test_loaded_layer_output(p: LoadingParams, golden_store: Any, qh_platform: Any) -> None:
    """Output of the loaded layer through a path vs the golden, bias applied exactly once."""
    data, ckpt = _checkpoint(golden_store, p)
    if not p.bias:
        ckpt = ckpt.without_bias()
    loaded = _load(p.loader, ckpt, p.flavour)
    x = data.tensors["x"].float()
    m, k = x.shape
    n = loaded.layer.weight.codes.shape[0]
    path = get_path(p.path)
    support = path.supports(
        loaded.layer.scheme, LinearProblem(m, n, k, p.bias, OUT_DTYPE), qh_platform
    )
    if not support.ok:
        pytest.skip(support.reason)
    device = qh_platform.torch_device
    y = path.forward(loaded.layer.to(device), x.to(device), OUT_DTYPE).cpu()
    assert y.shape == (m, n), f"{p.path} returned shape {tuple(y.shape)}"
    assert y.dtype == OUT_DTYPE, f"{p.path} returned {y.dtype}"
    assert bool(torch.isfinite(y).all()), f"{int((~torch.isfinite(y)).sum())} non-finite outputs"

    y_ref = data.tensors["y_ref"].double()
    bias = data.tensors["bias"].double()
    # Bound: float32 accumulation of K products and the bias (Higham gamma_{K+1}), the golden's
    # float32 storage of y_ref, and up to two roundings to bf16 (before/after a bias epilogue)
    # of an output as large as |y_ref| + 2|bias|, so 0, 1 or 2 bias applications all fit.
    reference = y_ref + (bias if p.bias else 0)
    bound = (
        dot_error_bound(data.tensors["abs_product"].double() + bias.abs(), k, torch.float32)
        + rounding_bound(reference, torch.float32)
        + rounding_bound(y_ref.abs() + 2 * bias.abs(), OUT_DTYPE, roundings=2)
    )
    counts = bias_application_counts(y, y_ref, bias, bound)
    expected = 1 if p.bias else 0
    wrong = counts != expected
    assert not bool(wrong.any()), (
        f"{p.path}: bias applied {sorted(set(counts[wrong].tolist()))} times (-1: neither 0, 1 "
        f"nor 2) in {int(wrong.sum())}/{counts.numel()} outputs, expected {expected}"
    )
    result = within_bound(y, reference, bound)
    assert result.ok, f"{p.path} vs golden: {result.describe()}"
