"""Deprecated: the older plugin-author module; import from ``harness`` instead.

``from harness.quantize import quantize_activation`` predates the front door
(``from harness import quantize_activation``), which is the stable import; the
implementation lives in `harness.core.quantize`. Importing this module emits a
DeprecationWarning naming the replacement and otherwise behaves as before: it is kept
so existing plugins still load, and will be removed in a later release.

The front door also exports the function ``harness.quantize``; importing this module
rebinds that name to the module, so the module is callable and quantizes exactly as the
function does: ``harness.quantize(x, spec)`` works either way.
"""

import sys
import warnings
from types import ModuleType
from typing import Any

from harness.core.quantize import (
    QuantizedLinear,
    QuantizedTensor,
    quantize,
    quantize_activation,
)

__all__ = ["QuantizedLinear", "QuantizedTensor", "quantize", "quantize_activation"]

DEPRECATION = (
    "harness.quantize (the module) is deprecated: import quantize, quantize_activation, "
    "QuantizedTensor and QuantizedLinear from harness (defined in harness.core.quantize)"
)
warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=2)


class _CallableModule(ModuleType):
    """This module, callable as `harness.core.quantize.quantize`."""

    def __call__(self, *args: Any, **kwargs: Any) -> QuantizedTensor:
        return quantize(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
