"""The path protocol: one way of executing a quantized linear layer on a platform."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from harness.core.quantize import QuantizedLinear
from harness.core.schemes import Scheme
from harness.platform.info import PlatformInfo


@dataclass(frozen=True)
class LinearProblem:
    """The shape and options of one linear call: y[M, N] = x[M, K] @ W[N, K]^T (+ bias)."""

    m: int
    n: int
    k: int
    bias: bool
    out_dtype: torch.dtype


@dataclass(frozen=True)
class Support:
    """Whether a path can run a problem, and if not, why (shown as the skip reason)."""

    ok: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> Support:
        return cls(True)

    @classmethod
    def no(cls, reason: str) -> Support:
        return cls(False, reason)


@runtime_checkable
class LinearPath(Protocol):
    """What a path provides. Register built-ins in harness.paths, others by entry point."""

    name: str

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        """Say whether this path can run the problem here; the reason is reported."""
        ...

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        """Compute x @ W^T + bias in ``out_dtype`` from the loaded (quantized) layer."""
        ...


def output_roundings(path: LinearPath, scheme: Scheme, problem: LinearProblem) -> int:
    """How many times ``path`` rounds to the output dtype (optional method; default one).

    A path that rounds its product and then adds the bias in the output dtype rounds twice
    and must say so: the suites then widen the bound and drop the bit-exact interval check.
    """
    method = getattr(path, "output_roundings", None)
    return 1 if method is None else int(method(scheme, problem))


def is_reference(path: object) -> bool:
    """True for a path that is itself a reference model, so the suites do not compare it
    with ``emulated``.

    Only an ``is_reference`` declared by the path's own class (or set on the instance)
    counts, never one inherited: a plugin that subclasses the emulated path to reuse its
    code is still a path under test and is compared with ``emulated`` like any other.
    """
    own = getattr(path, "__dict__", {})
    declared = own.get("is_reference", type(path).__dict__.get("is_reference", False))
    return bool(declared)
