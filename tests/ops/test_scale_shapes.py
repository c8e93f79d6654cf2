"""The scale-shape contract of the native kernels.

torch._scaled_mm takes 0-D scales (tensor-wise) or (M,1)/(1,N) float32 scales (row-wise)
and rejects anything else, 1-D scales included; `scaled_mm_scales` normalizes every shape
that has one meaning and raises `ScaleShapeError` for the rest. F.scaled_mm's block-scaled
kernels have layout contracts of their own (column-major FP8 block scales, swizzled E8M0
MX scales); they do not run on CPU, so their layouts are checked against torch's meta
kernel (the contract torch itself enforces) and against a reading of the contract written
here, which also lets the probes and the native path's glue run end to end.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from harness.core.formats import decode, e8m0_decode, encode, unpack_fp4
from harness.linear.cases import load_linear_case
from harness.linear.paths import get_path
from harness.linear.paths.native import ScaleShapeError, scaled_mm_scales
from harness.ops import block_scaled as block_scaled_mm
from harness.ops.block_scaled import (
    blockwise_1x128_scale,
    blockwise_128x128_scale,
    blockwise_scaled_mm,
    mx_scaled_mm,
    swizzle_32_4_4,
    unswizzle_32_4_4,
)
from harness.platform import capabilities
from harness.platform.info import PlatformInfo

M, N = 6, 4


# --------------------------------------------------------- tensor-wise / row-wise shapes
def _noncontig_vector(n: int) -> torch.Tensor:
    return (torch.arange(2 * n, dtype=torch.float32) + 1)[::2]  # stride 2


def _noncontig_column(n: int) -> torch.Tensor:
    return (torch.arange(3 * n, dtype=torch.float32).reshape(n, 3) + 1)[:, 1:2]  # stride (3, 1)


ACCEPTED: dict[str, tuple[torch.Tensor, torch.Tensor, str]] = {
    "0d_0d": (torch.tensor(2.0), torch.tensor(0.5), "tensorwise"),
    "1x1_1": (torch.tensor([[2.0]]), torch.tensor([0.5]), "tensorwise"),
    "1d_1d": (torch.arange(1.0, M + 1), torch.arange(1.0, N + 1), "rowwise"),
    "col_row": (torch.arange(1.0, M + 1)[:, None], torch.arange(1.0, N + 1)[None, :], "rowwise"),
    "row_col": (torch.arange(1.0, M + 1)[None, :], torch.arange(1.0, N + 1)[:, None], "rowwise"),
    "0d_percol": (torch.tensor(2.0), torch.arange(1.0, N + 1)[:, None], "rowwise"),
    "noncontig_1d": (_noncontig_vector(M), _noncontig_vector(N), "rowwise"),
    "noncontig_2d": (_noncontig_column(M), _noncontig_column(N).t(), "rowwise"),
    "expanded": (torch.tensor(3.0).expand(M, 1), torch.tensor(0.25).expand(1, N), "rowwise"),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_scales_are_normalized(name: str) -> None:
    sa, sb, mode = ACCEPTED[name]
    a, b, got_mode = scaled_mm_scales(sa, sb, M, N)
    assert got_mode == mode
    want_a, want_b = ((), ()) if mode == "tensorwise" else ((M, 1), (1, N))
    assert (tuple(a.shape), tuple(b.shape)) == (want_a, want_b)
    assert a.dtype == b.dtype == torch.float32
    assert a.is_contiguous()
    assert b.is_contiguous()
    # values keep their order: row i of A gets the i-th scale, column j of B the j-th
    assert torch.equal(a.flatten(), sa.float().flatten().expand(a.numel()))
    assert torch.equal(b.flatten(), sb.float().flatten().expand(b.numel()))


REJECTED: dict[str, tuple[torch.Tensor, torch.Tensor]] = {
    "blockwise_grid_a": (torch.ones(M, 2), torch.ones(N)),  # [M, K/128] is not row-wise
    "transposed_grid_b": (torch.ones(M), torch.ones(2, N)),
    "wrong_length": (torch.ones(M + 1), torch.ones(N)),
    "a_given_n": (torch.ones(N), torch.ones(N)),  # M != N: the weight's scales as A's
    "three_d": (torch.ones(1, M, 1), torch.ones(N)),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_ambiguous_scales_are_rejected(name: str) -> None:
    sa, sb = REJECTED[name]
    with pytest.raises(ScaleShapeError, match=r"scale of shape \("):
        scaled_mm_scales(sa, sb, M, N)


def _int_fp8(rows: int, k: int, fmt: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Small-integer FP8 operand (codes viewed as the torch dtype) and its float values."""
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(-3, 4, (rows, k), generator=gen).float()
    dtype = getattr(torch, f"float8_{fmt}")
    return encode(values, fmt).view(dtype), values


