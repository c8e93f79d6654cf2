"""Public API for plugin authors: the quantizer a path calls on its activations.

docs/PATHS.md shows ``from harness.quantize import quantize_activation``; this module keeps
that import stable (the front door, ``from harness import quantize_activation``, is the
preferred one). The implementation lives in `harness.core.quantize`.

The front door also exports the function ``harness.quantize``; importing this module
rebinds that name to the module, so the module is callable and quantizes exactly as the
function does: ``harness.quantize(x, spec)`` works either way.
"""

import sys
from types import ModuleType
from typing import Any

from harness.core.quantize import (
    QuantizedLinear,
    QuantizedTensor,
    quantize,
    quantize_activation,
)

__all__ = ["QuantizedLinear", "QuantizedTensor", "quantize", "quantize_activation"]


class _CallableModule(ModuleType):
    """This module, callable as `harness.core.quantize.quantize`."""

    def __call__(self, *args: Any, **kwargs: Any) -> QuantizedTensor:
        return quantize(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
