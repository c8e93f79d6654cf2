"""The scheme registry: every required name, its parameters, floors and kernel mapping."""

from __future__ import annotations

import json
import math

import pytest

from harness.cli import main
from harness.core.schemes import (
    FNUZ_CLAMP,
    MX_DEFAULT_SCALE_MODE,
    MX_SCALE_MODE_VARIANTS,
    MX_SCHEMES,
    SCHEMES,
    get_scheme,
    mx_spec,
    sqnr_floor_db,
)
from harness.linear.paths.native import KERNELS, SCALED_MM_SCHEMES, linear_dispatch_problems

FP8_NAMES = [
    "fp8_per_tensor",
    "fp8_per_channel",
    "fp8_per_block",
    "fp8_per_tensor_fnuz",
    "fp8_per_channel_fnuz",
    "fp8_per_block_fnuz",
    "fp8_per_tensor_fnuz_clamp224",
]
MX_NAMES = [
    "w_mxfp4",
    "w_mxfp4_a_mxfp4",
    "w_mxfp4_a_mxfp6_e3m2",
    "w_mxfp4_a_mxfp6_e2m3",
    "w_mxfp4_a_fp8",
    "w_mxfp6_e3m2",
    "w_mxfp6_e3m2_a_mxfp6_e3m2",
    "w_mxfp6_e3m2_a_fp8",
    "w_mxfp6_e2m3",
    "w_mxfp6_e2m3_a_mxfp6_e2m3",
    "w_mxfp6_e2m3_a_fp8",
    "w_mxfp8_a_mxfp8",
]
VARIANTS = ["w_mxfp4_a_mxfp4@rceil", "w_mxfp4_a_mxfp4@even", "w_mxfp4_a_mxfp4@ceil"]


