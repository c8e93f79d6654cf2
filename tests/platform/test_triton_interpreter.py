"""Triton's interpreter's own numerics, established once against the harness's codecs.

These are the simulated platform's numerics (docs/ENGINES-ADAPTERS.md, "The Triton
interpreter's numerics"): what a kernel run under ``TRITON_INTERPRET=1`` gets from the
interpreter rather than from its own source, so that none of it is reported as a kernel bug.
Each test states one fact and fails if a Triton upgrade changes it. They run where triton is
installed and the interpreter is on (``scripts/engine.py aiter`` sets both).
"""

from __future__ import annotations

import os

import pytest
import torch

from harness.core.formats import decode, encode, get_format

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip(
        "the interpreter's numerics are checked with TRITON_INTERPRET=1 and triton installed "
        "(python3 scripts/engine.py aiter)",
        allow_module_level=True,
    )
triton = pytest.importorskip("triton", reason="triton is not installed here")
tl = pytest.importorskip("triton.language")

from harness.platform import triton_kernels  # noqa: E402
from harness.platform.interpreter_fp8 import fp8_nan_codes_read_as_nan  # noqa: E402


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
NAN_CODES_READ_AS = {"e4m3fn": {0x7F: 480.0, 0xFF: -480.0}, "e4m3fnuz": {0x80: 0.0}}


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_interpreter_fp8_decode_is_exact_except_nan_codes(fmt: str) -> None:
    """fp8 -> float32 (a load, `.to`, and tl.dot's operand conversion) gives every finite code
    its exact value; the NaN codes read as numbers (e4m3fn 0x7F/0xFF as +-480, e4m3fnuz 0x80
    as zero): the interpreter's bit conversion knows no NaN encodings."""
    codes = torch.arange(256, dtype=torch.uint8)
    got = _interp_cast(codes.view(FP8[fmt]), torch.float32)
    want = decode(codes, fmt)
    finite = ~want.isnan()
    assert torch.equal(got[finite], want[finite])
    nan_codes = {int(c): float(got[int(c)]) for c in codes[~finite]}
    assert nan_codes == NAN_CODES_READ_AS[fmt]


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_interpreter_fp8_encode_is_not_the_hardware_conversion(fmt: str) -> None:
    """float32 -> fp8 (`.to`): representable values are exact, but ties round away from zero
    (not to even), a mantissa carry can lose its exponent step, and nothing saturates: a kernel
    that converts to FP8 itself cannot be judged bit for bit under the interpreter."""
    spec = get_format(fmt)
    values = decode(torch.arange(256, dtype=torch.uint8), fmt)
    values = values[~values.isnan()].unique()
    assert torch.equal(_interp_cast(values, FP8[fmt]).view(torch.uint8), encode(values, fmt))
    mids = (values[1:] + values[:-1]) / 2
    got = _interp_cast(mids, FP8[fmt]).view(torch.uint8)
    assert (got != encode(mids, fmt)).any(), "ties now round to even: update the docs"
    above = torch.tensor([spec.max_finite * 1.1])
    assert float(_interp_cast(above, FP8[fmt]).float()) != spec.max_finite


def test_interpreter_bf16_output_truncates_and_fp16_rounds_to_nearest() -> None:
    """float32 -> bfloat16 keeps the top 16 bits (round toward zero); float32 -> float16 is
    numpy's round to nearest even: the simulated platform's bf16 outputs are truncated."""
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 100
    truncated = (x.view(torch.int32) & -65536).view(torch.float32).to(torch.bfloat16)
    got = _interp_cast(x, torch.bfloat16)
    assert torch.equal(got.view(torch.int16), truncated.view(torch.int16))
    assert torch.equal(_interp_cast(x, torch.float16), x.to(torch.float16))


def test_interpreter_bf16_to_float32_garbles_subnormals_only() -> None:
    """bfloat16 -> float32 (a load's `.to`): every normal bf16 value exact, every subnormal
    wrong (the significand is normalized, then kept as a subnormal's: 5 * 2^-133 reads as
    2^-128, 2^-127 as 0). A GPU widens exactly; vLLM's MXFP4 quantizer, which loads bf16,
    runs with the exact widening (qharness_vllm.triton_platform.bf16_upcast_exact)."""
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    finite = every[torch.isfinite(every)]
    got = _interp_cast(finite, torch.float32)
    subnormal = (finite != 0) & (finite.float().abs() < 2.0**-126)
    assert torch.equal(got[~subnormal], finite[~subnormal].float())
    assert (got[subnormal] != finite[subnormal].float()).all(), "fixed: update the docs"
    five = torch.tensor([5], dtype=torch.int16).view(torch.bfloat16)
    assert float(_interp_cast(five, torch.float32)) == 2.0**-128


