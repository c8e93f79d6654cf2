"""Quantizer canaries (``qharness.quantizers``): each differs from its control in one respect.

Control: `ControlQuantizer`, the reference quantizer under another name (not marked as the
reference, so the suite holds it to the reference like any engine's quantizer).
"""

from __future__ import annotations

import torch

from harness.core.quantize import QuantizedTensor, quantize
from harness.core.schemes import QuantSpec
from harness.paths.base import Support


class ControlQuantizer:
    """Correct: the reference quantizer. Must pass every test its canaries are run on."""

    name = "control_quantizer"
    engine = "qharness-canaries"
    conventions: frozenset[str] = frozenset()

    def supports(self, spec: QuantSpec) -> Support:
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        return quantize(x, spec, scale)


class Bf16InputQuantizer(ControlQuantizer):
    """A quantizer that rounds a float32 input to bf16 first (as a kernel whose input
    pointer is typed bf16 does), then quantizes it correctly."""

    name = "canary_quantizer_bf16_input"

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        return super().quantize(x.to(torch.bfloat16).float(), spec, scale)


__all__ = ["Bf16InputQuantizer", "ControlQuantizer"]
