"""`fp8_nan_codes_read_as_nan`: under it, Triton's interpreter widens the FP8 NaN codes to NaN
and every other code exactly as without it (harness/platform/interpreter_fp8.py).

Runs where triton is installed and the interpreter is on (``scripts/engine.py aiter`` sets
both).
"""

from __future__ import annotations

import os

import pytest
import torch

from harness.core.formats import decode

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip(
        "the interpreter's FP8 widening is checked with TRITON_INTERPRET=1 and triton "
        "installed (python3 scripts/engine.py aiter)",
        allow_module_level=True,
    )
triton = pytest.importorskip("triton", reason="triton is not installed here")
tl = pytest.importorskip("triton.language")

from harness.platform import triton_kernels  # noqa: E402
from harness.platform.interpreter_fp8 import fp8_nan_codes_read_as_nan  # noqa: E402


@triton.jit
def _widen(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=offs < n)


def _interp_widen(codes: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    y = torch.empty(codes.numel(), dtype=dtype)
    _widen[(1,)](codes, y, codes.numel(), BLOCK=triton.next_power_of_2(codes.numel()))
    return y


FP8 = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}
WIDE = (torch.float16, torch.bfloat16, torch.float32)


@pytest.mark.parametrize("wide", WIDE, ids=str)
@pytest.mark.parametrize("fmt", sorted(FP8))
def test_nan_codes_widen_to_nan_and_every_other_code_as_before(fmt: str, wide: torch.dtype) -> None:
    codes = torch.arange(256, dtype=torch.uint8).view(FP8[fmt])
    nan_code = decode(torch.arange(256, dtype=torch.uint8), fmt).isnan()
    own = _interp_widen(codes, wide)
    with fp8_nan_codes_read_as_nan() as seen:
        got = _interp_widen(codes, wide)
    assert seen.count == int(nan_code.sum())
    assert got[nan_code].isnan().all()
    assert torch.equal(got[~nan_code].view(torch.uint8), own[~nan_code].view(torch.uint8))
    assert not own[nan_code].isnan().any(), "the interpreter now knows NaN codes: update docs"
    restored = _interp_widen(codes, wide)
    assert torch.equal(restored.view(torch.uint8), own.view(torch.uint8))


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_dot_with_a_nan_code_gives_nan_in_its_row_only(fmt: str) -> None:
    """tl.dot on FP8 operands: a NaN code in row 1 of A makes row 1 NaN; the other rows are
    the interpreter's own float32 matmul, bit for bit."""
    gen = torch.Generator().manual_seed(3)
    a = (torch.randn(16, 32, generator=gen) * 3).to(FP8[fmt])
    b = (torch.randn(32, 16, generator=gen) * 3).to(FP8[fmt])
    a[1, 5] = torch.tensor(float("nan")).to(FP8[fmt])
    own = triton_kernels.dot(a, b)
    with fp8_nan_codes_read_as_nan() as seen:
        got = triton_kernels.dot(a, b)
    assert seen.count == 1
    assert got[1].isnan().all()
    keep = torch.arange(16) != 1
    assert torch.equal(got[keep], own[keep])
    assert not own[1].isnan().any()
