"""Seeded, portable test inputs.

Each input is derived from a name (sha256 -> seed) so cases are independent of test order
and of each other. Values are rounded to bfloat16, as real model weights and activations
are, and stored in the goldens, so a change in torch's RNG shows up as a stale golden rather
than a silent change of inputs. Magnitudes follow the scheme's scale tiles along both axes:
rows with a scale each span 1e-4..1e4, groups of rows (128-row blocks) and column blocks
(1x32 MX, 1x128 / 128x128 FP8) spread 1e-2..1e2 from tile to tile, and elements that share
one scale span 0.1..10, so tiles get very different scales and none rounds to all zeros.
"""

from __future__ import annotations

import hashlib

import torch

from harness.core.schemes import QuantSpec

WIDE_DECADES = 4.0  # 1e-4 .. 1e4 across independently scaled rows or blocks
NARROW_DECADES = 1.0  # 0.1 .. 10 across elements that share a scale
UNQUANTIZED_BLOCK = (1, 32)  # unquantized activations get MX-like variety all the same


def seed_for(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little") & (2**63 - 1)


def generator(name: str) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed_for(name))


def _log_spread(n: int, decades: float, gen: torch.Generator) -> torch.Tensor:
    """n factors 10^u, u evenly spaced in [-decades, decades], in a shuffled order."""
    if n == 1:
        return torch.ones(1)
    exponents = torch.linspace(-decades, decades, n)
    return (10.0**exponents)[torch.randperm(n, generator=gen)]


def scaled_normal(name: str, rows: int, cols: int, spec: QuantSpec | None) -> torch.Tensor:
    """A [rows, cols] bf16-valued float32 tensor whose spread matches ``spec``'s tiles.

    Rows sharing a scale span NARROW_DECADES. Rows with a scale each span WIDE_DECADES;
    groups of rows with one scale per group (128-row blocks) spread WIDE_DECADES / 2 from
    group to group, as do column blocks. Every tile thus has its own order of magnitude,
    and no element is zero: randn's rare exact zeros become 1, and bf16 holds the range.
    """
    gen = generator(name)
    x = torch.randn(rows, cols, generator=gen)
    x = torch.where(x == 0, torch.ones_like(x), x)
    block_rows, block_cols = UNQUANTIZED_BLOCK if spec is None else spec.block
    br = rows if block_rows is None else min(block_rows, rows)
    bc = cols if block_cols is None else min(block_cols, cols)
    if br == 1:
        x = x * _log_spread(rows, WIDE_DECADES, gen)[:, None]
    else:
        x = x * _log_spread(rows, NARROW_DECADES, gen)[:, None]
        row_groups = _log_spread(-(-rows // br), WIDE_DECADES / 2, gen)
        x = x * row_groups.repeat_interleave(br)[:rows, None]
    col_blocks = _log_spread(-(-cols // bc), WIDE_DECADES / 2, gen)
    x = x * col_blocks.repeat_interleave(bc)[None, :cols]
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
