"""Running an SGLang Triton kernel under Triton's interpreter: float32 -> FP8 conversions
rounded to nearest even, as Triton's RTNE conversion specifies and a GPU does (the same
replacement as the aiter adapter's, kept per adapter so adapters never import each other).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

# Triton's FP8 element types -> the torch dtype whose cast rounds as Triton's RTNE conversion
# specifies (round to nearest, ties to even).
_TORCH_FP8: dict[str, torch.dtype] = {
    "fp8e4nv": torch.float8_e4m3fn,
    "fp8e4b8": torch.float8_e4m3fnuz,
}


@dataclass
class ConvertedToFP8:
    count: int = 0  # float32 elements converted to FP8 by the replacement


@contextmanager
def fp8_conversion_rounded_to_nearest_even() -> Iterator[ConvertedToFP8]:
    """Inside: the interpreter converts float32 to e4m3fn / e4m3fnuz by round to nearest
    even (torch's cast) instead of its own bit conversion.

    Triton 3.9's interpreter rounds that conversion half away from zero and can lose a
    mantissa carry's exponent step (docs/ENGINES-ADAPTERS.md, the interpreter's numerics),
    which is not what Triton's RTNE conversion specifies nor what a GPU does. A kernel that
    converts to FP8 itself (aiter's fused FP8 quant) is then checked for its own algorithm
    (amax, scale, reciprocal, clamp, masks, layout) with the conversion a GPU does; the
    conversion itself is the hardware's and not checked here. Every other conversion is the
    interpreter's. The number of elements converted is returned, so it is recorded."""
    import numpy as np
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    seen = ConvertedToFP8()
    original = builder.create_fp_to_fp

    def create_fp_to_fp(src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        target = _TORCH_FP8.get(str(dst_type.scalar))
        if target is None or str(src.dtype.scalar) != "fp32":
            return original(src, dst_type, rounding_mode)
        values = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32))
        seen.count += values.numel()
        codes = values.to(target).view(torch.uint8).numpy()
        return interpreter.TensorHandle(codes, dst_type.scalar)

    builder.create_fp_to_fp = create_fp_to_fp
    try:
        yield seen
    finally:
        builder.create_fp_to_fp = original
