"""vLLM's NVFP4 emulation quantizer (`nvfp4_emulation_utils.ref_nvfp4_quant`) as a quantizer.

``ref_nvfp4_quant(x, global_scale, 16)`` is the quantize step of vLLM's NVFP4 emulation
(``ref_nvfp4_quant_dequant``, which its emulated W4A4 linear runs on the activation on
CPU). It takes the per-tensor scale *inverted*, ``g_inv`` (compressed-tensors checkpoints
store it so, and vLLM's ``CompressedTensorsW4A4Fp4`` keeps the input's that way), and
returns the E2M1 values and the block scales as float32. vLLM has no step that derives a
global scale from a tensor (checkpoints carry it), so the adapter takes the reference's
``g`` (given for a static activation, else `compute_global_scale` of the tensor) and hands
vLLM ``fp32(1 / g)``, as a checkpoint would; everything after that is vLLM's code. The
adapter only converts layouts: E2M1 values to codes (exact: they are E2M1 values), the
block scales as the [rows, K / 16] grid, ``g`` as the [1, 1] global.

Conventions declared (harness.core.conventions), read from ``ref_nvfp4_quant``,
``get_reciprocal`` and ``cast_to_fp4``: `two_level_inverted_global` (block scale
``E4M3(g_inv * (amax * (1/6)))``, elements times ``1 / (s * (1 / g_inv))`` with 1/0 read
as 1e-8, a scaled -0 encoded +0) and `e4m3_inf_block_scale_448` (the clamp to +-448 before
the cast saturates an Inf block). Block scales may be E4M3 subnormals or zero, as in the
reference. Limit of the API, not a finding: K a multiple of 16.
"""

from __future__ import annotations

import torch
from vllm.model_executor.layers.quantization.utils.nvfp4_emulation_utils import (
    ref_nvfp4_quant,
)

from harness import (
    E4M3_X_FP32,
    NVFP4_BLOCK,
    QuantizedTensor,
    QuantSpec,
    Support,
    compute_global_scale,
    encode,
)
from qharness_vllm import ENGINE


def _spec_problem(spec: QuantSpec) -> str:
    if spec.scale_fmt is not E4M3_X_FP32 or spec.block != (1, NVFP4_BLOCK):
        return f"not NVFP4 (1x{NVFP4_BLOCK} E4M3 x FP32 scales), {spec.scale_format} scales"
    if spec.format != "e2m1":
        return f"NVFP4 elements are e2m1, not {spec.format}"
    return ""


class RefNvfp4QuantQuantizer:
    name = "vllm_ref_nvfp4_quant"
    engine = ENGINE
    conventions = frozenset({"two_level_inverted_global", "e4m3_inf_block_scale_448"})

    def supports(self, spec: QuantSpec) -> Support:
        problem = _spec_problem(spec)
        return Support.no(f"vLLM ref_nvfp4_quant: {problem}") if problem else Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        # ref_nvfp4_quant reshapes to [m, K / 16, 16]: no partial blocks (an API limit)
        if shape[-1] % NVFP4_BLOCK:
            return Support.no(
                f"vLLM ref_nvfp4_quant: K={shape[-1]} is not a multiple of {NVFP4_BLOCK} "
                "(no partial NVFP4 blocks)"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        hp = x.float()
        g = (
            compute_global_scale(hp.abs().amax(), spec)
            if scale is None
            else scale.float().reshape(1, 1)
        )
        g_inv = (1.0 / g.reshape(())).to(torch.float32)  # as compressed-tensors stores it
        values, blocks = ref_nvfp4_quant(hp, g_inv, NVFP4_BLOCK)
        codes = encode(values.reshape(hp.shape), "e2m1")
        return QuantizedTensor(codes, blocks.reshape(hp.shape[0], -1), spec, g.reshape(1, 1))
