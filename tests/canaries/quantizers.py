"""Quantizer canaries (``qharness.quantizers``): each differs from its control in one respect.

Control: `ControlQuantizer`, the reference quantizer under another name (not marked as the
reference, so the suite holds it to the reference like any engine's quantizer).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from harness.core.conventions import with_conventions
from harness.core.quantize import QuantizedTensor, quantize
from harness.core.schemes import QuantSpec
from harness.paths.base import Support
from harness.paths.findings import KnownFinding


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


class E4M3MinNormalScaleQuantizer(ControlQuantizer):
    """A quantizer that bounds E4M3 block scales below at E4M3's smallest normal 2^-6
    instead of letting them round to its subnormals (down to 2^-9), undeclared."""

    name = "canary_quantizer_e4m3_min_normal_scale"

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        floored = with_conventions(spec, {"e4m3_block_scale_min_normal"})
        return super().quantize(x, floored, scale)


TIES_AWAY_FINDING = KnownFinding(
    "canary finding: FP4 ties round away from zero",
    suites=frozenset({"quantizers"}),
    behaves_as=frozenset({"fp4_ties_away"}),
)


class DeclaredFindingQuantizer(ControlQuantizer):
    """Correct but for one declared, scoped finding: FP4 ties away from zero, exactly as the
    finding's rule says. Its cases pass or xfail; none may fail."""

    name = "control_quantizer_finding"
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (TIES_AWAY_FINDING,)

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        return quantize(x, with_conventions(spec, TIES_AWAY_FINDING.behaves_as), scale)


class FaultUnderFindingQuantizer(DeclaredFindingQuantizer):
    """The declared finding and a second fault in the same function (float32 input rounded
    to bf16 first): the known finding must not hide it."""

    name = "canary_quantizer_fault_under_finding"

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        return super().quantize(x.to(torch.bfloat16).float(), spec, scale)


__all__ = [
    "Bf16InputQuantizer",
    "ControlQuantizer",
    "DeclaredFindingQuantizer",
    "E4M3MinNormalScaleQuantizer",
    "FaultUnderFindingQuantizer",
]
