"""The quantized operands a path hands its kernel, for paths that can show them.

A fault in how a path quantizes its activation or lays out its weight can be too small to
move any output past its bound: subnormal codes flushed to zero under a dynamic scale, one
weight block's scale a binade off in a row whose other blocks dominate the sum. The
outputs cannot show it; the operands can. A path that can show them implements

    quantized_operands(layer, x, out_dtype) -> QuantizedOperands

with the arguments of ``forward``: the activation and the weight exactly as the path feeds
its kernel for that call (codes and scales, including NVFP4's per-tensor level), decoded
back into the harness's layout: one uint8 code per element [rows, K], float32 scales on
the spec's tile grid (`harness.core.quantize.QuantizedTensor`). The suite then compares
them bit for bit with the reference quantizer (`harness.linear.checks.operand_checks`).

The capability is optional: a path without the method is not asked (`exposes_operands`),
and its outputs are checked as before. A path whose kernel, for some problems, quantizes
no operand to show (a weight-only kernel its engine selects there) says so per problem
with ``shows_operands(scheme, problem) -> Support`` (`operands_shown`); the operand checks
then skip with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from harness.core.quantize import QuantizedLinear, QuantizedTensor
from harness.core.schemes import Scheme
from harness.paths.base import LinearProblem, Support


@dataclass(frozen=True)
class QuantizedOperands:
    """What a kernel multiplies: the quantized activation (None when the scheme leaves it
    unquantized) and the quantized weight, in the harness's layout."""

    activation: QuantizedTensor | None
    weight: QuantizedTensor


@runtime_checkable
class ExposesOperands(Protocol):
    """A path that can show the operands it feeds its kernel (optional capability)."""

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        """The operands ``forward(layer, x, out_dtype)`` hands its kernel."""
        ...


def _owner(cls: type, name: str) -> type | None:
    """The class in ``cls``'s MRO that defines ``name`` (None: none does)."""
    return next((k for k in cls.__mro__ if name in k.__dict__), None)


def exposes_operands(path: object) -> bool:
    """True when ``path`` shows the operands its ``forward`` feeds its kernel.

    It must implement ``quantized_operands``, and not only inherit it past its own
    ``forward``: a class that overrides ``forward`` of a path that shows its operands
    (a plugin subclassing `emulated` to reuse its code) feeds its kernel something else,
    and shows nothing until it overrides ``quantized_operands`` too (as `is_reference`
    counts only where declared).
    """
    if not callable(getattr(path, "quantized_operands", None)):
        return False
    cls = type(path)
    shows, runs = _owner(cls, "quantized_operands"), _owner(cls, "forward")
    return shows is None or runs is None or issubclass(shows, runs)


def path_operands(
    path: object, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
) -> QuantizedOperands:
    """The operands ``path`` shows for one call; a wrong return type is the path's error."""
    method = getattr(path, "quantized_operands")  # noqa: B009
    operands = method(layer, x, out_dtype)
    if not isinstance(operands, QuantizedOperands):
        name = getattr(path, "name", type(path).__name__)
        raise TypeError(
            f"path {name!r}: quantized_operands() returned {operands!r}, not QuantizedOperands"
        )
    return operands


def operands_shown(path: object, scheme: Scheme, problem: LinearProblem) -> Support:
    """Whether ``path`` shows its kernel's operands for this problem (default: always,
    for a path that `exposes_operands`); a path declares exceptions in ``shows_operands``."""
    method = getattr(path, "shows_operands", None)
    if method is None:
        return Support.yes()
    support = method(scheme, problem)
    if not isinstance(support, Support):
        name = getattr(path, "name", type(path).__name__)
        raise TypeError(f"path {name!r}: shows_operands() returned {support!r}, not Support")
    return support
