"""Quark's OCP MX quantizer (`real_quantize_mxfp`, hardware emulation, CPU) as a quantizer.

Quark's packed-MX kernels are GPU-only; its CPU emulation `real_quantize_mxfp` returns, per
32-element block, the float32 scale followed by the 32 element values (already rounded to
the element format, before scaling back). This adapter takes the scale as Quark computed
it and turns each element value into its code with the harness codec; the values are
exact element-format values, so that step is lossless (a value that is not one would be
reported by the suite as a code mismatch). Floor scales, FP4 and FP6 only, as Quark's
function supports.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from quark.torch.kernel.hw_emulation.hw_emulation_interface import real_quantize_mxfp

from harness import (
    E8M0,
    MX_BLOCK,
    KnownFinding,
    QuantizedTensor,
    QuantSpec,
    Support,
    encode,
)
from qharness_quark import ENGINE

ELEMENTS = {"e2m1": "fp4", "e2m3": "fp6_e2m3", "e3m2": "fp6_e3m2"}


NEGATIVE_ZERO = (
    "negative values that round to zero come back as +0, not -0: the element code "
    "differs from round-to-nearest-even (OCP MX FP4/FP6 have a -0 code), the value does not"
)
SCALES_OUTSIDE_E8M0 = (
    "scales outside E8M0: 2^(floor(log2 amax) - emax) is not clamped to [2^-127, 2^127] (a "
    "block with amax below 2^(emax-127) gets e.g. 2^-129) and an Inf block gets an Inf scale "
    "instead of the NaN scale 0xFF (OCP MX v1.0: E8M0 spans 2^-127..2^127, 0xFF is NaN); also "
    "the +0 for -0 element codes"
)
FLOOR_BY_LOG2 = (
    "floor scale one binade high just below a power of two: torch.floor(torch.log2(amax)) in "
    "float32 rounds log2(nextdown(2^n)) up to n for every n outside [-1, 2], so the scale is "
    "2^(n-emax) where OCP MX's floor(log2 amax) - emax gives 2^(n-1-emax) (cases "
    "below_pow2@n); also the clamp to E8M0 near 2^-127 and the +0 for -0 element codes"
)


class RealQuantizeMXFPQuantizer:
    name = "quark_real_quantize_mxfp"
    engine = ENGINE
    conventions: frozenset[str] = frozenset()
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            NEGATIVE_ZERO,
            suites=frozenset({"quantizers"}),
            # the golden and the designed tensors of MX schemes (every mismatch on the
            # designed ones is a -0 element coded +0: measured on all 18 of them)
            cases=frozenset({"weight", "activation", "designed"}),
            when=lambda case: case.element_format in ELEMENTS,
            behaves_as=frozenset({"negative_zero_code_positive"}),
        ),
        KnownFinding(
            SCALES_OUTSIDE_E8M0,
            suites=frozenset({"quantizers"}),
            cases=frozenset({"edge_cases"}),
            when=lambda case: case.scale_mode == "floor",
        ),
        KnownFinding(
            SCALES_OUTSIDE_E8M0, suites=frozenset({"quantizers"}), cases=frozenset({"degenerate"})
        ),
        KnownFinding(
            FLOOR_BY_LOG2,
            suites=frozenset({"quantizers"}),
            cases=frozenset({"mx_scale_points"}),
            when=lambda case: case.scale_mode == "floor",
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        if spec.scale_fmt is not E8M0 or spec.block != (1, MX_BLOCK):
            return Support.no(
                f"{self.name}: MX 1x{MX_BLOCK} E8M0 scales only, not {spec.granularity}"
            )
        if spec.format not in ELEMENTS:
            return Support.no(f"{self.name}: FP4/FP6 elements only, not {spec.format}")
        if spec.scale_rounding != "floor":
            return Support.no(f"{self.name}: floor scales only, not {spec.scale_rounding}")
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        # real_quantize_mxfp asserts "input_tensor.shape[-1] % 32 == 0": no partial MX
        # block (a limit of the API, not a numeric finding)
        if shape[-1] % MX_BLOCK:
            return Support.no(
                f"{self.name}: K={shape[-1]} is not a multiple of {MX_BLOCK} "
                "(real_quantize_mxfp asserts whole MX blocks)"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError("Quark's real_quantize_mxfp computes its own scales")
        rows, k = x.shape
        out = real_quantize_mxfp(x.float().contiguous(), ELEMENTS[spec.format], -1, MX_BLOCK)
        blocks = out.float().reshape(rows, k // MX_BLOCK, MX_BLOCK + 1)
        scales = blocks[..., 0]
        values = blocks[..., 1:].reshape(rows, k)
        return QuantizedTensor(encode(values, spec.format), scales.contiguous(), spec)
