"""Triton's interpreter: the conversions vLLM's FP8 Triton kernels use, checked against torch.

    TRITON_INTERPRET=1 python scripts/vllm_triton/interpreter_conversions.py

Imports only torch and triton. Checks (1) every FP8 code (e4m3fn, e4m3fnuz) loaded and
converted to float32, and (2) multiplied by 1.0 in ``tl.dot``, against torch's decode; (3)
float32 -> bfloat16 and float16 by ``.to()``, by ``.to(..., fp_downcast_rounding="rtne")``
and by ``tl.store``'s implicit conversion, against torch's round to nearest even. Measured
with triton 3.9.0, torch 2.13.0: FP8 decode exact for every finite code (the NaN codes decode
as 480 / -480 (e4m3fn 0x7F / 0xFF) and -0 (e4m3fnuz 0x80)); float16 exact; bfloat16
truncated (round toward zero) in all three forms, about half of random values differ from
round to nearest even. A GPU rounds to nearest even: the interpreter's bf16 results are an
artifact of the interpreter, never a kernel's finding.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
import triton
import triton.language as tl


@triton.jit
def _to_f32(src, dst, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(dst + o, tl.load(src + o).to(tl.float32))


@triton.jit
def _dot_first(a_ptr, b_ptr, c_ptr):  # c = a @ b on 16x32 x 32x16 tiles
    r = tl.arange(0, 16)
    k = tl.arange(0, 32)
    a = tl.load(a_ptr + r[:, None] * 32 + k[None, :])
    b = tl.load(b_ptr + k[:, None] * 16 + r[None, :])
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))


@triton.jit
def _down(src, dst, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(dst + o, tl.load(src + o).to(dst.dtype.element_ty))


@triton.jit
def _down_rtne(src, dst, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(dst + o, tl.load(src + o).to(dst.dtype.element_ty, fp_downcast_rounding="rtne"))


@triton.jit
def _store(src, dst, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(dst + o, tl.load(src + o))


def _same(a: float, b: float) -> bool:
    return a == b or (a != a and b != b)


def fp8_decode() -> None:
    for dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        codes = torch.arange(256, dtype=torch.uint8)
        out = torch.empty(256, dtype=torch.float32)
        _to_f32[(1,)](codes.view(dtype), out, N=256)
        ref = codes.view(dtype).float()
        bad = [
            (c, r, d)
            for c, r, d in zip(codes.tolist(), ref.tolist(), out.tolist(), strict=True)
            if not _same(r, d)
        ]
        print(f"{dtype}: load + convert differs from torch on {len(bad)} codes {bad}")
        one = int(torch.tensor(1.0).to(dtype).view(torch.uint8))
        bad = []
        for c in range(256):
            a = torch.zeros(16, 32, dtype=torch.uint8)
            a[0, 0] = c
            b = torch.zeros(32, 16, dtype=torch.uint8)
            b[0, 0] = one
            c_out = torch.empty(16, 16, dtype=torch.float32)
            _dot_first[(1,)](a.view(dtype), b.view(dtype), c_out)
            r = float(ref[c])
            if not _same(r, float(c_out[0, 0])):
                bad.append((c, r, float(c_out[0, 0])))
        print(f"{dtype}: tl.dot(code, 1.0) differs from torch on {len(bad)} codes {bad}")


def fp8_encode() -> None:
    """float32 -> FP8 by ``.to()``: every finite FP8 value, the midpoints between neighbours
    (ties) and points a quarter of the way, against torch's round to nearest even."""
    for dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        values = torch.arange(256, dtype=torch.uint8).view(dtype).float()
        values = values[values.isfinite() & (values > 0)].sort().values
        mids = (values[:-1] + values[1:]) / 2
        quarter = values[:-1] + (values[1:] - values[:-1]) / 4
        x = torch.cat([values, mids, quarter, -values, -mids])
        n = 1 << (x.numel() - 1).bit_length()
        padded = torch.cat([x, torch.ones(n - x.numel())])
        out = torch.empty(n, dtype=dtype)
        _down[(1,)](padded, out, N=n)
        got, ref = out[: x.numel()].float(), x.to(dtype).float()
        kinds = {
            "exact values": slice(0, len(values)),
            "ties": slice(len(values), len(values) + len(mids)),
            "quarter points": slice(len(values) + len(mids), len(values) + 2 * len(mids)),
        }
        for kind, part in kinds.items():
            bad = (got[part] != ref[part]).nonzero().flatten()
            xs, gs = x[part], got[part]
            lost = [(xs[i].item(), gs[i].item()) for i in bad.tolist() if gs[i] < xs[i] / 1.5]
            print(
                f"float32 -> {dtype} by to(), {kind}: {bad.numel()}/{xs.numel()} differ from "
                f"torch; {len(lost)} of them land in the binade below, e.g. {lost[:3]}"
            )


def downcasts() -> None:
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 1000
    for dtype in (torch.bfloat16, torch.float16):
        for name, kernel in (("to()", _down), ("to(rtne)", _down_rtne), ("tl.store", _store)):
            out = torch.empty(4096, dtype=dtype)
            kernel[(1,)](x, out, N=4096)
            nearest = (out != x.to(dtype)).sum().item()
            line = f"float32 -> {dtype} by {name}: differs from nearest-even in {nearest}/4096"
            if dtype == torch.bfloat16:
                truncated = (x.view(torch.int32) & ~0xFFFF).view(torch.float32).to(dtype)
                line += f"; equals truncation in {(out == truncated).sum().item()}/4096"
            print(line)


if __name__ == "__main__":
    print(f"triton {triton.__version__}, torch {torch.__version__}")
    fp8_decode()
    fp8_encode()
    downcasts()
