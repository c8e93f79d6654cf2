"""Quantization schemes as data, and the registry that names them.

A scheme says how the weight and the activation of a linear layer are quantized: element
format, scale granularity (a tile of rows x columns sharing one scale), scale format and
rounding, static or dynamic activation scales. Code that needs to know a scheme's
behaviour reads these fields; nothing parses scheme names. `QuantSpec` itself lives in
`harness.core.spec` (re-exported here), so the scale rules need not import this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.core.formats import get_format
from harness.core.scale_formats import E4M3_X_FP32, E8M0
from harness.core.scales import saturation_loss
from harness.core.spec import ELEMENT_ROUNDING as ELEMENT_ROUNDING  # re-exported
from harness.core.spec import FP8_BLOCK, MX_BLOCK, NVFP4_BLOCK
from harness.core.spec import WHOLE as WHOLE  # re-exported
from harness.core.spec import QuantSpec as QuantSpec  # re-exported
from harness.errors import QHarnessError


@dataclass(frozen=True)
class Scheme:
    """A named weight/activation quantization recipe, as checkpoints name them."""

    name: str
    family: str  # "fp8", "mx" or "nvfp4"
    weight: QuantSpec
    activation: QuantSpec | None  # None: activations stay in high precision
    sqnr_floor_db: float  # minimum SQNR of the layer output vs the unquantized product
    description: str
    # Variants of one recipe (the MX "<name>@<mode>" scale modes) draw their seeded inputs
    # from the base scheme's name, so the modes are compared on the same data.
    inputs_from: str | None = None

    @property
    def input_seed_name(self) -> str:
        """The name whose seeds give this scheme's test inputs."""
        return self.inputs_from or self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "weight": self.weight.to_json(),
            "activation": None if self.activation is None else self.activation.to_json(),
            "sqnr_floor_db": self.sqnr_floor_db,
            "description": self.description,
        }


SCHEMES: dict[str, Scheme] = {}


def register_scheme(scheme: Scheme) -> Scheme:
    if scheme.name in SCHEMES:
        raise ValueError(f"scheme {scheme.name!r} registered twice")
    SCHEMES[scheme.name] = scheme
    return scheme


