"""The loading suite's checks, named, each evaluated (one bug often fails several).

Loaded shards, per loader: ``runtime_format`` (the layer holds the platform's FP8 flavour),
``shards_match_checkpoint`` (`shard_violations`: bit-exact, or within one ULP where
requantized).

Fused NVFP4 layers (`fused_nvfp4_checks`): ``global_shared`` (one global scale for the
layer) and ``shards_match_checkpoint`` (each shard's loaded values are the checkpoint's),
harness.loading.fused_nvfp4.

Loaders: ``<loader>_agrees_with_<first>`` per further loader (`runtime_differences`: codes,
scales, input scale, bias and runtime scheme bit for bit).

Output through a path: ``finite``, ``bias_applied_once`` (`bias_application_counts`),
``output_vs_golden`` (the derived bound of `output_bound`). A wrong scale fails both of
the last two: the bias check cannot tell a scaled product from a wrong bias count, the
bound check says how far off the output is. Then, as in the linear suite, for paths that
round once: ``rounding_interval`` (a correct rounding of the float32 accumulation interval
around the exact float64 product of the correctly loaded operands, so bit-exact wherever
that rounding is unique) and, for non-reference paths, ``bits_vs_emulated`` (the same bits
as `emulated` on the same loaded layer there).
"""

from __future__ import annotations

import torch

from harness.core.checks import (
    CheckResult,
    check_bits_vs_emulated,
    check_finite,
    check_rounding_interval,
    check_within_bound,
    failed,
    first_offender,
    passed,
)
from harness.core.compare import (
    gamma_bound,
    rounding_bound,
)
from harness.loading.checkpoint import LinearCheckpoint
from harness.loading.fused_nvfp4 import (
    FusedNvfp4Checkpoint,
    LoadedNvfp4,
    global_violations,
    shard_value_violations,
)
from harness.loading.invariants import (
    AMBIGUOUS,
    bias_application_counts,
    runtime_differences,
    shard_violations,
    shared_scale_violations,
)
from harness.loading.loaders import LoadedLayer
from harness.paths.bounds import GemmInterval


def check_runtime_format(loaded: LoadedLayer, flavour: str) -> CheckResult:
    got = loaded.layer.weight.spec.format
    if got == flavour:
        return passed("runtime_format")
    return failed("runtime_format", f"loaded weights are {got}, expected {flavour}")


def check_shards_match_checkpoint(ckpt: LinearCheckpoint, loaded: LoadedLayer) -> CheckResult:
    """Exact where only flavour normalization ran; within one ULP where requantized."""
    problems = shard_violations(ckpt, loaded)
    if not problems:
        return passed("shards_match_checkpoint")
    return failed("shards_match_checkpoint", "; ".join(problems))


def check_fused_scale_shared(ckpt: LinearCheckpoint, loaded: LoadedLayer) -> CheckResult:
    """Fused per-tensor shards share one weight scale: the largest shard scale."""
    problems = shared_scale_violations(ckpt, loaded)
    if not problems:
        return passed("fused_scale_shared")
    return failed("fused_scale_shared", "; ".join(problems))


def fused_nvfp4_checks(ckpt: FusedNvfp4Checkpoint, loaded: LoadedNvfp4) -> list[CheckResult]:
    """A fused NVFP4 layer holds one global (``global_shared``) and every shard dequantizes
    to the checkpoint's (``shards_match_checkpoint``), harness.loading.fused_nvfp4."""
    results = []
    for name, problems in (
        ("global_shared", global_violations(loaded)),
        ("shards_match_checkpoint", shard_value_violations(ckpt, loaded)),
    ):
        results.append(failed(name, "; ".join(problems)) if problems else passed(name))
    return results


def agreement_check_name(loader: str, first: str) -> str:
    return f"{loader}_agrees_with_{first}"


def loader_agreement_checks(
    first: str, reference: LoadedLayer, others: dict[str, LoadedLayer]
) -> list[CheckResult]:
    """One check per further loader: its runtime tensors are bit-identical to ``first``'s."""
    results = []
    for name, layer in others.items():
        check = agreement_check_name(name, first)
        problems = runtime_differences(reference, layer)
        results.append(
            failed(check, f"{first} vs {name}: " + "; ".join(problems))
            if problems
            else passed(check)
        )
    return results


