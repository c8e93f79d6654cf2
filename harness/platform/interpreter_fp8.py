"""FP8 NaN codes read as NaN under Triton's interpreter, as the formats define them.

Triton 3.9's interpreter widens FP8 (a load converted with ``.to``, and ``tl.dot``'s
operand conversion) by moving exponent and mantissa bits, and knows no NaN encodings:
e4m3fn's NaN codes 0x7F/0xFF read as +-480, e4m3fnuz's 0x80 as zero
(``tests/platform/test_triton_interpreter.py``). A NaN activation that a kernel receives as
its FP8 NaN code then comes out finite, which no GPU's FP8 operand does: OCP FP8 defines
S.1111.111 as NaN in e4m3fn, and the fnuz formats define 0x80 as NaN. On a simulated
platform a kernel would be failed on special values for the interpreter's decoding, not
its own algorithm.

`fp8_nan_codes_read_as_nan` corrects exactly that, for the duration of one kernel call on
a simulated platform: every widening of an FP8 element the interpreter does is its own,
except that the NaN codes of the table become NaN in the wider format (sign kept). Every
finite code decodes as before, bit for bit (checked by
``tests/platform/test_triton_interpreter.py``). What a GPU's MFMA or WGMMA does with a NaN
operand is the hardware's and is not checked here. The number of NaN codes read is
returned, so that it can be recorded.

`fp8_conversion_rounded_to_nearest_even` is the other direction: float32 -> FP8 conversions
rounded to nearest even, as Triton's RTNE conversion specifies and a GPU does, for the
engine adapters whose kernels convert to FP8 themselves (aiter's and SGLang's quantizers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# Triton's FP8 element type name -> whether each stored byte is one of its NaN codes.
# e5m2 (fp8e5) is IEEE-like: the interpreter's widening keeps its Inf and NaN already.
NAN_CODES: dict[str, Callable[[Any], Any]] = {
    "fp8e4nv": lambda bits: (bits & 0x7F) == 0x7F,  # e4m3fn: S.1111.111
    "fp8e4b8": lambda bits: bits == 0x80,  # e4m3fnuz: the negative zero code
    "fp8e5b16": lambda bits: bits == 0x80,  # e5m2fnuz: the negative zero code
}
# Widened formats whose NaN the replacement writes: (bits, mantissa bits).
WIDE_FORMATS: dict[str, tuple[int, int]] = {
    "fp16": (16, 10),
    "bf16": (16, 7),
    "fp32": (32, 23),
    "fp64": (64, 52),
}


@dataclass
class NanCodesRead:
    count: int = 0  # FP8 NaN codes widened to NaN by the replacement


def quiet_nan_bits(bits: int, mantissa: int, negative: Any) -> Any:
    """The quiet NaN of a ``bits``-wide IEEE format, negative where ``negative`` holds."""
    import numpy as np

    dtype = getattr(np, f"uint{bits}")
    exponent_all_ones = ((1 << (bits - 1 - mantissa)) - 1) << mantissa
    quiet = exponent_all_ones | (1 << (mantissa - 1))
    return np.where(negative, dtype(quiet | (1 << (bits - 1))), dtype(quiet))


@contextmanager
def fp8_nan_codes_read_as_nan() -> Iterator[NanCodesRead]:
    """Inside: the interpreter widens the FP8 NaN codes of `NAN_CODES` to NaN (module doc);
    every other conversion is the interpreter's own."""
    import numpy as np
    from triton.runtime import interpreter

    seen = NanCodesRead()
    original = interpreter._convert_float

    def convert_float(input: Any, input_dtype: Any, output_dtype: Any, rounding_mode: Any) -> Any:
        out = original(input, input_dtype, output_dtype, rounding_mode)
        is_nan = NAN_CODES.get(str(input_dtype))
        wide = WIDE_FORMATS.get(str(output_dtype))
        if is_nan is None or wide is None:
            return out
        codes = np.frombuffer(input.tobytes(), dtype=np.uint8).reshape(out.shape)
        nan = is_nan(codes)
        if not nan.any():
            return out
        seen.count += int(nan.sum())
        return np.where(nan, quiet_nan_bits(*wide, (codes & 0x80) != 0), out).astype(out.dtype)

    interpreter._convert_float = convert_float
    try:
        yield seen
    finally:
        interpreter._convert_float = original


# Triton's FP8 element types -> the torch dtype whose cast rounds as Triton's RTNE conversion
# specifies (round to nearest, ties to even).
_TORCH_FP8: dict[str, str] = {"fp8e4nv": "float8_e4m3fn", "fp8e4b8": "float8_e4m3fnuz"}


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
    import torch
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    seen = ConvertedToFP8()
    original = builder.create_fp_to_fp

    def create_fp_to_fp(src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        name = _TORCH_FP8.get(str(dst_type.scalar))
        target = None if name is None else getattr(torch, name)
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
