"""Float32 matmuls as the error bounds assume them (linear and MoE emulated paths)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def full_fp32_matmul() -> Iterator[None]:
    """Float32 matmuls in full float32: TF32 (10-bit mantissa) would break the error bounds."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
