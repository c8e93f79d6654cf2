"""Grouped-GEMM outputs checked element by element where the error bound fixes the result.

A grouped GEMM accumulates in float32 (then any float32 scale epilogue) and rounds once to
its output dtype. For one output element let c be the exact product of the operands as the
kernel multiplies them and r the bound on |accumulator - c| (Higham Thm 3.5 gamma_K, the
epilogue roundings, plus the float64 error of evaluating c). Every float32 accumulator in
[c - r, c + r] lies in [lo32, hi32], the float32 values nearest c - r and c + r from
inside, and rounds (monotonically) into [round(lo32), round(hi32)]. Where the two ends
round to one value the bound *determines* the output: any kernel that keeps its declared
numerics returns exactly that value.

A path and the reference are compared bit for bit only on rows where they multiply
identical operands (the same intermediate codes, and an operand rounding that changes
nothing); elsewhere their results legitimately differ and only each one's own interval
applies.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.core.checks import Offender, first_offender
from harness.moe.bounds import bias_terms, row_products
from harness.paths.base import Numerics
from harness.paths.bounds import GemmInterval, gemm_interval, operands_as_multiplied


def grouped_gemm_interval(
    a: torch.Tensor,
    w: torch.Tensor,
    row_experts: torch.Tensor,
    numerics: Numerics,
    also: tuple[Numerics, ...] = (),
    bias: torch.Tensor | None = None,
) -> GemmInterval:
    """Interval of a_r @ W_e^T as ``numerics`` computes and rounds it (the one GEMM bound,
    `harness.paths.bounds`): K float32 roundings per term, no bias, a float64 sum of K
    terms for the center. The radius is the largest of ``numerics`` and ``also`` (so a
    second path multiplying the same operands is inside it too)."""
    exact, abs_product = row_products(
        operands_as_multiplied(a, numerics), operands_as_multiplied(w, numerics), row_experts, bias
    )
    k = int(a.shape[1]) + bias_terms(bias)  # a bias: one more term, one more rounding
    return gemm_interval(exact, abs_product, numerics, k, k, also)


@dataclass(frozen=True)
class GemmAgreement:
    """What one GEMM's output check found (counts of elements)."""

    elements: int
    outside_own: int  # the path's outputs outside the interval of its own operands
    comparable: int  # elements on rows where path and reference multiply identical operands
    determined: int  # comparable elements whose rounded value the bound fixes
    mismatched: int  # determined, and the path differs from the reference's rounded value
    reference_outside: int  # comparable, the reference's rounded value outside the interval
    # The first element (row-major) of each kind above, for the failure message.
    first_outside_own: Offender | None = None
    first_mismatched: Offender | None = None
    first_reference_outside: Offender | None = None

    @property
    def offender(self) -> Offender | None:
        """The first offending element of the first kind that has one."""
        found = (self.first_outside_own, self.first_mismatched, self.first_reference_outside)
        return next((o for o in found if o is not None), None)

    @property
    def ok(self) -> bool:
        return self.outside_own == 0 and self.mismatched == 0 and self.reference_outside == 0

    def describe(self) -> str:
        return (
            f"{self.outside_own} of {self.elements} outside its own rounded interval; "
            f"{self.mismatched} of {self.determined} determined elements differ from the "
            f"reference; {self.reference_outside} of {self.comparable} comparable reference "
            "values outside the interval"
        )


def gemm_agreement(
    y: torch.Tensor,
    a: torch.Tensor,
    w: torch.Tensor,
    row_experts: torch.Tensor,
    numerics: Numerics,
    reference: tuple[torch.Tensor, torch.Tensor, Numerics] | None = None,
    bias: torch.Tensor | None = None,
) -> GemmAgreement:
    """Check output ``y`` of a_r @ W_e^T under ``numerics``; with ``reference`` = (its output,
    its left operand, its numerics), also bit-for-bit agreement where determined and the
    reference's rounded values inside the interval, on rows with identical operands."""
    also = () if reference is None else (reference[2],)
    interval = grouped_gemm_interval(a, w, row_experts, numerics, also, bias)
    bounds = (interval.lo, interval.hi)
    outside = ~interval.contains(y)
    outside_own = int(outside.sum())
    first_outside = first_offender(outside, y, bounds)
    if reference is None:
        return GemmAgreement(y.numel(), outside_own, 0, 0, 0, 0, first_outside)
    y_ref, a_ref, ref_numerics = reference
    same_w = (numerics.round_operand(w) == ref_numerics.round_operand(w)).flatten(1).all(1)
    same_a = (numerics.round_operand(a) == ref_numerics.round_operand(a_ref)).all(1)
    comparable = (same_a & same_w[row_experts])[:, None].expand_as(y)
    ref_rounded = numerics.round_output(y_ref)
    determined = comparable & interval.determined
    mismatched = determined & ~(y == ref_rounded)  # +0 == -0; NaN never
    reference_outside = comparable & ~interval.contains(ref_rounded)
    return GemmAgreement(
        elements=y.numel(),
        outside_own=outside_own,
        comparable=int(comparable.sum()),
        determined=int(determined.sum()),
        mismatched=int(mismatched.sum()),
        reference_outside=int(reference_outside.sum()),
        first_outside_own=first_outside,
        first_mismatched=first_offender(mismatched, y, ref_rounded),
        first_reference_outside=first_offender(reference_outside, ref_rounded, bounds),
    )
