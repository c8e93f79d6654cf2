"""aiter's MXFP4 quantizer (`aiter.ops.triton.quant.dynamic_mxfp4_quant`) as a qharness quantizer.

The Triton kernel computes each 1x32 block's E8M0 scale from amax by Quark's "even" rule
(amax's float32 bits + 0x200000, exponent kept, minus 2: the harness's ``even`` mode) and the
FP4 codes by integer arithmetic on float32 bits. This adapter converts the layout only:
packed bytes (element 0 in the low nibble) unpacked to one code per byte, E8M0 codes decoded
to float32 powers of two. It runs on a ROCm GPU or a simulated one (Triton's interpreter).
``scaling_mode`` is accepted by aiter's wrapper but not passed to the kernel (always "even").
"""

from __future__ import annotations

from typing import ClassVar

import torch

from harness import (
    MX_BLOCK,
    KnownFinding,
    QuantizedTensor,
    QuantSpec,
    Support,
    detect_platform,
    e8m0_decode,
    unpack_fp4,
)
from qharness_aiter import ENGINE
from qharness_aiter.loader import AITER_ARCHS, aiter_triton


class DynamicMXFP4Quantizer:
    name = "aiter_dynamic_mxfp4_quant"
    engine = ENGINE
    conventions: frozenset[str] = frozenset()
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            "aiter dynamic_mxfp4_quant rounds FP4 element ties away from zero (its kernel: "
            "'rounding nearest with tie breaking up'), not to nearest even as the reference: "
            "0.25 -> 0.5, 1.25 -> 1.5, 2.5 -> 3, 5 -> 6 "
            "(integrations/aiter/findings/dynamic_mxfp4_quant_ties.py)",
            suites=frozenset({"quantizers"}),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        platform = detect_platform()
        if platform.simulated != "triton-interpret" and platform.device != "rocm":
            return Support.no(
                f"{self.name}: aiter's Triton kernel needs a ROCm GPU or a simulated one "
                "(harness run --simulate triton-interpret:gfx942|gfx950)"
            )
        if platform.arch not in AITER_ARCHS:
            return Support.no(f"{self.name}: aiter runs on {', '.join(sorted(AITER_ARCHS))}")
        if spec.format != "e2m1" or spec.scale_format != "e8m0" or spec.block != (1, MX_BLOCK):
            return Support.no(f"{self.name}: MXFP4 (e2m1, 1x32 E8M0 scales) only")
        if spec.scale_rounding != "even":
            return Support.no(
                f"{self.name}: the kernel computes E8M0 scales by the 'even' rule only, "
                f"not {spec.scale_rounding}"
            )
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if len(shape) != 2 or shape[-1] % 4:
            return Support.no(
                f"{self.name}: 2-D input with K a multiple of 4 (the wrapper asserts "
                f"(K // 2) % 2 == 0), got {shape}"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError("aiter dynamic_mxfp4_quant computes its own scales (MX is dynamic)")
        quant = aiter_triton(detect_platform(), "quant")
        from qharness_aiter.interpreter import assume_as_hint

        with assume_as_hint():
            packed, scale_codes = quant.dynamic_mxfp4_quant(x.float())
        k = x.shape[-1]
        codes = unpack_fp4(packed.contiguous())[..., :k]
        blocks = -(-k // MX_BLOCK)
        return QuantizedTensor(codes, e8m0_decode(scale_codes[:, :blocks].contiguous()), spec)
