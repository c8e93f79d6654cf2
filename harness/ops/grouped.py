"""Thin, contract-checked calls into torch's grouped GEMM ops.

The capability probes and the MoE kernels call the same functions, so a probe that passes
proves the exact call the suites make. Contracts as found in torch 2.13:

``torch.nn.functional.grouped_mm(a, b, offs=...)`` (2-D ``a`` x 3-D ``b``):
  * ``a`` [M, K], rows sorted by group; ``b`` [G, K, N] (a transposed view of [G, N, K]
    weights is accepted); strides must be multiples of 16 bytes (K, N multiples of 8 in bf16).
  * ``offs`` int32 [G] (int64 is rejected), ``offs[g]`` = end row of group g (a cumulative
    sum of rows per group). Empty groups are repeated offsets. ``offs[-1] == M`` is accepted;
    output rows past ``offs[-1]`` are left uninitialized, so never pass extra rows.
  * The output dtype must equal ``a``'s dtype; bf16 products are accumulated in float32
    (on CPU, checked: 1 + 255 * 2^-9 sums to 1.498 before the final bf16 rounding).

``torch._scaled_grouped_mm(a, b, scale_a, scale_b, offs=..., out_dtype=torch.bfloat16)``:
  * FP8 ``a`` [M, K] row-major, ``b`` [G, K, N] column-major (the transposed view of
    row-major [G, N, K] codes), ``scale_a`` float32 [M] (row-wise), ``scale_b`` float32
    [G, N]; bf16 output only; CUDA (sm_90+) builds only, absent on CPU.
"""

from __future__ import annotations

import torch


def group_offsets(counts: torch.Tensor) -> torch.Tensor:
    """``offs`` for grouped GEMMs: int32 cumulative row counts, one per group."""
    return counts.cumsum(0).to(torch.int32)


def grouped_mm_bf16(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """bf16 [M, K] rows (sorted by group) times bf16 weights [G, N, K]^T: bf16 [M, N]."""
    if a.dtype != torch.bfloat16 or w.dtype != torch.bfloat16:
        raise TypeError(f"grouped_mm_bf16 takes bf16 operands, got {a.dtype} and {w.dtype}")
    if int(counts.sum()) != a.shape[0]:
        raise ValueError(f"group counts sum to {int(counts.sum())}, a has {a.shape[0]} rows")
    return torch.nn.functional.grouped_mm(
        a.contiguous(), w.transpose(1, 2), offs=group_offsets(counts)
    )


def scaled_grouped_mm_rowwise(
    a: torch.Tensor,
    scale_a: torch.Tensor,
    w: torch.Tensor,
    scale_w: torch.Tensor,
    counts: torch.Tensor,
) -> torch.Tensor:
    """FP8 [M, K] rows (sorted by group) x FP8 weights [G, N, K]^T, row-wise scales: bf16."""
    m, g, n = a.shape[0], w.shape[0], w.shape[1]
    if tuple(scale_a.shape) != (m,) or tuple(scale_w.shape) != (g, n):
        raise ValueError(
            f"row-wise scales must be [{m}] and [{g}, {n}], got {tuple(scale_a.shape)} and "
            f"{tuple(scale_w.shape)}"
        )
    if int(counts.sum()) != m:
        raise ValueError(f"group counts sum to {int(counts.sum())}, a has {m} rows")
    return torch._scaled_grouped_mm(
        a.contiguous(),
        w.contiguous().transpose(1, 2),
        scale_a.float().contiguous(),
        scale_w.float().contiguous(),
        offs=group_offsets(counts),
        out_dtype=torch.bfloat16,
    )
