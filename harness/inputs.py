"""Seeded, portable test inputs.

Each input is derived from a name (sha256 -> seed) so cases are independent of test order
and of each other. Values are rounded to bfloat16, as real model weights and activations
are, and stored in the goldens, so a change in torch's RNG shows up as a stale golden rather
than a silent change of inputs. Magnitudes follow the scheme's scale granularity: elements
that get their own scale (rows with per-row scales, blocks with per-block scales) span
1e-4..1e4, elements that share one scale span 0.1..10, so no tile is rounded to all zeros.
"""

from __future__ import annotations

import hashlib

import torch

from harness.schemes import QuantSpec

WIDE_DECADES = 4.0  # 1e-4 .. 1e4 across independently scaled rows or blocks
NARROW_DECADES = 1.0  # 0.1 .. 10 across elements that share a scale


def seed_for(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little") & (2**63 - 1)


def generator(name: str) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed_for(name))


def _log_spread(n: int, decades: float, gen: torch.Generator) -> torch.Tensor:
    """n factors 10^u, u uniform in [-decades, decades], in a shuffled order."""
    if n == 1:
        return torch.ones(1)
    exponents = torch.linspace(-decades, decades, n)
    return (10.0**exponents)[torch.randperm(n, generator=gen)]


def scaled_normal(name: str, rows: int, cols: int, spec: QuantSpec | None) -> torch.Tensor:
    """A [rows, cols] bf16-valued float32 tensor whose spread matches ``spec``'s tiles."""
    gen = generator(name)
    x = torch.randn(rows, cols, generator=gen)
    block_rows, block_cols = (1, 32) if spec is None else spec.block
    row_decades = WIDE_DECADES if block_rows == 1 else NARROW_DECADES
    x = x * _log_spread(rows, row_decades, gen)[:, None]
    if block_cols is not None and block_cols < cols:
        n_blocks = -(-cols // block_cols)
        per_block = _log_spread(n_blocks, WIDE_DECADES / 2, gen)
        x = x * per_block.repeat_interleave(block_cols)[:cols][None, :]
    x = x.to(torch.bfloat16).float()
    if bool((x == 0).any()):
        raise AssertionError(f"input {name} contains zeros; inputs must not")
    return x


def bias_vector(name: str, n: int) -> torch.Tensor:
    """Bias in [0.25, 2) with random signs, bf16-valued so bf16/fp16/fp32 paths see equal bits."""
    gen = generator(name)
    magnitude = 0.25 + 1.75 * torch.rand(n, generator=gen)
    sign = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    return (magnitude * sign).to(torch.bfloat16).float()
