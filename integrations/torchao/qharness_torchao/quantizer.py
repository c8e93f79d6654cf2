"""torchao's MX cast (`MXTensor.to_mx`) as a qharness quantizer.

torchao's own code computes the E8M0 scales and element data; this adapter only converts
its layout to the harness's: float8 element data viewed as bytes, FP6 codes as torchao
returns them (one per byte), FP4 unpacked from torchao's packed bytes (element 0 in the low
nibble), E8M0 scales decoded to float32 powers of two.

No convention is declared. torchao 0.18's `to_mx` departs from OCP MX at the ends of E8M0:
floor/even/ceil read an Inf amax's exponent field as 2^128 (a finite scale) and divide by
2^-126 where the stored scale is 2^-127, and the rceil cast gives an Inf block scale 0xFE.
These were declared conventions; torchao's main branch replaced all three by OCP MX's
behaviour (pytorch/ao#4725: Inf gives the NaN scale, 2^-127 is divided by as itself), so
they are findings (docs/CONVENTIONS.md), xfailed where a case shows them.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import MXTensor

from harness import (
    E8M0,
    MX_BLOCK,
    KnownFinding,
    QuantizedTensor,
    QuantSpec,
    Support,
    e8m0_decode,
    unpack_fp4,
)
from qharness_torchao import ENGINE

ELEMENT_DTYPES: dict[str, torch.dtype | str] = {  # torchao names its FP6 dtypes by string
    "e4m3fn": torch.float8_e4m3fn,
    "e5m2": torch.float8_e5m2,
    "e2m3": "fp6_e2m3",
    "e3m2": "fp6_e3m2",
    "e2m1": torch.float4_e2m1fn_x2,
}
MODES: dict[str, ScaleCalculationMode] = {
    "floor": ScaleCalculationMode.FLOOR,
    "rceil": ScaleCalculationMode.RCEIL,
    "even": ScaleCalculationMode.EVEN,
    "ceil": ScaleCalculationMode.CEIL,
}


def to_harness_codes(qdata: torch.Tensor, fmt: str, shape: torch.Size) -> torch.Tensor:
    if fmt == "e2m1":
        return unpack_fp4(qdata.view(torch.uint8)).reshape(shape)
    return qdata.view(torch.uint8).reshape(shape)


# rceil outside torch.compile on an SM100 GPU (the pure-torch fallback of _to_mx_rceil, eager
# on any device; compiled on CPU the same): three findings, each with the rule that
# reproduces it (harness.core.conventions), so each case xfails only where they explain it.
_RCEIL = "torchao 0.18 rceil fallback (_to_mx_rceil, eager): "
RCEIL_LOG2 = (
    _RCEIL + "the exponent is ceil(log2(amax / max)) in float32, which rounds amax's excess "
    "over max * 2^k away, so a block one float32 step above max * 2^k gets 2^k instead of "
    "2^(k+1) and its largest element saturates, for k >= 4 or k <= -5, every element format "
    "(case above_max@k); fixed on torchao main (pytorch/ao#4725, commit 5d73a0c)"
)
RCEIL_CODE0 = (
    _RCEIL + "a block whose scale code is 0x00 (2^-127) is multiplied by 1 instead of 2^127, "
    "so every element of a non-zero block with amax at most max * 2^-127 becomes 0 (cases "
    "at_max@-127, two_pow_m127, *_pow2@-126, subnormal_only); fixed on torchao main "
    "(pytorch/ao#4725, commit 5d73a0c)"
)
RCEIL_INF = (
    _RCEIL + "a block holding Inf gets the finite scale 2^127 (0xFE) and saturated elements "
    "instead of the NaN scale 0xFF; changed on torchao main by pytorch/ao#4725"
)
RCEIL_FINDINGS = {
    RCEIL_LOG2: "rceil_float32_log2",
    RCEIL_CODE0: "e8m0_code0_divides_by_one",
    RCEIL_INF: "mx_inf_amax_scale_0xfe",
}
E8M0_ENDS = (
    "floor/even/ceil at the ends of E8M0 (torchao 0.18): a block holding Inf gets the finite "
    "scale 2^(128 - emax) (Inf's exponent field read as 2^128) and saturated elements, not "
    "the NaN scale 0xFF; a block whose scale is 2^-127 (code 0x00) is divided by 2^-126, so "
    "its codes are half the scale's; both replaced on torchao main by OCP MX's behaviour "
    "(pytorch/ao#4725, after 0.18.0; formerly the conventions mx_inf_amax_as_2pow128 and "
    "mx_min_scale_divides_as_2pow-126)"
)


class ToMXQuantizer:
    name = "torchao_to_mx"
    engine = ENGINE
    conventions: frozenset[str] = frozenset()

    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        *(
            KnownFinding(
                text,
                suites=frozenset({"quantizers"}),
                cases=frozenset({"edge_cases", "mx_scale_points", "degenerate"}),
                when=lambda case: case.scale_mode == "rceil",
                behaves_as=frozenset({rule}),
            )
            for text, rule in RCEIL_FINDINGS.items()
        ),
        KnownFinding(
            E8M0_ENDS,
            suites=frozenset({"quantizers"}),
            cases=frozenset({"edge_cases", "mx_scale_points", "degenerate"}),
            when=lambda case: case.scale_mode in ("floor", "even", "ceil"),
            behaves_as=frozenset({"mx_inf_amax_as_2pow128", "mx_min_scale_divides_as_2pow-126"}),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        if spec.scale_fmt is not E8M0 or spec.block != (1, MX_BLOCK):
            return Support.no(
                f"torchao to_mx: MX 1x{MX_BLOCK} E8M0 scales only, not {spec.granularity}"
            )
        if spec.format not in ELEMENT_DTYPES:
            return Support.no(f"torchao to_mx: no {spec.format} element dtype")
        if spec.scale_rounding not in MODES:
            return Support.no(f"torchao to_mx: no {spec.scale_rounding} scale mode")
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        # to_mx asserts "the last dimension ... must be divisible by block_size": no partial
        # MX block (a documented limit of the API, not a numeric finding)
        if shape[-1] % MX_BLOCK:
            return Support.no(
                f"torchao to_mx: K={shape[-1]} is not a multiple of {MX_BLOCK} "
                "(no partial MX blocks)"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError("torchao to_mx computes its own scales (MX is dynamic)")
        hp = x.float().contiguous()
        mx = MXTensor.to_mx(hp, ELEMENT_DTYPES[spec.format], MX_BLOCK, MODES[spec.scale_rounding])
        codes = to_harness_codes(mx.qdata, spec.format, hp.shape)
        scale_codes = mx.scale.view(torch.uint8).reshape(hp.shape[0], hp.shape[1] // MX_BLOCK)
        return QuantizedTensor(codes, e8m0_decode(scale_codes), spec)
