"""The built-in quantizer: the reference definition (harness.core.quantize), no conventions."""

from __future__ import annotations

import torch

from harness.core.quantize import QuantizedTensor, quantize
from harness.core.schemes import QuantSpec
from harness.paths.base import Support


class ReferenceQuantizer:
    """Quantizes exactly as the goldens were built; every other quantizer is held to it."""

    name = "reference"
    engine = "qharness"
    conventions: frozenset[str] = frozenset()
    is_reference = True

    def supports(self, spec: QuantSpec) -> Support:
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        return quantize(x, spec, scale)
