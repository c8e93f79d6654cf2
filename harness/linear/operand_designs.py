"""Designed linear inputs where one small quantized value alone decides outputs.

The golden cases spread their magnitudes so that every scale tile matters; faults that
move only a tiny value hide there under the other terms' rounding. Two designs, built at
test time (no golden: the reference quantizer, held to the goldens elsewhere, quantizes
them) on one shape, each checked to hold before any path runs (`DesignedInput.holds`):

- ``subnormal_decides``: row 0 of the activation is one element at the top of its scale
  tile (so a dynamic scale is a known power of two, or amax / qmax) and one subnormal of
  the element format; every other element of the row is 0, and the weight's column under
  the top element is 0. Each output of row 0 is then the one product of that subnormal
  code and a weight value: exact, so its rounding is unique, and a kernel that flushes
  subnormal codes to zero returns 0 there (`rounding_interval` fails; the operand check
  fails on the code itself). Dynamic activation scales only: under a static scale the
  golden cases' planted subnormals already decide outputs.
- ``small_weight_block``: one column block of the weight (one scale tile wide) is 2^-20
  of the others, so its scale sits 20 binades under its row's largest. A scale a binade
  off there moves each output by 2^-21 to 2^-23 of its size (one of two to eight blocks
  per row): under every output dtype's rounding and the float32 accumulation bound, so
  no output check can see it; the weight scale check does. Weights with more than one
  scale tile per row, and scale formats that hold the spread (E8M0, float32).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import torch

from harness.core.formats import decode, get_format
from harness.core.inputs import generator, subnormal_points
from harness.core.quantize import QuantizedLinear, quantize, quantize_activation, quantize_linear
from harness.core.scale_formats import E8M0, FP32
from harness.core.schemes import SCHEMES, Scheme, get_scheme
from harness.core.spec import WHOLE
from harness.linear.cases import OUT_DTYPES, LoadedLinearCase
from harness.paths.base import LinearProblem
from harness.paths.case import Case

# M x N x K: K two 128-blocks (eight MX blocks), N one 128-row weight block.
DESIGN_SHAPE = (4, 128, 256)
DESIGN_OUT_DTYPES = ("bf16", "fp32")
SMALL_BLOCK = 2.0**-20  # the small weight block's size next to the others
TOP_SCALE = 2.0**-2  # the activation's top element is qmax * TOP_SCALE (fp16-safe)


@dataclass(frozen=True)
class DesignedInput:
    """A designed layer and input, with what must hold for the design to mean anything."""

    layer: QuantizedLinear
    x: torch.Tensor  # [M, K] float32, bf16-valued
    w: torch.Tensor  # [N, K] float32 before quantization
    holds: str  # "" when the design holds, else what does not

    def loaded(self) -> LoadedLinearCase:
        """As a golden case loads: the float64 product of the reference's operands."""
        xq = quantize_activation(self.x, self.layer.scheme, self.layer.input_scale)
        a = self.x.double() if xq is None else xq.dequantize(torch.float64)
        y_ref = (a @ self.layer.weight.dequantize(torch.float64).t()).float()
        bias = torch.zeros(self.w.shape[0])
        return LoadedLinearCase(self.layer, self.x, y_ref, {"x": self.x, "w": self.w, "bias": bias})


def _seeded(name: str, rows: int, cols: int) -> torch.Tensor:
    """Seeded bf16-valued normals, none zero."""
    t = torch.randn(rows, cols, generator=generator(name))
    return torch.where(t == 0, torch.ones_like(t), t).to(torch.bfloat16).float()


