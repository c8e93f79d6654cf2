"""The quantizer protocol: a kernel that turns a high-precision tensor into codes and scales.

Engines ship quantization as kernels of their own (a per-tensor FP8 quant, a dynamic
per-token quant, an MX cast); scale-rounding and edge-case bugs live there. A quantizer
takes a 2-D float tensor ``[rows, K]`` (K the reduction dim) and a `QuantSpec`, and returns a
`QuantizedTensor` in the harness's representation: uint8 codes, one per element, in the
harness codec's encoding (harness.core.formats), and float32 scales on the spec's tile grid
(E8M0 scales as float32 powers of two, NaN for code 0xFF). Adapters convert from the
engine's layout (float8 dtypes, packed FP4, E8M0 bytes) and say so in ``describe``.

A quantizer declares the engine conventions it follows (``conventions``, names from
harness.core.conventions); the suites then expect what the reference quantizer computes
with those conventions in effect, bit for bit.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from harness.core.quantize import QuantizedTensor
from harness.core.schemes import QuantSpec
from harness.paths.base import Support


@runtime_checkable
class Quantizer(Protocol):
    """What a quantizer provides. Register others through ``qharness.quantizers``."""

    name: str
    conventions: frozenset[str]  # engine conventions it follows (harness.core.conventions)

    def supports(self, spec: QuantSpec) -> Support:
        """Whether this quantizer can quantize a tensor under ``spec``; the reason is shown."""
        ...

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        """Codes and scales of ``x``; ``scale`` (tile grid, float32) is given for static specs."""
        ...


def shape_support(quantizer: object, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
    """Whether ``quantizer`` takes a tensor of ``shape`` under ``spec`` (optional
    ``supports_shape``; default yes). Kernels that refuse partial blocks say so here, and
    the suite skips those cases with their reason instead of failing on the refusal."""
    method = getattr(quantizer, "supports_shape", None)
    return Support.yes() if method is None else method(spec, tuple(shape))


def engine_of(quantizer: object) -> str:
    """The engine and version a quantizer drives (optional ``engine`` attribute)."""
    return str(getattr(quantizer, "engine", "qharness"))