def assert_float32_sum_of_exact_products(
    got: torch.Tensor, a: torch.Tensor, b: torch.Tensor
) -> None:
    """``got`` is a float32 accumulation of ``a @ b`` whose products are exact in float32.

    Only the summation order is left to numpy and the local BLAS (it differs between AVX2
    and AVX-512 builds), so the check is the exact sum in float64 within the recursive
    summation bound for any order: |got - exact| <= gamma_k * (|a| @ |b|), gamma_k =
    k*u / (1 - k*u), u = 2^-24 (Higham, Accuracy and Stability, eq. 3.5). A misapplied
    scale or a wrong code is off by far more than that bound."""
    assert got.dtype == torch.float32
    assert torch.isfinite(got).all()
    a64, b64 = a.double(), b.double()
    k = a.shape[1]
    u = 2.0**-24
    bound = (k * u / (1 - k * u)) * (a64.abs() @ b64.abs())
    error = (got.double() - a64 @ b64).abs()
    assert (error <= bound).all(), float((error - bound).max())


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_interpreter_fp8_dot_is_a_float32_sum_of_exact_products(fmt: str) -> None:
    """tl.dot on fp8 operands: a float32 accumulation of the operands' exact products (the
    summation order is numpy's and the BLAS's, not the MFMA's)."""
    gen = torch.Generator().manual_seed(1)
    a = encode(torch.randn(16, 256, generator=gen) * 3, fmt).view(FP8[fmt])
    b = encode(torch.randn(256, 16, generator=gen) * 3, fmt).view(FP8[fmt])
    got = triton_kernels.dot(a, b)
    assert_float32_sum_of_exact_products(got, a.float(), b.float())


def test_interpreter_dot_scaled_e2m1_scales_operands_then_float32_matmul() -> None:
    """tl.dot_scaled (MXFP4): each element times its E8M0 scale (exact), then a float32
    matmul (numpy's, in the BLAS's summation order)."""
    gen = torch.Generator().manual_seed(2)
    m, n, k = 16, 16, 128
    a = encode(torch.randn(m, k, generator=gen) * 2, "e2m1")
    b = encode(torch.randn(n, k, generator=gen) * 2, "e2m1")
    sa = torch.randint(120, 134, (m, k // 32), generator=gen, dtype=torch.uint8)
    sb = torch.randint(120, 134, (n, k // 32), generator=gen, dtype=torch.uint8)
    from harness.core.formats import e8m0_decode, pack_fp4

    got = triton_kernels.dot_scaled_e2m1(pack_fp4(a), sa, pack_fp4(b), sb)
    av = decode(a, "e2m1") * e8m0_decode(sa).repeat_interleave(32, 1)
    bv = decode(b, "e2m1") * e8m0_decode(sb).repeat_interleave(32, 1)
    assert_float32_sum_of_exact_products(got, av, bv.t())


# ------------------------------------------- FP8 NaN codes read as NaN (simulation)
# `fp8_nan_codes_read_as_nan`: under it the interpreter widens the FP8 NaN codes to NaN and
# every other code exactly as without it (harness/platform/interpreter_fp8.py).
WIDE = (torch.float16, torch.bfloat16, torch.float32)


@pytest.mark.parametrize("wide", WIDE, ids=str)
@pytest.mark.parametrize("fmt", sorted(FP8))
def test_nan_codes_widen_to_nan_and_every_other_code_as_before(fmt: str, wide: torch.dtype) -> None:
    codes = torch.arange(256, dtype=torch.uint8).view(FP8[fmt])
    nan_code = decode(torch.arange(256, dtype=torch.uint8), fmt).isnan()
    own = _interp_cast(codes, wide)
    with fp8_nan_codes_read_as_nan() as seen:
        got = _interp_cast(codes, wide)
    assert seen.count == int(nan_code.sum())
    assert got[nan_code].isnan().all()
    assert torch.equal(got[~nan_code].view(torch.uint8), own[~nan_code].view(torch.uint8))
    assert not own[nan_code].isnan().any(), "the interpreter now knows NaN codes: update docs"
    restored = _interp_cast(codes, wide)
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