def _subnormal_decides(scheme: Scheme) -> DesignedInput:
    spec = scheme.activation
    if spec is None or not spec.dynamic:
        raise ValueError(f"{scheme.name}: subnormal_decides needs dynamic activation scales")
    m, n, k = DESIGN_SHAPE
    fmt = get_format(spec.format)
    top = spec.qmax * TOP_SCALE
    x = _seeded(f"designs/subnormal/{scheme.name}/x", m, k) * (top / 8)
    x = x.clamp(-top / 2, top / 2).to(torch.bfloat16).float()
    x[0] = 0.0
    x[0, 0] = top
    # The element scale the top element gives its tile, asked of the quantizer itself.
    element_scale = float(quantize(x[:1], spec).effective_scale()[0, 0])
    # The largest of the planted subnormals: a flush to zero moves it most.
    x[0, 1] = subnormal_points(fmt.name)[-1] * element_scale
    w = _seeded(f"designs/subnormal/{scheme.name}/w", n, k)
    w[:, 0] = 0.0
    # Under the subnormal, each row's largest magnitude (its sign kept): never a zero code.
    w[:, 1] = w.abs().amax(dim=1) * torch.where(w[:, 1] < 0, -1.0, 1.0)
    layer = quantize_linear(w, None, scheme)
    xq = quantize(x, spec, reference=True)
    value = float(decode(xq.codes[0, 1:2], fmt.name).abs()[0])
    products = (xq.dequantize(torch.float64)[0] * layer.weight.dequantize(torch.float64)).ne(0)
    holds = ""
    if not 0 < value < fmt.min_normal:
        holds = f"the designed element quantizes to {value}, not a subnormal of {fmt.name}"
    elif not bool((products.sum(dim=1) == 1).all() and products[:, 1].all()):
        holds = "row 0's outputs are not the one product of the subnormal code"
    return DesignedInput(layer, x, w, holds)


def _small_weight_block(scheme: Scheme) -> DesignedInput:
    m, n, k = DESIGN_SHAPE
    cols = scheme.weight.block[1]
    if cols is None:  # WHOLE: one tile per row (`_small_block_applies` excludes it)
        raise ValueError(f"{scheme.name}: small_weight_block needs several weight tiles per row")
    w = _seeded(f"designs/small_block/{scheme.name}/w", n, k)
    w[:, cols : 2 * cols] *= SMALL_BLOCK
    x = _seeded(f"designs/small_block/{scheme.name}/x", m, k)
    calibration = None if scheme.activation is None or scheme.activation.dynamic else x
    layer = quantize_linear(w, None, scheme, calibration)
    scales = layer.weight.scale.float()
    ratio = scales[:, 1] / scales.amax(dim=1)
    holds = (
        ""
        if bool((ratio <= 2.0**-16).all())
        else "the small block's scale is not 16 binades under its row's"
    )
    return DesignedInput(layer, x, w, holds)


def _subnormal_applies(scheme: Scheme) -> bool:
    spec = scheme.activation
    return spec is not None and spec.dynamic


def _small_block_applies(scheme: Scheme) -> bool:
    cols = scheme.weight.block[1]
    several = cols != WHOLE and DESIGN_SHAPE[2] // cols >= 2
    return several and scheme.weight.scale_fmt in (E8M0, FP32)


# design -> (which schemes it applies to, how to build it)
DESIGNS: dict[str, tuple[Callable[[Scheme], bool], Callable[[Scheme], DesignedInput]]] = {
    "subnormal_decides": (_subnormal_applies, _subnormal_decides),
    "small_weight_block": (_small_block_applies, _small_weight_block),
}


@cache
def _build(design: str, scheme: str) -> DesignedInput:
    """One design for one scheme, built once per process (every path gets the same)."""
    return DESIGNS[design][1](get_scheme(scheme))


@dataclass(frozen=True)
class DesignedCase(Case):
    """One design through one path in one output dtype (an engine's linear findings cover
    the designed inputs too)."""

    SUITE = "linear_designed"
    ID = ("scheme", "path", "design", "out_dtype")
    RECORD = ("scheme", "path", "case=design", "shape", "out_dtype")
    FINDING_SUITE = "linear"

    scheme: str
    path: str
    design: str
    out_dtype: str

    @property
    def shape(self) -> tuple[int, int, int]:
        return DESIGN_SHAPE

    @property
    def problem(self) -> LinearProblem:
        m, n, k = DESIGN_SHAPE
        return LinearProblem(m, n, k, False, OUT_DTYPES[self.out_dtype])

    def build(self) -> DesignedInput:
        return _build(self.design, self.scheme)


def designed_cases(paths: list[str]) -> Iterator[DesignedCase]:
    for scheme in sorted(SCHEMES):
        for design, (applies, _) in DESIGNS.items():
            if applies(SCHEMES[scheme]):
                for path in paths:
                    for out_dtype in DESIGN_OUT_DTYPES:
                        yield DesignedCase(scheme, path, design, out_dtype)
