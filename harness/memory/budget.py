"""Memory model of a quantized linear layer: bytes held after loading, bytes a forward may use.

Everything is derived from the `QuantSpec` (element bits from `harness.core.formats`, the scale
grid from `harness.core.quantize.scale_grid`, scale bytes from the scale format), so every scheme
registered later is covered without an entry here.

Three storage layouts describe weight bytes:

- ``held``: what a loaded `QuantizedLinear` really holds in this harness, for every path:
  one ``uint8`` code per element (FP4 and FP6 included) and one float32 value per scale
  (E8M0 scales included). The suites check the loaded layer against this model exactly.
- ``packed``: what a native kernel consumes: FP4 two codes per byte along K, FP6 and FP8 one
  code per byte (no torch kernel packs 6-bit codes), E8M0 scales one byte, fp32 scales four.
  MXFP4 [N, K] is N*K/2 + N*K/32 bytes.
- ``ideal``: the information content: exactly ``bits`` per code (FP6 = 6 bits), scales as in
  ``packed``. A bit-packed checkpoint stores this much.

A forward budget bounds the bytes a path's ``forward`` allocates beyond the loaded layer and
its input (what `harness.memory.measure_peak` measures). It is a sum of documented terms, each
the peak of one phase of the computation, so it bounds the peak whatever the order of frees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from harness.core.formats import get_format
from harness.core.quantize import QuantizedLinear, scale_grid, tile_shape
from harness.core.scale_formats import ScaleFormat
from harness.core.schemes import QuantSpec, Scheme
from harness.linear.paths import get_path
from harness.paths.base import LinearPath, LinearProblem, is_reference
from harness.platform.info import PlatformInfo

__all__ = [
    "HELD",
    "IDEAL",
    "KERNEL_ALLOWANCE",
    "LAYOUTS",
    "PACKED",
    "REFERENCE_ALLOWANCE",
    "BudgetTerm",
    "ForwardBudget",
    "StorageLayout",
    "TensorBytes",
    "forward_budget",
    "full_precision_weight_bytes",
    "held_bytes",
    "held_layer_bytes",
    "layer_bytes",
    "tensor_bytes",
]

_FP32 = 4  # bytes of a float32 value


# ------------------------------------------------------------------ storage layouts
@dataclass(frozen=True)
class StorageLayout:
    """How codes and scales of a quantized tensor occupy memory."""

    name: str
    description: str
    code_bits: Callable[[int], int]  # bits of the element format -> bits one code occupies
    scale_bytes: Callable[[ScaleFormat], int]  # bytes one block scale occupies
    packed_per_row: bool  # codes packed within each row along K (a row starts on a byte)


def _one_byte(bits: int) -> int:
    return 8


# Kernel layouts by element width: two FP4 codes share a byte; 6-bit codes are not packed.
_KERNEL_CODE_BITS: dict[int, int] = {4: 4, 6: 8, 8: 8}


def _kernel_code_bits(bits: int) -> int:
    try:
        return _KERNEL_CODE_BITS[bits]
    except KeyError:
        raise KeyError(
            f"no packed storage rule for {bits}-bit codes; add one to "
            "harness.memory.budget._KERNEL_CODE_BITS"
        ) from None


def _exact_bits(bits: int) -> int:
    return bits


HELD = StorageLayout(
    "held",
    "as a loaded QuantizedLinear holds it: uint8 code per element, float32 scale values",
    _one_byte,
    lambda fmt: _FP32,  # scale values as float32, whatever their format
    packed_per_row=True,
)
PACKED = StorageLayout(
    "packed",
    "as kernels consume it: FP4 two per byte along K, FP6/FP8 one per byte, E8M0 and E4M3 "
    "scales one byte",
    _kernel_code_bits,
    lambda fmt: fmt.stored_bytes,
    packed_per_row=True,
)
IDEAL = StorageLayout(
    "ideal",
    "information content: element bits exactly (FP6 = 6 bits), scales as packed",
    _exact_bits,
    lambda fmt: fmt.stored_bytes,
    packed_per_row=False,
)
LAYOUTS: dict[str, StorageLayout] = {layout.name: layout for layout in (HELD, PACKED, IDEAL)}


@dataclass(frozen=True)
class TensorBytes:
    codes: int
    scales: int

    @property
    def total(self) -> int:
        return self.codes + self.scales


def tensor_bytes(
    spec: QuantSpec, shape: tuple[int, int], layout: StorageLayout = HELD
) -> TensorBytes:
    """Bytes of the codes and scales of a quantized [rows, K] tensor in ``layout``."""
    rows, k = shape
    bits = layout.code_bits(get_format(spec.format).bits)
    if layout.packed_per_row:
        codes = rows * math.ceil(k * bits / 8)
    else:
        codes = math.ceil(rows * k * bits / 8)
    per_scale = layout.scale_bytes(spec.scale_fmt)
    grid_rows, grid_cols = scale_grid(spec, (rows, k))
    # a two-level format's per-tensor level is one float32 more
    global_bytes = spec.scale_fmt.global_scale_bytes
    return TensorBytes(codes, grid_rows * grid_cols * per_scale + global_bytes)


def layer_bytes(
    scheme: Scheme, n: int, k: int, bias: bool, layout: StorageLayout = HELD
) -> dict[str, int]:
    """Bytes of each part of a loaded linear layer [N, K]: weight codes and scales, the
    static input scale (float32, per-tensor), the bias (float32, as loaders keep it)."""
    weight = tensor_bytes(scheme.weight, (n, k), layout)
    static_input = scheme.activation is not None and not scheme.activation.dynamic
    return {
        "weight_codes": weight.codes,
        "weight_scales": weight.scales,
        "input_scale": _FP32 if static_input else 0,
        "bias": n * _FP32 if bias else 0,
    }


def held_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the storages behind ``tensors``, each storage counted once.

    The whole storage counts, not just the viewed elements: a layer whose codes are a slice
    of a larger buffer holds the larger buffer.
    """
    storages: dict[int, int] = {}
    for t in tensors:
        if t is not None:
            storage = t.untyped_storage()
            storages[storage._cdata] = storage.nbytes()
    return sum(storages.values())