def output_bound(
    y_ref: torch.Tensor,
    bias: torch.Tensor,
    abs_product: torch.Tensor,
    k: int,
    with_bias: bool,
    out_dtype: torch.dtype,
    rounding_units: int = 1,
) -> torch.Tensor:
    """Bound on |y - (y_ref + bias)| for a correctly loaded layer through any path.

    Float32 accumulation of K products and the bias (Higham gamma_{K+1}), the golden's
    float32 storage of y_ref, and up to two roundings to ``out_dtype`` (before/after a bias
    epilogue) of an output as large as |y_ref| + 2|bias|, so 0, 1 or 2 bias applications
    all fit. ``rounding_units``: one rounding's error in units of u (the path's declared
    `Numerics.rounding_units`: 1 to nearest, 2 toward zero).
    """
    reference = y_ref + (bias if with_bias else 0)
    return (
        gamma_bound(abs_product + bias.abs(), k + 1, torch.float32)
        + rounding_bound(reference, torch.float32)
        + rounding_bound(y_ref.abs() + 2 * bias.abs(), out_dtype, roundings=2 * rounding_units)
    )


def check_bias_applied_once(
    y: torch.Tensor,
    y_ref: torch.Tensor,
    bias: torch.Tensor,
    bound: torch.Tensor,
    with_bias: bool,
    path: str,
) -> CheckResult:
    """Each output got the bias exactly once (none for a layer without bias), judged where
    the bias can be told apart within ``bound`` (`bias_application_counts`); the outputs
    where it cannot are counted (metric ``bias_ambiguous``) and left to ``output_vs_golden``,
    and a check that can judge none fails."""
    counts = bias_application_counts(y, y_ref, bias, bound, allow_ambiguous=True)
    ambiguous = counts == AMBIGUOUS
    n_ambiguous = int(ambiguous.sum())
    if bool(ambiguous.all()):
        return failed(
            "bias_applied_once",
            f"{path}: the bias is within twice the output bound at every output; its "
            "application count cannot be told",
            None,
            bias_ambiguous=n_ambiguous,
        )
    expected = 1 if with_bias else 0
    wrong = ~ambiguous & (counts != expected)
    unjudged = f" ({n_ambiguous} outputs not judged: bias not told apart)" if n_ambiguous else ""
    if not bool(wrong.any()):
        return passed("bias_applied_once", bias_ambiguous=n_ambiguous)
    return failed(
        "bias_applied_once",
        f"{path}: bias applied {sorted(set(counts[wrong].tolist()))} times (-1: neither 0, 1 "
        f"nor 2) in {int(wrong.sum())}/{counts.numel()} outputs, expected {expected}{unjudged}",
        first_offender(wrong, counts, torch.full((), float(expected))),
        bias_ambiguous=n_ambiguous,
    )


def output_checks(
    y: torch.Tensor,
    y_ref: torch.Tensor,
    bias: torch.Tensor,
    bound: torch.Tensor,
    with_bias: bool,
    path: str,
) -> list[CheckResult]:
    """``finite``, ``bias_applied_once``, ``output_vs_golden``, in this order."""
    reference = y_ref + (bias if with_bias else 0)
    return [
        check_finite("finite", y, "outputs"),
        check_bias_applied_once(y, y_ref, bias, bound, with_bias, path),
        check_within_bound("output_vs_golden", y, reference, bound, f"{path} vs golden"),
    ]


def rounding_checks(
    y: torch.Tensor,
    y_emulated: torch.Tensor | None,
    interval: GemmInterval,
    roundings: int,
    path: str,
    other_operands: str = "",
) -> list[CheckResult]:
    """``rounding_interval`` and ``bits_vs_emulated`` (see the module docstring), the
    linear suite's checks on the loaded layer's accumulation interval."""
    lo, hi = interval.lo, interval.hi
    return [
        check_rounding_interval(y, lo, hi, roundings, path),
        check_bits_vs_emulated(y, y_emulated, lo, hi, roundings, path, other_operands),
    ]