def _require(platform: PlatformInfo, cap: str) -> None:
    if not capabilities.has(platform, cap):
        pytest.skip(capabilities.why_not(platform, cap))


def test_scaled_mm_rejects_raw_1d_scales(qh_platform: Any) -> None:
    """Why normalization exists: torch._scaled_mm refuses 1-D per-row scales."""
    _require(qh_platform, "scaled_mm.rowwise.e4m3fn")
    device = qh_platform.torch_device
    a, _ = _int_fp8(16, 32, "e4m3fn", 1)
    b, _ = _int_fp8(16, 32, "e4m3fn", 2)
    with pytest.raises((RuntimeError, ValueError)):
        torch._scaled_mm(
            a.to(device),
            b.to(device).t(),
            scale_a=torch.ones(16, device=device),
            scale_b=torch.ones(16, device=device),
            out_dtype=torch.bfloat16,
        )


def test_normalized_scales_give_the_emulated_result(qh_platform: Any) -> None:
    """The same 1-D scales, normalized, give exactly the float64 product of the operands."""
    _require(qh_platform, "scaled_mm.rowwise.e4m3fn")
    device = qh_platform.torch_device
    a, a_val = _int_fp8(16, 32, "e4m3fn", 3)
    b, b_val = _int_fp8(32, 32, "e4m3fn", 4)
    sa = torch.exp2(torch.arange(16) % 3 - 1.0)  # raw 1-D per-row scales, powers of two
    sb = torch.exp2(torch.arange(32) % 4 - 2.0)
    scale_a, scale_b, mode = scaled_mm_scales(sa, sb, 16, 32)
    assert mode == "rowwise"
    y = torch._scaled_mm(
        a.to(device),
        b.to(device).t(),
        scale_a=scale_a.to(device),
        scale_b=scale_b.to(device),
        out_dtype=torch.float32,
    )
    # Integers times powers of two: every partial sum is exact in float32.
    exact = (a_val.double() * sa.double()[:, None]) @ (b_val.double() * sb.double()[:, None]).t()
    assert torch.equal(y.cpu().double(), exact)


# ---------------------------------------------------------- block-scaled layouts
def test_blockwise_layouts_place_every_scale() -> None:
    grid_a = torch.arange(1.0, 3 * 2 + 1).reshape(3, 2)  # [M=3, K/128=2]
    la = blockwise_1x128_scale(grid_a)
    assert la.shape == (3, 2)
    assert la.stride() == (1, 3)
    assert torch.equal(la, grid_a)
    grid_b = torch.arange(1.0, 2 * 3 + 1).reshape(2, 3)  # [N/128=2, K/128=3]
    lb = blockwise_128x128_scale(grid_b)
    assert lb.shape == (4, 2)
    assert lb.stride() == (1, 4)
    assert torch.equal(lb[:3], grid_b.t())
    assert torch.equal(lb[3], torch.zeros(2))


