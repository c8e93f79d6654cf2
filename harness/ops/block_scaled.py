"""Block-scaled GEMMs through ``torch.nn.functional.scaled_mm``: scale layouts and calls.

Two families, each with its own scale contract (torch 2.13, checked by its meta kernel):

- FP8 block scaling, activations 1x128 (``BlockWise1x128``) times weights 128x128
  (``BlockWise128x128``), float32 scales. A's scales are [M, K/128] in column-major
  order (stride (1, M)); B's are [L4, N/128] column-major (stride (1, L4)) with the K-block
  count padded to L4 = round_up(K/128, 4). N and K must be multiples of 128.
- OCP MX (``BlockWise1x32``), E8M0 scales (``float8_e8m0fnu``), one per 32 elements of a
  row along K. On CUDA (cuBLAS) the [rows, K/32] grid is padded to multiples of (128, 4)
  and swizzled into 128x4 tiles (``SWIZZLE_32_4_4``); on ROCm it is passed row-major,
  unswizzled. FP4 operands are packed two per byte (``float4_e2m1fn_x2``, element 0 in the
  low nibble).

Callers hand over the harness's own representation (uint8 codes [rows, K], scale grids as
`harness.core.quantize` makes them); everything kernel-specific happens here, so the capability
probes and the native path run exactly the same code. None of these kernels exist on CPU:
they are reached only after a probe found them working.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from harness.core.formats import get_format, pack_fp4

_SWIZZLE_ROWS, _SWIZZLE_COLS = 128, 4  # cuBLAS block-scaling-factor tile


def _round_up(n: int, multiple: int) -> int:
    return math.ceil(n / multiple) * multiple


# ------------------------------------------------------------------ FP8 1x128 x 128x128
def _column_major(rows: int, cols: int, device: torch.device) -> torch.Tensor:
    """Zeros of shape (rows, cols) with strides (1, rows), as the contract spells them out
    (``.t().contiguous().t()`` keeps row-major strides when a dimension is 1)."""
    return torch.zeros(rows * cols, dtype=torch.float32, device=device).as_strided(
        (rows, cols), (1, max(rows, 1))
    )


def blockwise_1x128_scale(grid: torch.Tensor) -> torch.Tensor:
    """[M, K/128] activation scales -> the same values, column-major (stride (1, M))."""
    out = _column_major(grid.shape[0], grid.shape[1], grid.device)
    out.copy_(grid)
    return out


def blockwise_128x128_scale(grid: torch.Tensor) -> torch.Tensor:
    """[N/128, K/128] weight scales -> [L4, N/128] column-major, K blocks padded to 4."""
    n_blocks, k_blocks = grid.shape
    out = _column_major(_round_up(k_blocks, 4), n_blocks, grid.device)
    out[:k_blocks].copy_(grid.t())
    return out


def blockwise_scaled_mm(
    a_codes: torch.Tensor,
    a_scale: torch.Tensor,
    b_codes: torch.Tensor,
    b_scale: torch.Tensor,
    fmt: str,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """y = (A * a_scale) @ (B * b_scale)^T with A [M,K] in 1x128 and B [N,K] in 128x128 tiles.

    ``a_codes``/``b_codes`` are uint8 FP8 codes of format ``fmt``; ``a_scale`` [M, K/128]
    and ``b_scale`` [N/128, K/128] are float32 scale grids.
    """
    dtype = get_format(fmt).to_torch_dtype()
    return F.scaled_mm(
        a_codes.view(dtype),
        b_codes.view(dtype).t(),
        blockwise_1x128_scale(a_scale),
        F.ScalingType.BlockWise1x128,
        blockwise_128x128_scale(b_scale),
        F.ScalingType.BlockWise128x128,
        F.SwizzleType.NO_SWIZZLE,
        F.SwizzleType.NO_SWIZZLE,
        output_dtype=out_dtype,
    )


# ------------------------------------------------------------------------------- MX
def swizzle_32_4_4(grid: torch.Tensor) -> torch.Tensor:
    """[R, C] scale grid -> cuBLAS's flat 128x4-tiled layout (zero-padded to (128, 4)).

    Tiles of 128 rows x 4 columns are stored one after another, row-tiles outer; inside a
    tile, element (r, c) sits at (r % 32) * 16 + (r // 32) * 4 + c.
    """
    rows, cols = grid.shape
    padded_rows, padded_cols = _round_up(rows, _SWIZZLE_ROWS), _round_up(cols, _SWIZZLE_COLS)
    padded = torch.zeros(padded_rows, padded_cols, dtype=grid.dtype, device=grid.device)
    padded[:rows, :cols] = grid
    tiles = padded.reshape(
        padded_rows // _SWIZZLE_ROWS, _SWIZZLE_ROWS, padded_cols // _SWIZZLE_COLS, _SWIZZLE_COLS
    ).permute(0, 2, 1, 3)  # [row tile, col tile, 128, 4]
    # row r = 32 * q + p inside a tile; the layout wants (p, q, c): offset p*16 + q*4 + c.
    inner = tiles.reshape(*tiles.shape[:2], 4, 32, _SWIZZLE_COLS).transpose(2, 3)
    return inner.contiguous().flatten()


def swizzled_size(rows: int, cols: int) -> int:
    """Elements of the swizzled layout of an [R, C] grid: the grid padded to (128, 4)."""
    return _round_up(rows, _SWIZZLE_ROWS) * _round_up(cols, _SWIZZLE_COLS)


def unswizzle_32_4_4(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of `swizzle_32_4_4`: the [R, C] grid back, padding dropped."""
    if flat.numel() != swizzled_size(rows, cols):
        raise ValueError(
            f"swizzled MX scales hold {flat.numel()} elements, expected "
            f"{swizzled_size(rows, cols)} for a ({rows}, {cols}) scale grid"
        )
    row_tiles = _round_up(rows, _SWIZZLE_ROWS) // _SWIZZLE_ROWS
    col_tiles = _round_up(cols, _SWIZZLE_COLS) // _SWIZZLE_COLS
    inner = flat.reshape(row_tiles, col_tiles, 32, 4, _SWIZZLE_COLS).transpose(2, 3)
    tiles = inner.reshape(row_tiles, col_tiles, _SWIZZLE_ROWS, _SWIZZLE_COLS).permute(0, 2, 1, 3)
    return tiles.reshape(row_tiles * _SWIZZLE_ROWS, col_tiles * _SWIZZLE_COLS)[:rows, :cols]


def _mx_scale_cuda(codes: torch.Tensor) -> tuple[torch.Tensor, F.SwizzleType]:
    return swizzle_32_4_4(codes).view(torch.float8_e8m0fnu), F.SwizzleType.SWIZZLE_32_4_4


def _mx_scale_rocm(codes: torch.Tensor) -> tuple[torch.Tensor, F.SwizzleType]:
    return codes.contiguous().view(torch.float8_e8m0fnu), F.SwizzleType.NO_SWIZZLE


# torch backend -> E8M0 scale layout its MX kernels take.
MX_SCALE_LAYOUTS: dict[str, Callable[[torch.Tensor], tuple[torch.Tensor, F.SwizzleType]]] = {
    "cuda": _mx_scale_cuda,
    "rocm": _mx_scale_rocm,
}


def torch_backend() -> str:
    """The GPU backend this torch build targets (decides kernel-specific layouts)."""
    return "rocm" if torch.version.hip else "cuda"


def _fp8_operand(codes: torch.Tensor, fmt: str) -> torch.Tensor:
    return codes.view(get_format(fmt).to_torch_dtype())


def _fp4_operand(codes: torch.Tensor, fmt: str) -> torch.Tensor:
    return pack_fp4(codes).view(torch.float4_e2m1fn_x2)


# element format -> how its [rows, K] uint8 codes become a kernel operand.
MX_OPERANDS: dict[str, Callable[[torch.Tensor, str], torch.Tensor]] = {
    "e4m3fn": _fp8_operand,
    "e2m1": _fp4_operand,
}


def mx_scaled_mm(
    a_codes: torch.Tensor,
    a_scale_codes: torch.Tensor,
    b_codes: torch.Tensor,
    b_scale_codes: torch.Tensor,
    fmt: str,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """y = (A * 2^a_scale) @ (B * 2^b_scale)^T for MX operands A [M,K], B [N,K] of ``fmt``.

    Scales are uint8 E8M0 codes on the [rows, K/32] block grid.
    """
    try:
        operand = MX_OPERANDS[fmt]
    except KeyError:
        raise ValueError(
            f"no MX kernel operand for element format {fmt!r}; known: {sorted(MX_OPERANDS)}"
        ) from None
    layout = MX_SCALE_LAYOUTS[torch_backend()]
    scale_a, swizzle_a = layout(a_scale_codes)
    scale_b, swizzle_b = layout(b_scale_codes)
    return F.scaled_mm(
        operand(a_codes, fmt),
        operand(b_codes, fmt).t(),
        scale_a,
        F.ScalingType.BlockWise1x32,
        scale_b,
        F.ScalingType.BlockWise1x32,
        swizzle_a,
        swizzle_b,
        output_dtype=out_dtype,
    )
