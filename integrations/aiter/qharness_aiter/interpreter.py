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
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from harness import fp8_conversion_rounded_to_nearest_even

__all__ = ["FalseAssumptions", "assume_as_hint", "fp8_conversion_rounded_to_nearest_even"]


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
