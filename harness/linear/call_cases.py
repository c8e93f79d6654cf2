"""Cases where the same layer is called in two ways that must give the same bits.

A path's output must depend only on its layer and its input, not on what ran before it
(``order``: shape A, then shape B with the same M and another K, then A again: a config
cache that callers write into, a reused workspace or a split-K field left behind shows as
a different second A), nor on how the tokens are laid out (``batched``: a
[batch, seq, hidden] activation, which serving engines hand their linear layers, against
the same rows as one [tokens, hidden] matrix: rows dropped or misaligned when the kernel
narrows its output or its per-token scales to the first dimension). Both compare a path
with itself, bit for bit: the same operands through the same kernel (the batched case
keeps M, so the kernel's configuration by M is unchanged).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from harness.core.inputs import bias_vector, scaled_normal
from harness.core.quantize import QuantizedLinear, quantize_linear
from harness.core.schemes import SCHEMES, get_scheme
from harness.linear.cases import OUT_DTYPES
from harness.paths.base import LinearProblem
from harness.paths.case import Case

# (first and third call, second call): one M, K 2048 then 384 (a split-K field written for
# K=384 and read back for K=2048 covers only part of it), N a whole 128-wide block; K values
# no other case uses, so each call is the first of its shape in the process (a cache that
# a shape's first call writes into shows whatever ran before)
ORDER_SHAPES: tuple[tuple[int, int, int], tuple[int, int, int]] = ((8, 128, 2048), (8, 128, 384))
BATCH, SEQ = 2, 4  # the batched case's leading dimensions: 8 tokens, as [2, 4, K]
BATCHED_SHAPE = (BATCH * SEQ, 128, 256)
CALL_KINDS = ("order", "batched")


@dataclass(frozen=True)
class CallCase(Case):
    """One path on one scheme, called two ways (``kind``)."""

    SUITE = "linear"
    ID = ("scheme", "path", "kind", "out_dtype")
    RECORD = ("scheme", "path", "shape", "out_dtype", "kind")
    FINDING_SUITE = "linear"

    scheme: str
    path: str
    kind: str
    out_dtype: str = "bf16"

    @property
    def shape(self) -> tuple[int, int, int]:
        return ORDER_SHAPES[0] if self.kind == "order" else BATCHED_SHAPE

    @property
    def problem(self) -> LinearProblem:
        m, n, k = self.shape
        return LinearProblem(m, n, k, True, OUT_DTYPES[self.out_dtype])

    @property
    def problems(self) -> tuple[LinearProblem, ...]:
        """Every problem the case runs (the path must support each)."""
        if self.kind != "order":
            return (self.problem,)
        dtype = OUT_DTYPES[self.out_dtype]
        return tuple(LinearProblem(m, n, k, True, dtype) for m, n, k in ORDER_SHAPES)

    @property
    def finding_case_name(self) -> str:
        return f"call_{self.kind}"


def call_cases(paths: list[str]) -> Iterator[CallCase]:
    for scheme in sorted(SCHEMES):
        for path in paths:
            for kind in CALL_KINDS:
                yield CallCase(scheme, path, kind)


def call_layer(
    scheme_name: str, shape: tuple[int, int, int]
) -> tuple[QuantizedLinear, torch.Tensor]:
    """A seeded layer with bias and its bf16-valued float32 input for one shape."""
    scheme = get_scheme(scheme_name)
    m, n, k = shape
    base = f"linear/calls/{scheme_name}/{m}x{n}x{k}"
    x = scaled_normal(f"{base}/x", m, k, scheme.activation)
    w = scaled_normal(f"{base}/w", n, k, scheme.weight)
    calibration = scaled_normal(f"{base}/calibration", m, k, scheme.activation)
    layer = quantize_linear(w, bias_vector(f"{base}/bias", n), scheme, calibration=calibration)
    return layer, x