def held_layer_bytes(layer: QuantizedLinear) -> dict[str, int]:
    """Measured counterpart of `layer_bytes`: the storages the layer really holds."""
    return {
        "weight": held_bytes([layer.weight.codes, layer.weight.scale, layer.weight.global_scale]),
        "layer": held_bytes(
            [
                layer.weight.codes,
                layer.weight.scale,
                layer.weight.global_scale,
                layer.input_scale,
                layer.bias,
            ]
        ),
    }


def full_precision_weight_bytes(n: int, k: int) -> int:
    """A bf16 copy of the weight, the smallest full-precision copy a path could make."""
    return n * k * torch.bfloat16.itemsize


# ------------------------------------------------------------------ forward budget
@dataclass(frozen=True)
class BudgetTerm:
    name: str
    nbytes: int
    why: str


@dataclass(frozen=True)
class ForwardBudget:
    """Bytes a forward call may allocate, as documented terms."""

    path: str
    terms: tuple[BudgetTerm, ...]
    allows_full_precision_weight: bool  # only reference paths may dequantize the weight

    @property
    def total(self) -> int:
        return sum(t.nbytes for t in self.terms)

    def describe(self) -> str:
        parts = ", ".join(f"{t.name} {t.nbytes}" for t in self.terms if t.nbytes)
        return f"budget {self.total} bytes for path {self.path!r} ({parts})"


# Reference codec (harness.core.formats.encode) at its peak keeps, per element: the float32
# quotient x/scale (4), ten float64/int64 tensors (xd, a, hi, lo, d_lo, d_hi, mag_code, code,
# the NaN fill and the final where: 80) and four bool masks (4). Its uint8 result is smaller.
REFERENCE_ENCODE_BYTES_PER_ELEMENT = 88
# Tile work over the tile grid padded to whole tiles (partial edge tiles make it larger than
# the tensor): tile_amax's |x| and padded copy (4 + 4), the scales repeated along rows (<= 4)
# and the expanded float32 scale per element (4).
REFERENCE_TILE_BYTES_PER_PADDED_ELEMENT = 16
# Reference decode (QuantizedTensor.dequantize): int64 code indices (8) and float32 values
# (4) while decoding; then values (4) and their product with the scales (4), plus expanded
# scales per padded tile-grid element (4, and <= 4 for the rows-repeated intermediate).
REFERENCE_DECODE_BYTES_PER_ELEMENT = 12
REFERENCE_DECODE_BYTES_PER_PADDED_ELEMENT = 8
# On CUDA/ROCm the allocator counts 512-byte blocks: at most 511 bytes of rounding for each
# of the (fewer than 128) allocations of one forward call of the built-in paths.
CUDA_ROUNDING_ALLOWANCE = 128 * 511
# The allocator also sees what no op returns: reduction scratch inside kernels and the codec's
# lookup tables copied to the device on each call (four tables of at most 1 KiB). A fixed
# allowance, far below any weight-sized copy in the memory suite's shapes.
DEVICE_SCRATCH_ALLOWANCE = 64 * 1024


def _padded_elements(spec: QuantSpec, shape: tuple[int, int]) -> int:
    tile_rows, tile_cols = tile_shape(spec, shape)
    grid_rows, grid_cols = scale_grid(spec, shape)
    return grid_rows * tile_rows * grid_cols * tile_cols


