"""vLLM's torch MXFP8 quantizer (`mxfp8_utils._mxfp8_e4m3_quantize_torch`) as a quantizer.

The second copy of vLLM's MXFP8 quantizer: `mxfp8_e4m3_quantize` runs FlashInfer's kernel
on SM100, the Triton kernel on ROCm (`vllm_triton_mxfp8`), and this torch code everywhere
else, the CPU build included (MXFP8 MoE emulation, `Mxfp8EmulationTritonExperts`). Its
scale is the rceil rule computed as ``ceil(log2(amax / 448))`` in float32 (amax clamped
below at float32's smallest normal, the biased exponent clamped to [0, 254]); the elements
are ``x / 2^(scale)`` cast to e4m3fn. The adapter converts layouts only (e4m3fn bytes as
codes, E8M0 bytes decoded to float32 powers of two); it runs on any CPU. Its MX edge-case
blocks show a finding (integrations/vllm/findings/vllm_mxfp8_torch_quant_edges.py): NaN and
Inf blocks get finite scales, and the float32 ``log2`` puts a block just above 448 * 2^k
one binade low.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from harness import MX_BLOCK, KnownFinding, QuantizedTensor, QuantSpec, Support
from qharness_vllm import ENGINE

MX_TILE = (1, MX_BLOCK)


def e8m0_to_float(codes: torch.Tensor) -> torch.Tensor:
    """E8M0 bytes -> float32 2^(code - 127), NaN for 0xFF (the harness's scale form)."""
    bits = codes.to(torch.int32) << 23
    scale = bits.view(torch.float32).clone()
    scale[codes.to(torch.int32) == 0] = 2.0**-127  # exponent field 0 is a subnormal power
    scale[codes.to(torch.int32) == 255] = float("nan")
    return scale


class VllmMxfp8TorchQuantizer:
    name = "vllm_mxfp8_quantize_torch"
    engine = ENGINE
    conventions: frozenset[str] = frozenset()
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            "vLLM 0.32 _mxfp8_e4m3_quantize_torch at its scale rule's edges: a block one "
            "float32 step above 448 * 2^k gets 2^k, not 2^(k+1) (ceil(log2(amax / 448)) in "
            "float32 rounds the excess away; 238 of the finite k in -127..127), its largest "
            "element saturating; a NaN block gets scale byte 0 (NaN cast to uint8) and NaN "
            "codes, an Inf block 254 (2^127), where OCP MX gives both the NaN scale 0xFF "
            "(integrations/vllm/findings/vllm_mxfp8_torch_quant_edges.py)",
            suites=frozenset({"quantizers"}),
            cases=frozenset({"edge_cases"}),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        if spec.format != "e4m3fn" or spec.scale_format != "e8m0" or spec.block != MX_TILE:
            return Support.no(f"{self.name}: MXFP8 (e4m3fn, 1x32 E8M0 scales) only")
        if spec.scale_rounding != "rceil":
            return Support.no(
                f"{self.name}: its scale is the rceil rule, not {spec.scale_rounding}"
            )
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if shape[-1] % MX_BLOCK:
            return Support.no(f"{self.name}: asserts K % 32 == 0 (K = {shape[-1]})")
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError(f"{self.name} computes its own scales (MX is dynamic)")
        from vllm.model_executor.layers.quantization.utils.mxfp8_utils import (
            _mxfp8_e4m3_quantize_torch,
        )

        q, scales = _mxfp8_e4m3_quantize_torch(x.float())
        codes = q.contiguous().view(torch.uint8)
        return QuantizedTensor(codes, e8m0_to_float(scales), spec)
