"""Running an aiter kernel under Triton's interpreter: ``tl.assume`` as a hint, not an
assert, and float32 -> FP8 conversions rounded to nearest even as Triton's RTNE conversion
specifies (`fp8_conversion_rounded_to_nearest_even`, the harness's, re-exported here).

On a GPU, ``tl.assume(cond)`` is a compiler hint (``llvm.assume``); the interpreter asserts
it. aiter's split-K GEMM wrappers pass ``stride_ck = 0`` when ``NUM_KSPLIT == 1`` to kernels
that assume ``stride_ck > 0``, and their reduce kernels assume ``pid_m > 0`` for program 0
(docs/ENGINE-FINDINGS.md, "aiter: tl.assume contradicted by its own launch arguments"). So
that the interpreter checks the arithmetic rather than stopping there, `assume_as_hint`
counts false assumptions instead of raising, for the duration of one aiter call, on a
simulated platform only. The count is returned, so it is recorded, not hidden.

Triton 3.9's ``tensor.__getitem__`` rejects a full slice once the source tensor's rank is
used up, not counting dimensions a preceding ``None`` added, so ``pid[None, :]`` on a scalar
program id raises "too many indices for tensor of rank 0"; Triton gave such an index shape
[1] before (triton-lang/triton#6122) and its own fix in review keeps ``scalar[None, :]``
valid ("a preceding None creates a dimension consumed by a later full slice",
triton-lang/triton#10429). aiter's ``fp4_utils`` MXFP4 kernel indexes its scalar column
this way. `none_then_slice_indexing` restores that rule for one call on a simulated
platform (only full slices a None made room for are accepted; anything 3.9 rejects
otherwise still raises), and counts the indexes it let through.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from harness import fp8_conversion_rounded_to_nearest_even

__all__ = [
    "FalseAssumptions",
    "NoneThenSlice",
    "assume_as_hint",
    "fp8_conversion_rounded_to_nearest_even",
    "none_then_slice_indexing",
]


@dataclass
class FalseAssumptions:
    count: int = 0


@contextmanager
def assume_as_hint() -> Iterator[FalseAssumptions]:
    """Inside: the interpreter's ``create_assume`` counts false conditions, never raises."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    seen = FalseAssumptions()
    original = builder.create_assume

    def create_assume(condition: Any) -> None:
        if not bool(getattr(condition, "data", condition).all()):
            seen.count += 1

    builder.create_assume = create_assume
    try:
        yield seen
    finally:
        builder.create_assume = original


@dataclass
class NoneThenSlice:
    count: int = 0  # indexes 3.9 rejects whose full slices a preceding None made room for


@contextmanager
def none_then_slice_indexing() -> Iterator[NoneThenSlice]:
    """Inside: ``tl.tensor[...]`` accepts a full slice over a dimension a preceding ``None``
    added (``scalar[None, :]`` has shape [1]); every other index as Triton 3.9 has it."""
    from triton.language import core

    seen = NoneThenSlice()
    original = core.tensor.__getitem__

    @core.builtin
    def getitem(self: Any, slices: Any, _semantic: Any = None) -> Any:
        if isinstance(slices, (slice, core.slice, core.constexpr)) or slices is None:
            slices = [slices]
        if isinstance(slices, core.tuple):
            slices = slices.values
        ret, rank, indexed, relied = self, len(self.shape), 0, False
        for dim, sl in enumerate(slices):
            if core._unwrap_if_constexpr(sl) is None:
                scalar = not ret.type.is_block()
                ret = _semantic.expand_dims(ret, dim)
                if scalar and ret.dtype == core.int1:  # the interpreter splats int1 as int32
                    ret.handle.data = ret.handle.data.astype(bool)
                rank += 1
            elif isinstance(sl, (slice, core.slice)) and all(
                core._unwrap_if_constexpr(a) is None for a in (sl.start, sl.stop, sl.step)
            ):
                indexed += 1
                if indexed > rank:
                    raise ValueError(f"too many indices for tensor of rank {len(self.shape)}")
                relied |= indexed > len(self.shape)
            else:
                raise ValueError(f"unsupported tensor index: {sl}")
        seen.count += relied
        return ret

    core.tensor.__getitem__ = getitem
    try:
        yield seen
    finally:
        core.tensor.__getitem__ = original
