"""Two tiny Triton kernels the simulated platform's capability probes run under the interpreter.

Imported only by a probe on a simulated platform (``TRITON_INTERPRET=1`` set before this
module imports, so ``triton.jit`` builds interpreted functions). Operands are small
integers and power-of-two scales, so every product and sum is exact and the answer is known
without Triton.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl


@triton.jit
def _dot_kernel(
    a_ptr: Any, b_ptr: Any, c_ptr: Any, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr
) -> None:
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, input_precision="ieee"))


@triton.jit
def _dot_scaled_e2m1_kernel(
    a_ptr: Any,
    sa_ptr: Any,
    b_ptr: Any,
    sb_ptr: Any,
    c_ptr: Any,
    M: tl.constexpr,
    N: tl.constexpr,
    K: tl.constexpr,
) -> None:
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk2 = tl.arange(0, K // 2)
    rs = tl.arange(0, K // 32)
    a = tl.load(a_ptr + rm[:, None] * (K // 2) + rk2[None, :])  # [M, K/2] packed
    b = tl.load(b_ptr + rn[None, :] * (K // 2) + rk2[:, None])  # [K/2, N] packed along K
    sa = tl.load(sa_ptr + rm[:, None] * (K // 32) + rs[None, :])
    sb = tl.load(sb_ptr + rn[:, None] * (K // 32) + rs[None, :])
    c = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``tl.dot`` of a [M, K] and b [K, N] (contiguous), float32 out."""
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.float32)
    _dot_kernel[(1,)](a, b, c, M=a.shape[0], N=b.shape[1], K=a.shape[1])
    return c


def dot_scaled_e2m1(
    a_packed: torch.Tensor, sa: torch.Tensor, b_packed: torch.Tensor, sb: torch.Tensor
) -> torch.Tensor:
    """``tl.dot_scaled`` of MXFP4 a [M, K/2] and b [N, K/2] (packed low nibble first, E8M0
    scale codes [M, K/32] and [N, K/32]), float32 out."""
    m, n, k = a_packed.shape[0], b_packed.shape[0], 2 * a_packed.shape[1]
    c = torch.empty(m, n, dtype=torch.float32)
    _dot_scaled_e2m1_kernel[(1,)](a_packed, sa, b_packed, sb, c, M=m, N=n, K=k)
    return c
