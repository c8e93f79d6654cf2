"""How a recomputed golden differs from the stored one, one line per tensor.

Exact tensors must match bit for bit; reference tensors (float64 sums rounded to float32)
may move by `REFERENCE_ULP_ALLOWANCE` float32 ULPs and no more.
"""

from __future__ import annotations

import torch

from harness.store.golden_registry import GoldenData


def _float32_ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """ULP distance between float32 tensors via their ordered integer images."""
    ia = a.float().contiguous().view(torch.int32).long()
    ib = b.float().contiguous().view(torch.int32).long()
    ia = torch.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return (ia - ib).abs()


# Reference tensors are float64 sums rounded to float32; another BLAS may sum in another
# order and flip the float32 rounding by one ULP. More than that is a real change.
REFERENCE_ULP_ALLOWANCE = 1


def diff_tensors(name: str, old: torch.Tensor, new: torch.Tensor, reference: bool) -> str | None:
    """One line describing how ``new`` differs from ``old``, or None when equal."""
    if old.shape != new.shape or old.dtype != new.dtype:
        return (
            f"{name}: shape/dtype {tuple(old.shape)} {old.dtype} -> {tuple(new.shape)} {new.dtype}"
        )
    if reference:
        ulps = _float32_ulp_distance(old, new)
        if int(ulps.max()) <= REFERENCE_ULP_ALLOWANCE if ulps.numel() else True:
            return None
        err = (old.double() - new.double()).abs().max().item()
        return (
            f"{name}: reference moved, max {int(ulps.max())} float32 ULPs, max abs diff {err:.3g} "
            f"(old max|x| {old.double().abs().max().item():.6g}, "
            f"new {new.double().abs().max().item():.6g})"
        )
    from harness.core.compare import bit_mismatches

    n = bit_mismatches(new, old)
    if n == 0:
        return None
    if old.is_floating_point():
        detail = (
            f"max|x| old {old.double().abs().max().item():.6g} new "
            f"{new.double().abs().max().item():.6g}"
        )
    else:
        detail = f"sum old {int(old.long().sum())} new {int(new.long().sum())}"
    return f"{name}: {n}/{new.numel()} elements differ bit-wise ({detail})"


def diff_data(old: GoldenData, new: GoldenData) -> list[str]:
    """One line per tensor removed, added or changed between ``old`` and ``new``."""
    lines: list[str] = []
    old_t, new_t = old.tensors, new.tensors
    for name in sorted(set(old_t) - set(new_t)):
        lines.append(f"{name}: removed")
    for name in sorted(set(new_t) - set(old_t)):
        lines.append(f"{name}: added {tuple(new_t[name].shape)} {new_t[name].dtype}")
    for name in sorted(set(old_t) & set(new_t)):
        line = diff_tensors(name, old_t[name], new_t[name], name in new.reference)
        if line:
            lines.append(line)
    return lines
