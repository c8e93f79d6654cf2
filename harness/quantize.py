"""Public API for plugin authors: the quantizer a path calls on its activations.

docs/PATHS.md shows ``from harness.quantize import quantize_activation``; this module keeps
that import stable. The implementation lives in `harness.core.quantize`.
"""

from harness.core.quantize import (
    QuantizedLinear,
    QuantizedTensor,
    quantize,
    quantize_activation,
)

__all__ = ["QuantizedLinear", "QuantizedTensor", "quantize", "quantize_activation"]