def test_cli_lists_every_required_scheme(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schemes", "--json"]) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    for name in [*FP8_NAMES, *MX_NAMES, *VARIANTS]:
        assert name in listed, name
        w = listed[name]["weight"]
        assert {"format", "granularity", "scale_rounding", "element_rounding"} <= set(w)


# Element formats of the Quark names, read off the names by hand.
QUARK_FORMATS = {
    "w_mxfp4": ("e2m1", None),
    "w_mxfp4_a_mxfp4": ("e2m1", "e2m1"),
    "w_mxfp4_a_mxfp6_e3m2": ("e2m1", "e3m2"),
    "w_mxfp4_a_mxfp6_e2m3": ("e2m1", "e2m3"),
    "w_mxfp4_a_fp8": ("e2m1", "e4m3fn"),
    "w_mxfp6_e3m2": ("e3m2", None),
    "w_mxfp6_e3m2_a_mxfp6_e3m2": ("e3m2", "e3m2"),
    "w_mxfp6_e3m2_a_fp8": ("e3m2", "e4m3fn"),
    "w_mxfp6_e2m3": ("e2m3", None),
    "w_mxfp6_e2m3_a_mxfp6_e2m3": ("e2m3", "e2m3"),
    "w_mxfp6_e2m3_a_fp8": ("e2m3", "e4m3fn"),
    "w_mxfp8_a_mxfp8": ("e4m3fn", "e4m3fn"),
}


@pytest.mark.parametrize("name", MX_NAMES)
def test_mx_schemes(name: str) -> None:
    s = get_scheme(name)
    w_fmt, a_fmt = QUARK_FORMATS[name]
    assert s.family == "mx"
    assert s.weight == mx_spec(w_fmt, "floor")
    assert s.activation == (None if a_fmt is None else mx_spec(a_fmt, "floor", dynamic=True))
    assert s.weight.block == (1, 32)
    assert s.weight.scale_format == "e8m0"


def test_mode_variants_use_their_mode_on_both_operands() -> None:
    assert MX_DEFAULT_SCALE_MODE == "floor"
    for base, modes in MX_SCALE_MODE_VARIANTS.items():
        for mode in modes:
            s = get_scheme(f"{base}@{mode}")
            assert s.weight.scale_rounding == mode
            assert s.activation is not None
            assert s.activation.scale_rounding == mode
            assert s.weight.format == MX_SCHEMES[base][0]


def test_fp8_schemes() -> None:
    tensor, channel, block = (get_scheme(n) for n in FP8_NAMES[:3])
    assert tensor.weight.block == (None, None)
    assert tensor.activation is not None
    assert not tensor.activation.dynamic
    assert channel.weight.block == (1, None)
    assert channel.activation is not None
    assert channel.activation.block == (1, None)
    assert channel.activation.dynamic
    assert block.weight.block == (128, 128)
    assert block.activation is not None
    assert block.activation.block == (1, 128)
    assert block.activation.dynamic
    for name in ("fp8_per_tensor", "fp8_per_channel", "fp8_per_block"):
        fn, fnuz = get_scheme(name), get_scheme(f"{name}_fnuz")
        assert fn.weight.format == "e4m3fn"
        assert fnuz.weight.format == "e4m3fnuz"
        assert fn.weight.block == fnuz.weight.block
    clamp = get_scheme("fp8_per_tensor_fnuz_clamp224")
    assert FNUZ_CLAMP == 224.0
    assert clamp.weight.qmax == 224.0
    assert clamp.activation is not None
    assert clamp.activation.qmax == 224.0


@pytest.mark.parametrize(
    ("name", "want"),
    [
        # c = eps_w + eps_a + eps_w * eps_a; floor = -20 log10(c), rounded down to 0.1 dB
        ("fp8_per_tensor", -20 * math.log10(1 / 16 + 1 / 16 + 1 / 256)),  # 17.79
        ("w_mxfp4_a_mxfp4", -20 * math.log10(1 / 4 + 1 / 4 + 1 / 16)),  # 4.99
        ("w_mxfp4", -20 * math.log10(1 / 4)),  # 12.04
        ("w_mxfp8_a_mxfp8", -20 * math.log10(1 / 8 + 1 / 8 + 1 / 64)),  # floor mode saturates 1/8
        ("w_mxfp8_a_mxfp8@rceil", -20 * math.log10(1 / 16 + 1 / 16 + 1 / 256)),
        ("w_mxfp6_e3m2_a_mxfp6_e3m2", -20 * math.log10(1 / 8 + 1 / 8 + 1 / 64)),
        ("w_mxfp6_e2m3", -20 * math.log10(1 / 16)),
    ],
)
def test_sqnr_floors_follow_the_mantissa_widths(name: str, want: float) -> None:
    s = get_scheme(name)
    assert s.sqnr_floor_db == math.floor(want * 10) / 10
    assert sqnr_floor_db(s.weight, s.activation) == s.sqnr_floor_db


def test_native_table_names_registered_schemes_and_known_kernels() -> None:
    assert linear_dispatch_problems() == []  # registry and the modes' contracts
    for name, mode in SCALED_MM_SCHEMES.items():
        assert name in SCHEMES, name
        assert mode in KERNELS, mode
        act = SCHEMES[name].activation
        assert act is not None
        assert act.format == SCHEMES[name].weight.format


def test_mxfp4_weights_with_per_token_fp8_activations() -> None:
    """aiter's gemm_a8wfp4 pairing: w_mxfp4's weight, fp8_per_channel's activation; the
    floor is c = 1/4 + 1/16 + 1/64 (e2m1 rounding, e4m3 rounding under a float32 scale)."""
    s = get_scheme("w_mxfp4_a_fp8_per_token")
    assert s.family == "mx"
    assert s.weight == get_scheme("w_mxfp4").weight
    assert s.activation == get_scheme("fp8_per_channel").activation
    assert s.activation is not None
    assert s.activation.scale_format == "fp32"
    assert s.activation.block == (1, None)
    assert s.activation.dynamic
    assert s.sqnr_floor_db == math.floor(-20 * math.log10(1 / 4 + 1 / 16 + 1 / 64) * 10) / 10
    assert s.sqnr_floor_db == 9.6
    assert s.name not in SCALED_MM_SCHEMES  # no torch kernel takes e8m0 x fp32 scales
