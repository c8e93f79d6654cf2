"""Scale-mode variants (``<scheme>@<mode>``) are tested on the base scheme's inputs, so a
difference between modes is the scale rounding's, not the data's.

One row is the exception: `plant_corners` writes exact ties and subnormals into row 0 of the
first tile as multiples of the scale *the variant's mode* picks (E8M0 ``ceil`` doubles it),
so each mode's quantizer really sees ties. Every other element is the base scheme's."""

from __future__ import annotations

import pytest
import torch

from harness.core.schemes import MX_SCALE_MODE_VARIANTS, SCHEMES
from harness.linear.cases import LINEAR_SHAPES, linear_inputs
from harness.moe.cases import moe_inputs

VARIANTS = [
    (base, f"{base}@{mode}") for base, modes in MX_SCALE_MODE_VARIANTS.items() for mode in modes
]


@pytest.mark.parametrize(("base", "variant"), VARIANTS, ids=[v for _, v in VARIANTS])
def test_variant_inputs_are_the_base_schemes(base: str, variant: str) -> None:
    assert SCHEMES[variant].input_seed_name == base
    for shape in LINEAR_SHAPES:
        ours, theirs = linear_inputs(variant, shape), linear_inputs(base, shape)
        assert torch.equal(ours["bias"], theirs["bias"]), (variant, shape, "bias")
        for name in ("x", "w"):
            # row 0 holds the planted corners (see the module docstring)
            assert torch.equal(ours[name][1:], theirs[name][1:]), (variant, shape, name)
    assert torch.equal(moe_inputs(variant)["x"], moe_inputs(base)["x"])


def test_base_schemes_seed_from_their_own_name() -> None:
    for name, scheme in SCHEMES.items():
        if "@" not in name:
            assert scheme.input_seed_name == name
