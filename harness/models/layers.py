"""Checks of one quantized layer of a running model, from what an engine captured.

An engine adapter captures, for each quantized linear layer, the tensors it holds after its
post-load processing (`RuntimeTensors`) and, per forward call, the layer's input and
output. Three groups of checks follow, each a named `CheckResult`:

- loading (`loading_checks`): the runtime weight dequantizes to what the checkpoint files
  stand for, shard by shard (`harness.loading.invariants.shard_violations`: exact, or within
  one ULP for requantized per-tensor shards), the static input scale is the largest shard's,
  and the bias the engine adds is the checkpoint's, bit for bit;
- output (`output_checks`): for that exact input, the layer's output lies within the bound
  the path's declared `Numerics` give around the harness's reference (the input quantized by
  the harness's quantizer under the engine's declared conventions, times the runtime weight,
  in float64, plus the checkpoint's bias), and, where the path rounds once, is a rounding of
  a value in the accumulation interval (bit-exact where that rounding is unique);
- quality (`sqnr_check`): SQNR against the unquantized layer (the float checkpoint), the
  exact sum's cancellation added back, above the scheme's floor.

The reference uses the checkpoint's bias, not the engine's: a dropped or doubled bias fails
the output check even where it is consistent with the engine's own parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.core.checks import (
    CheckResult,
    check_finite,
    check_rounding_interval,
    check_within_bound,
    failed,
    passed,
)
from harness.core.compare import bit_mismatches, cancellation_db, rounding_bound, sqnr_db
from harness.core.quantize import QuantizedLinear, QuantizedTensor, scale_grid
from harness.core.schemes import Scheme
from harness.loading.checkpoint import CheckpointError, LinearCheckpoint, validate_checkpoint
from harness.loading.invariants import shard_violations
from harness.loading.loaders import LoadedLayer
from harness.paths.base import Numerics, multiplied_activation
from harness.paths.bounds import linear_gemm_interval


@dataclass(frozen=True)
class RuntimeTensors:
    """A layer's parameters as the engine holds them after post-load processing."""

    weight: torch.Tensor  # float8 codes, [N, K] (input_dim 1) or [K, N] (input_dim 0)
    weight_scale: torch.Tensor
    input_scale: torch.Tensor | None
    bias: torch.Tensor | None
    input_dim: int = 1  # which axis of ``weight`` is K, as the engine declares it


def weight_nk(weight: torch.Tensor, n: int, k: int, input_dim: int) -> torch.Tensor:
    """The weight as [N, K] codes (uint8), from the axis the engine says is K (a square
    weight cannot be told apart by its shape)."""
    w = weight if input_dim == 1 else weight.t()
    if tuple(w.shape) != (n, k):
        raise ValueError(
            f"runtime weight {tuple(weight.shape)} with K on axis {input_dim} is not "
            f"[N, K] = [{n}, {k}]"
        )
    return w.contiguous().view(torch.uint8)


def runtime_layer(
    scheme: Scheme, tensors: RuntimeTensors, n: int, k: int, bias: torch.Tensor | None
) -> QuantizedLinear:
    """The engine's runtime tensors as a harness `QuantizedLinear` (``bias``: the one to use)."""
    codes = weight_nk(tensors.weight, n, k, tensors.input_dim)
    grid = scale_grid(scheme.weight, codes.shape)
    scale = tensors.weight_scale.float()
    if scale.numel() != grid[0] * grid[1]:
        raise ValueError(
            f"runtime weight scale has {scale.numel()} elements; scheme {scheme.name} has a "
            f"{grid} scale grid for a [{n}, {k}] weight"
        )
    inp = None if tensors.input_scale is None else tensors.input_scale.float().reshape(1, 1)
    return QuantizedLinear(
        scheme, QuantizedTensor(codes, scale.reshape(grid), scheme.weight), inp, bias
    )


# ------------------------------------------------------------------------------ loading
def checkpoint_check(ckpt: LinearCheckpoint) -> CheckResult:
    """The loading suite's validators (dtypes, shapes, finite positive scales) on the files."""
    try:
        validate_checkpoint(ckpt)
    except CheckpointError as exc:
        return failed("checkpoint_valid", str(exc))
    return passed("checkpoint_valid")


