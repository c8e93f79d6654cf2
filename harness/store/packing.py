"""Lossless sub-byte storage of uint8 code tensors in golden files.

FP4 and FP6 codes take 4 and 6 of the 8 bits of the uint8 tensors that hold them. A golden
file stores such a tensor as a little-endian bit stream: element i occupies bits
[i*b, (i+1)*b), counted from bit 0 of byte 0, the last byte zero-padded. For b = 4 that is
`harness.core.formats.pack_fp4`'s layout (element 0 in the low nibble); for b = 6, four
codes in three bytes. The width is the narrowest of `PACKED_WIDTHS` that holds every value,
so any uint8 tensor whose values fit is packed, whatever it means; decoding needs only the
width and the shape, which the file's metadata records.
"""

from __future__ import annotations

import numpy as np
import torch

# The widths of the sub-byte element formats (FP4 E2M1; FP6 E2M3 and E3M2), narrowest first.
PACKED_WIDTHS: tuple[int, ...] = (4, 6)


def packed_width(t: torch.Tensor) -> int | None:
    """The width ``t`` is stored at, or None when it is stored as it is (not uint8, empty,
    or a value needs all 8 bits)."""
    if t.dtype != torch.uint8 or t.numel() == 0:
        return None
    top = int(t.max())
    return next((b for b in PACKED_WIDTHS if top < 1 << b), None)


def pack_bits(t: torch.Tensor, bits: int) -> torch.Tensor:
    """uint8 ``t`` (every value < 2**bits) as a flat uint8 little-endian bit stream."""
    if bits not in PACKED_WIDTHS:
        raise ValueError(f"packed width must be one of {PACKED_WIDTHS}, got {bits}")
    values = t.detach().cpu().contiguous().reshape(-1).numpy()
    if values.size and int(values.max()) >= 1 << bits:
        raise ValueError(f"a value does not fit in {bits} bits")
    stream = np.unpackbits(values[:, None], axis=1, bitorder="little")[:, :bits]
    return torch.from_numpy(np.packbits(stream.reshape(-1), bitorder="little"))


def unpack_bits(packed: torch.Tensor, bits: int, shape: tuple[int, ...]) -> torch.Tensor:
    """Inverse of `pack_bits`: the uint8 tensor of ``shape``. A stream of the wrong length
    (a file edited by hand) is a ValueError, never a silently truncated tensor."""
    if bits not in PACKED_WIDTHS:
        raise ValueError(f"packed width must be one of {PACKED_WIDTHS}, got {bits}")
    if packed.dtype != torch.uint8 or packed.dim() != 1:
        raise ValueError(f"a packed tensor is 1-D uint8, got {packed.dtype} {tuple(packed.shape)}")
    count = int(np.prod(shape, dtype=np.int64))
    if packed.numel() != (count * bits + 7) // 8:
        raise ValueError(
            f"{packed.numel()} packed bytes cannot hold {count} {bits}-bit values exactly"
        )
    stream = np.unpackbits(packed.numpy(), bitorder="little")[: count * bits]
    widened = np.zeros((count, 8), dtype=np.uint8)
    widened[:, :bits] = stream.reshape(count, bits)
    values = np.packbits(widened, axis=1, bitorder="little").reshape(shape)
    return torch.from_numpy(values)
