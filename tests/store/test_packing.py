"""Sub-byte packing of code tensors in golden files: lossless, and the documented layout."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.formats import pack_fp4
from harness.store.packing import PACKED_WIDTHS, pack_bits, packed_width, unpack_bits


@settings(max_examples=60, deadline=None)
@given(
    bits=st.sampled_from(PACKED_WIDTHS),
    shape=st.lists(st.integers(0, 7), min_size=0, max_size=3),
    seed=st.integers(0, 2**31 - 1),
)
def test_unpack_inverts_pack(bits: int, shape: list[int], seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 1 << bits, tuple(shape), generator=gen, dtype=torch.uint8)
    packed = pack_bits(codes, bits)
    assert packed.numel() == (codes.numel() * bits + 7) // 8
    again = unpack_bits(packed, bits, tuple(shape))
    assert again.dtype == torch.uint8
    assert torch.equal(again, codes)


def test_four_bits_is_pack_fp4_layout() -> None:
    codes = torch.randint(0, 16, (6, 32), generator=torch.Generator().manual_seed(1))
    codes = codes.to(torch.uint8)
    assert torch.equal(pack_bits(codes, 4), pack_fp4(codes).reshape(-1))


def test_six_bits_puts_four_codes_in_three_bytes() -> None:
    a, b, c, d = 0b000001, 0b111110, 0b101010, 0b010101
    stream = a | b << 6 | c << 12 | d << 18  # element i in bits [6i, 6i + 6)
    packed = pack_bits(torch.tensor([a, b, c, d], dtype=torch.uint8), 6)
    assert packed.tolist() == list(stream.to_bytes(3, "little"))


@pytest.mark.parametrize(
    ("values", "dtype", "width"),
    [
        ([0, 15], torch.uint8, 4),
        ([16, 3], torch.uint8, 6),
        ([63], torch.uint8, 6),
        ([64], torch.uint8, None),  # FP8 codes keep all 8 bits
        ([255, 0], torch.uint8, None),
        ([1, 2], torch.int32, None),  # only uint8 tensors are packed
        ([], torch.uint8, None),
    ],
)
def test_the_narrowest_width_that_holds_every_value(
    values: list[int], dtype: torch.dtype, width: int | None
) -> None:
    assert packed_width(torch.tensor(values, dtype=dtype)) == width


def test_a_stream_of_the_wrong_length_is_refused() -> None:
    packed = pack_bits(torch.arange(8, dtype=torch.uint8), 4)
    with pytest.raises(ValueError, match="cannot hold 9 4-bit values"):
        unpack_bits(packed, 4, (9,))
    with pytest.raises(ValueError, match="does not fit in 4 bits"):
        pack_bits(torch.tensor([16], dtype=torch.uint8), 4)
    with pytest.raises(ValueError, match="packed width"):
        unpack_bits(packed, 5, (8,))
