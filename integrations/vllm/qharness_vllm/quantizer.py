"""vLLM's FP8 quantizers as qharness quantizers.

- ``vllm_quant_fp8_native``: `QuantFP8.forward_native`, vLLM's own pure-torch quantizer (the
  reference its compiled kernels are tested against): dynamic per-tensor and per-token
  scales bounded below by 1/(fp8_max*512), elements multiplied by the scale's reciprocal.
  All of it is vLLM's code. Its FP8 dtype and bound are fixed when vLLM is imported (the CPU
  platform's e4m3fn), so it runs e4m3fn specs only.
- ``vllm_scaled_fp8_quant``: `vllm._custom_ops.scaled_fp8_quant`, the entry point vLLM's
  layers call; on CPU its kernels are this adapter's (qharness_vllm.platform), so this
  quantizer tests vLLM's wrapper plus the adapter's model of the kernels, on e4m3fn and on a
  simulated gfx942 (e4m3fnuz, 224 bound).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from vllm import _custom_ops as ops
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.quantization.input_quant_fp8 import QuantFP8
from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape

from harness import (
    FP32,
    SCHEMES,
    WHOLE,
    KnownFinding,
    QuantizedTensor,
    QuantSpec,
    Support,
    check_scale_layout,
)
from qharness_vllm import ENGINE
from qharness_vllm.platform import platform_for

GROUPS: dict[tuple[int | None, int | None], GroupShape] = {
    (WHOLE, WHOLE): GroupShape.PER_TENSOR,
    (1, WHOLE): GroupShape.PER_TOKEN,
}
FP8_CONVENTIONS = frozenset({"min_scale_1_over_512max", "reciprocal_scale", "fnuz_clamp_224"})


def _fp8_support(name: str, spec: QuantSpec, formats: tuple[str, ...]) -> Support:
    if spec.format not in formats:
        return Support.no(f"{name}: FP8 {'/'.join(formats)} only, not {spec.format}")
    if spec.scale_fmt is not FP32 or spec.block not in GROUPS:
        return Support.no(
            f"{name}: per-tensor or per-token fp32 scales only, not {spec.granularity}"
        )
    return Support.yes()


def _codes(q: torch.Tensor) -> torch.Tensor:
    return q.contiguous().view(torch.uint8)


def _per_tensor_weight(scheme: str) -> bool:
    """Schemes whose weight has one scale per tensor (the per-tensor quant kernel's cases)."""
    return scheme in SCHEMES and SCHEMES[scheme].weight.granularity == "per_tensor"


class QuantFP8NativeQuantizer:
    name = "vllm_quant_fp8_native"
    engine = ENGINE
    conventions = FP8_CONVENTIONS

    def supports(self, spec: QuantSpec) -> Support:
        return _fp8_support(self.name, spec, ("e4m3fn",))

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        with set_current_vllm_config(VllmConfig()):  # CustomOps read the config when built
            op = QuantFP8(static=scale is not None, group_shape=GROUPS[spec.block])
        if scale is None:
            q, s = op.forward_native(x.float())
        else:
            q, s = op.forward_native(x.float(), scale.float().reshape(1))
        rows = 1 if spec.block == (WHOLE, WHOLE) else x.shape[0]
        return QuantizedTensor(_codes(q), s.float().reshape(rows, 1), spec)


# scaled_fp8_quant's docstring: a per-tensor scale is "0D or [1]", a 2-D scale is per group
# (its callers take scale.dim() == 2 for per-token); dynamic per-token scales are [M, 1]
SCALE_DOC = "vllm._custom_ops.scaled_fp8_quant's docstring and its callers' dim() test"
SCALE_KIND = {False: "dynamic per-tensor", True: "dynamic per-token"}


class ScaledFP8QuantQuantizer:
    name = "vllm_scaled_fp8_quant"
    engine = ENGINE
    conventions = FP8_CONVENTIONS
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            (
                "an artifact of this adapter, not a vLLM finding: its CPU model of "
                "_C::dynamic_scaled_fp8_quant (qharness_vllm.platform) computes the per-tensor "
                "scale as amax / fp8_max with no floor, so an all-zero (or float32-subnormal) "
                "tensor gets scale 0 and NaN codes; vLLM's CUDA/ROCm kernel was not run here"
            ),
            suites=frozenset({"quantizers"}),
            cases=frozenset({"degenerate"}),
            when=lambda case: _per_tensor_weight(case.scheme),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        return _fp8_support(self.name, spec, ("e4m3fn", "e4m3fnuz"))

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        per_token = spec.block == (1, WHOLE)
        with platform_for(spec.format):
            if scale is None:
                q, s = ops.scaled_fp8_quant(x.float(), use_per_token_if_dynamic=per_token)
            else:
                q, s = ops.scaled_fp8_quant(x.float(), scale.float().reshape(()))
        rows = x.shape[0] if per_token else 1
        if scale is None:  # the dynamic scale, as vLLM's callers receive it
            documented = [(rows, 1)] if per_token else [(), (1,)]
            check_scale_layout(self.name, SCALE_KIND[per_token], s, documented, SCALE_DOC)
        return QuantizedTensor(_codes(q), s.float().reshape(rows, 1), spec)