class UnknownSchemeError(QHarnessError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def get_scheme(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        known = ", ".join(sorted(SCHEMES))
        raise UnknownSchemeError(f"unknown scheme {name!r}; known schemes: {known}") from None


# ------------------------------------------------------------------------ SQNR floors
# A scheme's floor follows from its element formats. Rounding a normal value to m mantissa
# bits (RNE) errs by at most eps = 2^-(m+1) relative; a block's largest element can also
# saturate, which an E8M0 scale mode may allow beyond eps (floor mode with e4m3: 1/8, see
# harness.core.scales.saturation_loss), so eps_op = max(2^-(m+1), saturation loss). One product
# of two quantized operands then errs by at most c = eps_w + eps_a + eps_w * eps_a relative
# (eps_a = 0 for unquantized activations). Products err independently, so the expected noise
# power of a sum is at most c^2 times the summed squares of its products, and the floor is
# -20*log10(c) against that energy (the suite measures SQNR corrected for the exact sum's
# cancellation, see harness.core.compare.cancellation_db). The test inputs make a few products
# dominate each layer, so c is taken per product (worst case), not as an average. Numbers:
#   e4m3 x e4m3 (fp32 scales, or MX rceil):  eps 1/16 + 1/16      -> c 0.129 -> 17.7 dB
#   e2m3 x e2m3 (MX floor: saturation 1/16):  1/16 + 1/16          ->          17.7 dB
#   e2m3 alone: 1/16 -> 24.0 dB;  e2m3 x MX-e4m3 floor (1/8)       -> c 0.195 -> 14.1 dB
#   e3m2 alone: 1/8 -> 18.0 dB;   e3m2 x e3m2, e3m2 x MX-e4m3 floor -> c 0.266 -> 11.5 dB
#   MX-e4m3 floor x MX-e4m3 floor: 1/8 + 1/8                       -> c 0.266 -> 11.5 dB
#   e2m1 alone: 1/4 -> 12.0 dB;   e2m1 x e2m1 (any mode): 1/4 + 1/4 -> c 0.563 ->  4.9 dB
#   e2m1 x e3m2, e2m1 x MX-e4m3 floor: 1/4 + 1/8                   -> c 0.406 ->  7.8 dB
#   e2m1 x e2m3: 1/4 + 1/16                                        -> c 0.328 ->  9.6 dB
#   e2m1 x e4m3 (fp32 per-token scale, no E8M0 saturation): 1/4 + 1/16 -> c 0.328 ->  9.6 dB
#   NVFP4 (e2m1, E4M3 block scales: saturation 1/17 < 1/4): as e2m1 -> 12.0 dB, 4.9 dB


def element_error_bound(spec: QuantSpec) -> float:
    """Largest relative error of one quantized (normal-range) element under ``spec``."""
    rounding = 2.0 ** -(get_format(spec.format).mant_bits + 1)
    return max(rounding, saturation_loss(spec))


def sqnr_floor_db(weight: QuantSpec, activation: QuantSpec | None) -> float:
    """SQNR floor (dB, rounded down to 0.1) from the operands' worst relative errors."""
    eps_w = element_error_bound(weight)
    eps_a = 0.0 if activation is None else element_error_bound(activation)
    c = eps_w + eps_a + eps_w * eps_a
    return math.floor(-20 * math.log10(c) * 10) / 10


# ------------------------------------------------------------------------------ FP8
# FP8 flavours: e4m3fn (CUDA, gfx950) and e4m3fnuz (gfx942), each as its own scheme, since
# the same bits mean different values. "_clamp224" variants saturate fnuz quantization at
# 224 instead of 240, as some ROCm stacks do.
FP8_FLAVOURS: dict[str, str] = {"": "e4m3fn", "_fnuz": "e4m3fnuz"}


def _fp8_layouts(fmt: str, clamp: float | None) -> dict[str, tuple[QuantSpec, QuantSpec, str]]:
    """Granularity name -> (weight spec, activation spec, description) for one flavour."""
    per_row = (1, WHOLE)
    return {
        "per_tensor": (
            QuantSpec(fmt, clamp_max=clamp),
            QuantSpec(fmt, dynamic=False, clamp_max=clamp),
            "static per-tensor weight and activation scales",
        ),
        "per_channel": (
            QuantSpec(fmt, block=per_row, clamp_max=clamp),
            QuantSpec(fmt, block=per_row, dynamic=True, clamp_max=clamp),
            "per-output-channel weight scales, dynamic per-token activation scales",
        ),
        "w_per_channel_a_static": (
            QuantSpec(fmt, block=per_row, clamp_max=clamp),
            QuantSpec(fmt, dynamic=False, clamp_max=clamp),
            "per-output-channel weight scales, static per-tensor activation scale",
        ),
        "per_block": (
            QuantSpec(fmt, block=(FP8_BLOCK, FP8_BLOCK), clamp_max=clamp),
            QuantSpec(fmt, block=(1, FP8_BLOCK), dynamic=True, clamp_max=clamp),
            "128x128 weight blocks, dynamic 1x128 activation groups",
        ),
    }


def _register_fp8(granularity: str, suffix: str, fmt: str, clamp: float | None = None) -> None:
    weight, activation, description = _fp8_layouts(fmt, clamp)[granularity]
    clamp_note = "" if clamp is None else f", quantization clamped at {clamp:g}"
    register_scheme(
        Scheme(
            name=f"fp8_{granularity}{suffix}",
            family="fp8",
            weight=weight,
            activation=activation,
            sqnr_floor_db=sqnr_floor_db(weight, activation),
            description=f"FP8 {fmt}, {description}{clamp_note}",
        )
    )


for _granularity in ("per_tensor", "per_channel", "w_per_channel_a_static", "per_block"):
    for _suffix, _fmt in FP8_FLAVOURS.items():
        _register_fp8(_granularity, _suffix, _fmt)
FNUZ_CLAMP = 224.0
for _granularity in ("per_tensor", "per_channel"):
    _register_fp8(_granularity, "_fnuz_clamp224", "e4m3fnuz", FNUZ_CLAMP)


# ------------------------------------------------------------------ FP8, UE8M0 scales
# DeepSeek-V3.1-style block FP8 with power-of-two (UE8M0) scales: 128x128 e4m3fn weight
# blocks and dynamic 1x128 activation groups as fp8_per_block, each scale the power of two at
# or above amax / 448 (E8M0 "rceil": exp2(ceil(log2(amax / 448))), no element saturates),
# stored as an E8M0 byte: what vLLM's group quantizers compute with `use_ue8m0` and
# DeepGEMM's scale layout on Blackwell takes. (E8M0 "ceil" is OCP MX's rule,
# ceil(log2(amax)) - emax, which can be one binade higher.)
FP8_PER_BLOCK_UE8M0 = "fp8_per_block_ue8m0"
_ue8m0_weight = QuantSpec(
    "e4m3fn", block=(FP8_BLOCK, FP8_BLOCK), scale_format=E8M0.name, scale_rounding="rceil"
)
_ue8m0_activation = QuantSpec(
    "e4m3fn", block=(1, FP8_BLOCK), scale_format=E8M0.name, scale_rounding="rceil", dynamic=True
)
register_scheme(
    Scheme(
        name=FP8_PER_BLOCK_UE8M0,
        family="fp8",
        weight=_ue8m0_weight,
        activation=_ue8m0_activation,
        sqnr_floor_db=sqnr_floor_db(_ue8m0_weight, _ue8m0_activation),
        description=(
            "FP8 e4m3fn, 128x128 weight blocks and dynamic 1x128 activation groups, "
            "power-of-two (UE8M0) scales: amax / 448 rounded up to a power of two"
        ),
    )
)


# ------------------------------------------------------------------------------- OCP MX
# AMD Quark's names. Element formats: mxfp4 = e2m1, mxfp6_e3m2 / mxfp6_e2m3, mxfp8 = e4m3fn.
# Every quantized operand is MX: 1x32 blocks along K, one E8M0 scale per block, dynamic for
# activations. "a_fp8" reads as MX-FP8 (e4m3fn elements, 1x32 E8M0 scales, dynamic), the
# activation format of Quark's mixed MX schemes; no per-tensor FP8 scale is involved.
MX_DEFAULT_SCALE_MODE = "floor"  # the OCP MX spec
MX_SCHEMES: dict[str, tuple[str, str | None]] = {
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
# The scale mode is a scheme parameter: "<name>@<mode>" is <name> with that E8M0 mode on
# both operands; the plain name uses MX_DEFAULT_SCALE_MODE.
MX_SCALE_MODE_VARIANTS: dict[str, tuple[str, ...]] = {
    "w_mxfp4_a_mxfp4": ("rceil", "even", "ceil"),
    "w_mxfp8_a_mxfp8": ("rceil",),
}


def mx_spec(fmt: str, scale_mode: str, dynamic: bool = False) -> QuantSpec:
    return QuantSpec(
        fmt,
        block=(1, MX_BLOCK),
        scale_format=E8M0.name,
        scale_rounding=scale_mode,
        dynamic=dynamic,
    )


def _register_mx(base: str, scale_mode: str, name: str) -> None:
    w_fmt, a_fmt = MX_SCHEMES[base]
    act = "unquantized activations" if a_fmt is None else f"dynamic MX {a_fmt} activations"
    weight = mx_spec(w_fmt, scale_mode)
    activation = None if a_fmt is None else mx_spec(a_fmt, scale_mode, dynamic=True)
    register_scheme(
        Scheme(
            name=name,
            family="mx",
            weight=weight,
            activation=activation,
            sqnr_floor_db=sqnr_floor_db(weight, activation),
            description=f"OCP MX {w_fmt} weights, {act}, 1x32 E8M0 scales ({scale_mode})",
            inputs_from=None if name == base else base,
        )
    )


for _base in MX_SCHEMES:
    _register_mx(_base, MX_DEFAULT_SCALE_MODE, _base)
    for _mode in MX_SCALE_MODE_VARIANTS.get(_base, ()):
        _register_mx(_base, _mode, f"{_base}@{_mode}")


# ------------------------------------------------- MX weights, FP8 per-token activations
# aiter's gemm_a8wfp4 pairing: MXFP4 weights (as w_mxfp4: e2m1, 1x32 E8M0 floor scales) with
# FP8 e4m3fn activations under one dynamic float32 scale per row (as fp8_per_channel's
# activation). Unlike w_mxfp4_a_fp8 (MX-FP8 activations, 1x32 E8M0 scales), no E8M0 scale
# touches the activation.
W_MXFP4_A_FP8_PER_TOKEN = "w_mxfp4_a_fp8_per_token"
_mixed_weight = mx_spec("e2m1", MX_DEFAULT_SCALE_MODE)
_mixed_activation = QuantSpec("e4m3fn", block=(1, WHOLE), dynamic=True)
register_scheme(
    Scheme(
        name=W_MXFP4_A_FP8_PER_TOKEN,
        family="mx",
        weight=_mixed_weight,
        activation=_mixed_activation,
        sqnr_floor_db=sqnr_floor_db(_mixed_weight, _mixed_activation),
        description=(
            "OCP MX e2m1 weights (1x32 E8M0 scales, floor), FP8 e4m3fn activations with "
            "dynamic per-token float32 scales"
        ),
    )
)


# ------------------------------------------------------------------------------- NVFP4
# E2M1 elements in 1x16 blocks along K, an FP8 E4M3 scale per block times one FP32 scale
# per tensor (docs/SCHEMES.md#nvfp4). The weight's global scale comes from its amax; the
# activation's is static (calibrated, as NVFP4 checkpoints store `input_global_scale`)
# while its block scales are computed per call under it.
NVFP4_SCALE_RULE = "e4m3_rne"


def nvfp4_spec(dynamic: bool = False) -> QuantSpec:
    return QuantSpec(
        "e2m1",
        block=(1, NVFP4_BLOCK),
        scale_format=E4M3_X_FP32.name,
        scale_rounding=NVFP4_SCALE_RULE,
        dynamic=dynamic,
    )


NVFP4_SCHEMES: dict[str, tuple[QuantSpec, QuantSpec | None, str]] = {
    "w_nvfp4": (nvfp4_spec(), None, "unquantized activations"),
    "w_nvfp4_a_nvfp4": (
        nvfp4_spec(),
        nvfp4_spec(),
        "NVFP4 activations (static per-tensor FP32 scale, per-call E4M3 block scales)",
    ),
}
for _name, (_weight, _activation, _act) in NVFP4_SCHEMES.items():
    register_scheme(
        Scheme(
            name=_name,
            family="nvfp4",
            weight=_weight,
            activation=_activation,
            sqnr_floor_db=sqnr_floor_db(_weight, _activation),
            description=f"NVFP4 e2m1 weights in 1x16 blocks (E4M3 x FP32 scales), {_act}",
        )
    )
