"""vLLM's Triton MX quantizers as qharness quantizers (on a GPU, or interpreted).

- ``vllm_triton_mxfp4``: ``mxfp4_utils.downcast_to_mxfp`` (the portable Triton kernel
  ``mxfp4_quantize`` falls back to without XPU or aiter): E8M0 scale from amax rounded to
  FP4's one mantissa bit (``(bits + 0x200000) & 0x7F800000``, then ``floor(log2) - 2``: the
  harness's ``even`` mode), elements times the scale's reciprocal, E2M1 by integer
  round-to-nearest-even with a sticky bit, packed two per byte, low nibble first.
  Partial blocks are masked (cdiv grid), so every suite shape runs. The kernel asserts a
  bf16 or fp16 source, so the quantizer hands it bf16 (torch's round to nearest even) and
  declares the convention ``bf16_source``: it is held to the reference quantizer on the bf16
  rounding of its input (the golden tensors are bf16 values already; the designed, edge-case
  and scale-point tensors are not). Under the interpreter, bf16 -> float32 is made the
  exact widening for the call (`bf16_upcast_exact`: the interpreter garbles bf16
  subnormals). Findings: the even rule's top-binade carry (amax >= 1.75 * 2^127) gives
  2^127, not 2^126; NaN and Inf blocks get finite scales (docs/ENGINE-FINDINGS.md).
- ``vllm_triton_mxfp8``: ``mxfp8_utils._mxfp8_e4m3_quantize_triton``, the kernel
  ``mxfp8_e4m3_quantize`` selects on ROCm for 2-D, K % 32 == 0, non-swizzled input:
  E8M0 scale ``ceil(log2(amax / 448))`` in float32 (the ``rceil`` mode's definition,
  computed through a float32 log2), elements times ``exp2(127 - scale)``, converted to
  e4m3fn by the kernel's ``.to(float8e4nv)``. K % 32 != 0 is refused (vLLM's torch and
  Triton paths both require it). Not run under the interpreter, whose float32 -> FP8
  conversion is not a GPU's (`_FP8_CONVERSION_UNDER_INTERPRETER`).

Both kernels are vLLM's code; the adapter only converts layouts (FP4 unpacked, E8M0 bytes
to float32 powers of two, float8 bytes viewed as codes). They run where vLLM's Triton runs:
a GPU, or the simulated platform (`qharness_vllm.triton_platform`); elsewhere they skip.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from harness import MX_BLOCK, KnownFinding, QuantizedTensor, QuantSpec, Support
from qharness_vllm import ENGINE
from qharness_vllm.triton_platform import (
    bf16_upcast_exact,
    interpreting,
    simulated_arch,
    simulated_platform,
    triton_unavailable,
)

MX_TILE = (1, MX_BLOCK)
_FP8_CONVERSION_UNDER_INTERPRETER = (
    "the kernel converts float32 to e4m3fn with Triton's .to(), which Triton 3.9's "
    "interpreter rounds differently from a GPU (ties away from zero, and a tie below a power "
    "of two lands in the binade below: scripts/vllm_triton/interpreter_conversions.py), so "
    "its codes under the interpreter are the interpreter's; it runs on a GPU"
)


def _e8m0_to_float(codes: torch.Tensor) -> torch.Tensor:
    """E8M0 bytes -> float32 2^(code - 127), NaN for 0xFF (the harness's scale form)."""
    bits = codes.to(torch.int32) << 23
    scale = bits.view(torch.float32).clone()
    scale[codes.to(torch.int32) == 0] = 2.0**-127  # exponent field 0 is a subnormal power
    scale[codes.to(torch.int32) == 255] = float("nan")
    return scale


def _unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """[R, K/2] bytes, even element in the low nibble -> [R, K] codes."""
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack([low, high], dim=-1).reshape(packed.shape[0], -1)


class _VllmTritonMxQuantizer:
    engine = ENGINE
    conventions: frozenset[str] = frozenset()
    element_format: ClassVar[str]
    scale_rounding: ClassVar[str]
    known_findings: ClassVar[tuple[KnownFinding, ...]] = ()
    name: str

    def supports(self, spec: QuantSpec) -> Support:
        why = triton_unavailable(None)
        if why:
            return Support.no(f"{self.name}: {why}")
        if spec.format != self.element_format or spec.scale_format != "e8m0":
            return Support.no(
                f"{self.name}: MX {self.element_format} only, not {spec.format}/{spec.scale_format}"
            )
        if spec.block != MX_TILE:
            return Support.no(f"{self.name}: 1x32 blocks only, not {spec.granularity}")
        if spec.scale_rounding != self.scale_rounding:
            return Support.no(
                f"{self.name}: its scale is the {self.scale_rounding} mode, not "
                f"{spec.scale_rounding}"
            )
        return self.runs_here()

    def runs_here(self) -> Support:
        return Support.yes()


_AND_UNDER_INTERPRETER = (
    "a partial 32-block along K: _downcast_to_mxfp combines its masks with Python's `and` "
    "(`mask_src_quant and mask_n`), which Triton's compiler turns into an element-wise "
    "logical and but Triton 3.9's interpreter evaluates as Python truthiness, dropping the "
    "row mask and storing past the output (heap corruption); an interpreter artifact "
    "(docs/ENGINE-FINDINGS.md), so such shapes run on a GPU only"
)


class VllmTritonMxfp4Quantizer(_VllmTritonMxQuantizer):
    name = "vllm_triton_mxfp4"
    element_format = "e2m1"
    scale_rounding = "even"

    conventions: frozenset[str] = frozenset({"bf16_source"})
    # docs/ENGINE-FINDINGS.md, "vLLM 0.32 (Triton kernels): `downcast_to_mxfp` ..."
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            (
                "vLLM downcast_to_mxfp at the top of float32: a block amax >= 1.75 * 2^127 "
                "gets scale 2^127 where the even rule its own comment states "
                "(floor(log2(rounding(amax))) - 2) gives 2^126: the rounded amax overflows "
                "to Inf and the clamp to 127 takes it "
                "(integrations/vllm/findings/downcast_to_mxfp_edges.py)"
            ),
            suites=frozenset({"quantizers"}),
            cases=frozenset({"mx_scale_points"}),
        ),
        KnownFinding(
            (
                "vLLM downcast_to_mxfp on non-finite blocks, measured under Triton's "
                "interpreter: an Inf amax (float32 max too, which bf16 rounds to Inf) gives "
                "the finite scale 2^127 (0xFE) where OCP MX gives the NaN scale 0xFF, and "
                "NaN elements are left out of the block amax (a finite scale from the "
                "others, the NaN coded +-6) "
                "(integrations/vllm/findings/downcast_to_mxfp_edges.py)"
            ),
            suites=frozenset({"quantizers"}),
            cases=frozenset({"edge_cases"}),
        ),
    )

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if shape[-1] % MX_BLOCK and interpreting():
            return Support.no(f"{self.name}: {_AND_UNDER_INTERPRETER}")
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        from vllm.model_executor.layers.quantization.utils.mxfp4_utils import downcast_to_mxfp

        k = x.shape[-1]
        with simulated_platform(simulated_arch()), bf16_upcast_exact():
            packed, scales, _ = downcast_to_mxfp(x.to(torch.bfloat16), axis=-1)
        codes = _unpack_fp4(packed)[:, :k]
        return QuantizedTensor(codes.contiguous(), _e8m0_to_float(scales), spec)


class VllmTritonMxfp8Quantizer(_VllmTritonMxQuantizer):
    name = "vllm_triton_mxfp8"
    element_format = "e4m3fn"
    scale_rounding = "rceil"

    def runs_here(self) -> Support:
        if interpreting():
            return Support.no(f"{self.name}: {_FP8_CONVERSION_UNDER_INTERPRETER}")
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if shape[-1] % MX_BLOCK:
            return Support.no(
                f"{self.name}: vLLM's MXFP8 quant requires K % 32 == 0 (K = {shape[-1]})"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        from vllm.model_executor.layers.quantization.utils.mxfp8_utils import (
            _mxfp8_e4m3_quantize_triton,
        )

        with simulated_platform(simulated_arch()):
            q, scales = _mxfp8_e4m3_quantize_triton(x.float())
        codes = q.contiguous().view(torch.uint8)
        return QuantizedTensor(codes, _e8m0_to_float(scales), spec)