def loading_checks(
    ckpt: LinearCheckpoint, runtime: RuntimeTensors, scheme: Scheme
) -> list[CheckResult]:
    """The runtime tensors against the checkpoint files (see the module doc)."""
    n, k = sum(ckpt.widths), int(ckpt.shards[0].weight.shape[1])
    results: list[CheckResult] = []
    try:
        layer = runtime_layer(scheme, runtime, n, k, None)
    except ValueError as exc:
        return [failed("runtime_weight_matches_checkpoint", str(exc))]
    loaded = LoadedLayer(layer, ckpt.widths, ())
    problems = shard_violations(ckpt, loaded)
    if problems:
        results.append(failed("runtime_weight_matches_checkpoint", "; ".join(problems[:4])))
    else:
        results.append(passed("runtime_weight_matches_checkpoint"))
    if scheme.activation is not None and not scheme.activation.dynamic:
        want = max(float(s.input_scale) for s in ckpt.shards if s.input_scale is not None)
        got = None if runtime.input_scale is None else runtime.input_scale.float().reshape(-1)
        if got is None or got.numel() != 1 or float(got[0]) != want:
            results.append(
                failed("input_scale_is_shard_max", f"runtime input scale {got}, expected {want!r}")
            )
        else:
            results.append(passed("input_scale_is_shard_max"))
    results.append(bias_check(ckpt.bias, runtime.bias))
    return results


def bias_check(expected: torch.Tensor | None, got: torch.Tensor | None) -> CheckResult:
    name = "bias_is_checkpoint_bias"
    if expected is None:
        if got is not None and bool((got != 0).any()):
            return failed(name, "the checkpoint has no bias but the runtime layer adds one")
        return passed(name)
    if got is None:
        return failed(name, "the checkpoint's bias is missing from the runtime layer")
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return failed(name, f"runtime bias {tuple(got.shape)} {got.dtype} vs {expected.dtype}")
    n = bit_mismatches(got, expected)
    return passed(name) if n == 0 else failed(name, f"{n}/{got.numel()} bias values differ")


# ------------------------------------------------------------------------------- output
@dataclass(frozen=True)
class LayerReference:
    center: torch.Tensor  # float64 reference output
    bound: torch.Tensor
    lo: torch.Tensor
    hi: torch.Tensor


def layer_reference(
    layer: QuantizedLinear, x: torch.Tensor, numerics: Numerics, conventions: frozenset[str]
) -> LayerReference:
    """The reference for this exact input: x quantized by the harness under the engine's
    conventions (or as it arrives, where the numerics declare a weight-only kernel), times
    the runtime weight, plus the bias, in float64 (core.checks: the accumulation interval,
    Higham gamma_{K+3}); plus the path's roundings to its output."""
    a = multiplied_activation(x, layer.scheme, layer.input_scale, conventions, numerics)
    w = layer.weight.dequantize(torch.float64)
    acc = linear_gemm_interval(a, w, layer.bias, numerics)
    out, roundings = numerics.out_dtype, numerics.output_roundings
    before = numerics.roundings_before_bias if layer.bias is not None else 0
    product = acc.center if layer.bias is None else acc.center - layer.bias.double()
    bound = (
        acc.radius
        + rounding_bound(product, out, before * numerics.rounding_units)
        + rounding_bound(acc.center, out, (roundings - before) * numerics.rounding_units)
    )
    return LayerReference(acc.center, bound, acc.lo, acc.hi)


def output_checks(
    y: torch.Tensor, ref: LayerReference, numerics: Numerics, path: str
) -> list[CheckResult]:
    return [
        check_finite("finite", y, "outputs"),
        check_within_bound(
            "vs_reference",
            y,
            ref.center,
            ref.bound,
            f"{path} vs the harness reference",
            worst_ratio="worst_error_to_bound",
            max_abs_error="max_abs_err_vs_reference",
        ),
        check_rounding_interval(y, ref.lo, ref.hi, numerics.output_roundings, path),
    ]


def sqnr_check(
    y: torch.Tensor,
    x: torch.Tensor,
    w_float: torch.Tensor,
    bias: torch.Tensor | None,
    scheme: Scheme,
) -> CheckResult:
    """SQNR vs the unquantized layer on the same input, cancellation added back (as the
    linear suite's ``sqnr_floor``), above the scheme's floor."""
    exact = x.double() @ w_float.double().t()
    if bias is not None:
        exact = exact + bias.double()
    sqnr = sqnr_db(exact, y)
    term = sqnr - cancellation_db(x, w_float, bias)
    metrics = {"sqnr_db": sqnr, "term_sqnr_db": term, "sqnr_floor_db": scheme.sqnr_floor_db}
    if term >= scheme.sqnr_floor_db:
        return passed("sqnr_floor", **metrics)
    return failed(
        "sqnr_floor",
        f"term SQNR {term:.1f} dB below the floor {scheme.sqnr_floor_db} dB of {scheme.name}",
        **metrics,
    )