def _quantize_terms(spec: QuantSpec, shape: tuple[int, int], what: str) -> list[BudgetTerm]:
    elements = shape[0] * shape[1]
    return [
        BudgetTerm(
            f"{what}_quantize",
            REFERENCE_ENCODE_BYTES_PER_ELEMENT * elements
            + REFERENCE_TILE_BYTES_PER_PADDED_ELEMENT * _padded_elements(spec, shape),
            f"reference quantizer on the {what}, codes and float32 scales included",
        )
    ]


def _dequantize_term(spec: QuantSpec, shape: tuple[int, int], what: str) -> BudgetTerm:
    elements = shape[0] * shape[1]
    return BudgetTerm(
        f"{what}_dequantize",
        REFERENCE_DECODE_BYTES_PER_ELEMENT * elements
        + REFERENCE_DECODE_BYTES_PER_PADDED_ELEMENT * _padded_elements(spec, shape),
        f"reference float32 dequantization of the {what}",
    )


def _activation_terms(scheme: Scheme, problem: LinearProblem) -> list[BudgetTerm]:
    """Both built-in paths quantize activations with the reference quantizer (a kernel
    with a fused quantizer needs less); the term scales with M*K, never with the weight."""
    if scheme.activation is None:
        return [
            BudgetTerm(
                "activation_float32",
                problem.m * problem.k * _FP32,
                "float32 copy of the unquantized activation",
            )
        ]
    return _quantize_terms(scheme.activation, (problem.m, problem.k), "activation")


def _output_term(problem: LinearProblem) -> BudgetTerm:
    return BudgetTerm(
        "output",
        problem.m * problem.n * problem.out_dtype.itemsize,
        "the result y[M, N] in the output dtype",
    )


def _reference_terms(scheme: Scheme, problem: LinearProblem) -> list[BudgetTerm]:
    """The reference path dequantizes both operands to float32 by design (it is the model
    of what kernels compute, not a kernel): its budget allows a float32 weight."""
    m, n, k = problem.m, problem.n, problem.k
    terms = [_dequantize_term(scheme.weight, (n, k), "weight"), *_activation_terms(scheme, problem)]
    if scheme.activation is not None:
        terms.append(_dequantize_term(scheme.activation, (m, k), "activation"))
    terms.append(BudgetTerm("accumulator", m * n * _FP32, "float32 product a @ w.T"))
    if problem.bias:
        terms.append(BudgetTerm("bias_float32", n * _FP32, "bias as float32"))
        terms.append(BudgetTerm("bias_sum", m * n * _FP32, "float32 product plus bias"))
    terms.append(_output_term(problem))
    return terms


def _kernel_terms(scheme: Scheme, problem: LinearProblem) -> list[BudgetTerm]:
    """Any path that is not a reference: it consumes the held codes and scales as they are,
    so it has no weight-sized term at all."""
    m, n = problem.m, problem.n
    terms = _activation_terms(scheme, problem)
    terms.append(
        BudgetTerm("scale_normalization", (m + n) * _FP32, "scales reshaped to the kernel's ABI")
    )
    if problem.bias:
        terms.append(
            BudgetTerm("bias_cast", n * problem.out_dtype.itemsize, "bias cast to the output dtype")
        )
    terms.append(_output_term(problem))
    return terms


PathAllowance = Callable[[Scheme, LinearProblem], list[BudgetTerm]]
# A reference path (``is_reference``, harness.paths.base) may dequantize the weight; every
# other path, built-in or from an entry point, gets the kernel allowance, which has no room
# for a full-precision copy of the weight.
REFERENCE_ALLOWANCE: PathAllowance = _reference_terms
KERNEL_ALLOWANCE: PathAllowance = _kernel_terms


def forward_budget(
    path: LinearPath | str, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo
) -> ForwardBudget:
    """Budget for ``path.forward`` on ``problem``, beyond the loaded layer and the input.

    ``path`` is a path or its registered name; its ``is_reference`` picks the allowance.
    """
    if isinstance(path, str):
        path = get_path(path)
    reference = is_reference(path)
    terms = (REFERENCE_ALLOWANCE if reference else KERNEL_ALLOWANCE)(scheme, problem)
    if platform.is_cuda_alike:
        terms.append(
            BudgetTerm("allocator_rounding", CUDA_ROUNDING_ALLOWANCE, "CUDA/ROCm 512-byte blocks")
        )
        terms.append(
            BudgetTerm(
                "device_scratch",
                DEVICE_SCRATCH_ALLOWANCE,
                "kernel scratch and per-call table copies the allocator counts (persistent "
                "GEMM workspaces are kept out by a warm-up call on a copy of the layer)",
            )
        )
    return ForwardBudget(path.name, tuple(terms), reference)