@pytest.mark.parametrize(("rows", "cols"), [(1, 4), (37, 8), (128, 4), (200, 9)])
def test_swizzle_matches_the_documented_offsets(rows: int, cols: int) -> None:
    """cuBLAS 128x4 tiles: (r, c) -> tile (r//128, c//4), inside (r%32)*16 + (r%128//32)*4 + c%4."""
    grid = torch.arange(rows * cols, dtype=torch.int64).reshape(rows, cols) + 1
    flat = swizzle_32_4_4(grid)
    col_tiles = math.ceil(cols / 4)
    assert flat.numel() == math.ceil(rows / 128) * 128 * col_tiles * 4
    for r in range(rows):
        for c in range(cols):
            tile = (r // 128) * col_tiles + c // 4
            offset = tile * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + c % 4
            assert flat[offset] == grid[r, c], (r, c)
    assert int((flat == 0).sum()) == flat.numel() - rows * cols  # padding is zero
    assert torch.equal(unswizzle_32_4_4(flat, rows, cols), grid)


def _meta(shape: tuple[int, ...], dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize(("m", "n", "k"), [(8, 128, 256), (37, 256, 128), (1, 128, 512)])
def test_blockwise_layout_meets_torch_contract(m: int, n: int, k: int) -> None:
    """torch's meta kernel checks shapes and strides of the block-scaled call."""
    out = blockwise_scaled_mm(
        _meta((m, k)),
        _meta((m, k // 128), torch.float32),
        _meta((n, k)),
        _meta((n // 128, k // 128), torch.float32),
        "e4m3fn",
        torch.bfloat16,
    )
    assert out.shape == (m, n)


def test_torch_contract_rejects_unpadded_weight_scales() -> None:
    """The meta check is a real check: B scales without the L4 padding are refused."""
    dtype = torch.float8_e4m3fn
    with pytest.raises(RuntimeError, match="blockwise"):
        F.scaled_mm(
            _meta((8, 256), dtype),
            _meta((128, 256), dtype).t(),
            _meta((2, 8), torch.float32).t(),
            F.ScalingType.BlockWise1x128,
            _meta((1, 2), torch.float32).t(),  # [K/128=2, N/128=1], not padded to 4
            F.ScalingType.BlockWise128x128,
            F.SwizzleType.NO_SWIZZLE,
            F.SwizzleType.NO_SWIZZLE,
        )


@pytest.mark.skipif(bool(torch.version.hip), reason="meta checks the ROCm MX layout on ROCm")
@pytest.mark.parametrize(("m", "n", "k"), [(8, 16, 256), (37, 144, 128), (1, 16, 32)])
def test_mxfp8_layout_meets_torch_contract(m: int, n: int, k: int) -> None:
    """(The meta kernel sizes MXFP4 scales from the packed K, so only MXFP8 is checked.)"""
    out = mx_scaled_mm(
        _meta((m, k)), _meta((m, k // 32)), _meta((n, k)), _meta((n, k // 32)), "e4m3fn",
        torch.bfloat16,
    )  # fmt: skip
    assert out.shape == (m, n)


# ------------------------------------------- the contract, read independently, on CPU
def _unswizzle(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    col_tiles = math.ceil(cols / 4)
    r = torch.arange(rows)[:, None]
    c = torch.arange(cols)[None, :]
    offset = ((r // 128) * col_tiles + c // 4) * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + c % 4
    return flat[offset]


def _operand_values(t: torch.Tensor) -> torch.Tensor:
    """Float values of an FP8 or packed-FP4 kernel operand (rows, K)."""
    if t.dtype == torch.float4_e2m1fn_x2:
        return decode(unpack_fp4(t.view(torch.uint8)), "e2m1").double()
    return t.float().double()


def contract_scaled_mm(
    mat_a: torch.Tensor,
    mat_b: torch.Tensor,
    scale_a: torch.Tensor,
    recipe_a: F.ScalingType,
    scale_b: torch.Tensor,
    recipe_b: F.ScalingType,
    swizzle_a: F.SwizzleType,
    swizzle_b: F.SwizzleType,
    output_dtype: torch.dtype = torch.bfloat16,
    **unused: Any,
) -> torch.Tensor:
    """What F.scaled_mm computes, per its documented contract (CUDA layouts)."""
    a = _operand_values(mat_a)  # [M, K]
    b = _operand_values(mat_b.t())  # [N, K]
    m, k, n = a.shape[0], a.shape[1], b.shape[0]
    if recipe_a == F.ScalingType.BlockWise1x128:
        assert recipe_b == F.ScalingType.BlockWise128x128
        assert scale_a.shape == (m, k // 128)
        assert scale_a.stride() == (1, m)
        l4 = math.ceil(k // 128 / 4) * 4
        assert scale_b.shape == (l4, n // 128)
        assert scale_b.stride() == (1, l4)
        full_a = scale_a.double().repeat_interleave(128, 1)
        full_b = scale_b[: k // 128].t().double().repeat_interleave(128, 0)
        full_b = full_b.repeat_interleave(128, 1)
    else:
        assert recipe_a == recipe_b == F.ScalingType.BlockWise1x32
        assert swizzle_a == swizzle_b == F.SwizzleType.SWIZZLE_32_4_4
        sa = e8m0_decode(_unswizzle(scale_a.view(torch.uint8), m, k // 32))
        sb = e8m0_decode(_unswizzle(scale_b.view(torch.uint8), n, k // 32))
        full_a = sa.double().repeat_interleave(32, 1)
        full_b = sb.double().repeat_interleave(32, 1)
    return ((a * full_a) @ (b * full_b[:n, :k]).t()).to(output_dtype)


@pytest.fixture
def contract_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(block_scaled_mm, "torch_backend", lambda: "cuda")  # CUDA layouts
    monkeypatch.setattr(block_scaled_mm.F, "scaled_mm", contract_scaled_mm)


@pytest.mark.usefixtures("contract_kernel")
@pytest.mark.parametrize(
    "cap", ["scaled_mm.blockwise.e4m3fn", "scaled_mm.mx.e4m3fn", "scaled_mm.mx.e2m1"]
)
def test_probes_pass_on_a_kernel_that_keeps_the_contract(cap: str) -> None:
    capabilities.PROBES[cap](torch.device("cpu"))


@pytest.mark.usefixtures("contract_kernel")
def test_probe_catches_a_transposed_scale_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layout bug (B's block grid passed row-major) makes the probe fail, not pass."""
    monkeypatch.setattr(
        block_scaled_mm,
        "blockwise_128x128_scale",
        lambda grid: torch.nn.functional.pad(grid.float(), (0, 0, 0, 2)).t().contiguous().t(),
    )
    with pytest.raises(AssertionError, match="wrong result"):
        capabilities.PROBES["scaled_mm.blockwise.e4m3fn"](torch.device("cpu"))


@pytest.mark.usefixtures("contract_kernel")
@pytest.mark.parametrize("scheme", ["fp8_per_block", "w_mxfp8_a_mxfp8", "w_mxfp4_a_mxfp4@rceil"])
def test_native_block_scaled_glue_matches_emulated(scheme: str, golden_store: Any) -> None:
    """The native path's block-scaled forward (grids, packing, bias epilogue) on a contract
    kernel equals the emulated path: both compute the same exact product, rounded to bf16
    (the native one twice, around its bias epilogue, hence the two-rounding allowance)."""
    shape = (8, 128, 256)
    loaded = load_linear_case(golden_store.load(f"linear/{scheme}"), scheme, shape, bias=True)
    native = get_path("native").forward(loaded.layer, loaded.x, torch.bfloat16).double()
    emulated = get_path("emulated").forward(loaded.layer, loaded.x, torch.float32).double()
    no_bias = loaded.y_ref.double()  # exact product of the quantized operands, no bias
    # native: bf16(bf16(P) + b); emulated: fp32(P + b). Roundings: u_bf16 |P| before the
    # bias, u_bf16 |P + b| after it, plus float32 noise (u_f32 |P| per K-term sum, tiny).
    u, u32, k = 2.0**-8, 2.0**-24, shape[2]
    bound = u * no_bias.abs() + u * emulated.abs() + (k + 1) * u32 * (no_bias.abs() + 2)
    assert bool(((native - emulated).abs() <= bound).all())
    assert not torch.equal(native, torch.zeros_like(native))
