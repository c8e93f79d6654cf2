"""The aiter adapter's replacement of the interpreter's float32 -> FP8 conversion.

`fp8_conversion_rounded_to_nearest_even` must round every value (representable ones and
every midpoint between neighbours) as the harness's codec rounds them (ties to even), count
what it converted, touch no other conversion, and restore the interpreter's own conversion
on exit. Runs where triton is
installed with the interpreter on (``python3 scripts/engine.py aiter``).
"""

from __future__ import annotations

import os

import pytest
import torch

from harness.core.formats import decode, encode

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip(
        "the interpreter's conversions are checked with TRITON_INTERPRET=1 and triton "
        "installed (python3 scripts/engine.py aiter)",
        allow_module_level=True,
    )
triton = pytest.importorskip("triton", reason="triton is not installed here")
tl = pytest.importorskip("triton.language")
interpreter = pytest.importorskip(
    "qharness_aiter.interpreter", reason="aiter adapter not installed (scripts/engine.py aiter)"
)


@triton.jit
def _cast(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=offs < n)


def _interp_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    y = torch.empty(x.numel(), dtype=dtype)
    _cast[(1,)](x.contiguous(), y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y


FP8 = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_interpreter_fp8_conversion_replaced_rounds_ties_to_even(fmt: str) -> None:
    values = decode(torch.arange(256, dtype=torch.uint8), fmt)
    values = values[~values.isnan()].unique()
    mids = (values[1:] + values[:-1]) / 2  # every tie between neighbours
    x = torch.cat([values, mids])
    with interpreter.fp8_conversion_rounded_to_nearest_even() as seen:
        got = _interp_cast(x, FP8[fmt]).view(torch.uint8)
        bf16 = _interp_cast(torch.tensor([1.0 + 2.0**-9]), torch.bfloat16)  # not replaced
    assert torch.equal(got, encode(x, fmt))
    # the block is a power of two: the masked-off lanes are converted too
    assert seen.count == triton.next_power_of_2(x.numel())
    assert float(bf16) == 1.0  # the interpreter's truncation, untouched
    outside = _interp_cast(mids, FP8[fmt]).view(torch.uint8)
    assert (outside != encode(mids, fmt)).any(), "restored: the interpreter's own rounding"
