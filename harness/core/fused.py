"""Fused CPU kernels: `large_cpu_compiled` runs a codec function through `torch.compile`
when it is given a large CPU tensor, so that its operations become one pass over memory.

Eager, every tensor operation of a quantize is its own pass over the tensor (abs, amax,
divide, a dozen integer steps of the element encode, FP4 packing): on a 4096x4096 float32
tensor that is about ten times the memory traffic of one copy. Inductor fuses each decorated
function into one loop. The function is the same Python either way, so the arithmetic and
the bits are the same (tests/core/test_fused.py sweeps the compiled kernels against the
reference codecs).

Only CPU tensors of at least `FUSED_MIN_ELEMENTS` elements take the compiled path (scale
grids, 32 times smaller, from `SCALE_GRID_MIN_ELEMENTS`):
compiling costs one to six seconds per format and tile shape (measured on two cores), which
a large tensor pays back at once and a small one never does, so the suites' cases, all
small, stay eager and never compile. If compiling fails (no C++ compiler, a platform
inductor does not support), the eager function runs instead, from then on, and
`fused_status` says why. ``QHARNESS_FUSED=0`` switches the path off; ``QHARNESS_FUSED=force``
sends CPU tensors of every size through it (the self-tests sweep small tensors that way).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import torch

__all__ = [
    "FUSED_MIN_ELEMENTS",
    "FUSED_VARIABLE",
    "SCALE_GRID_MIN_ELEMENTS",
    "fused_status",
    "large_cpu_compiled",
]

FUSED_MIN_ELEMENTS = 1 << 20
# Functions on a scale grid (one value per 32-element MX block) see a large tensor's grid,
# 32 times smaller: they compile from this size, so a large quantize has no eager step left.
SCALE_GRID_MIN_ELEMENTS = FUSED_MIN_ELEMENTS // 32
FUSED_VARIABLE = "QHARNESS_FUSED"
RECOMPILE_LIMIT = 256

P = ParamSpec("P")
R = TypeVar("R")

_failure: list[str] = []  # why compiling failed in this process, once it has


def _mode() -> str:
    value = os.environ.get(FUSED_VARIABLE, "").strip().lower()
    if value in ("0", "off", "false", "no"):
        return "off"
    return "force" if value == "force" else "auto"


def fused_status() -> str:
    """One line: whether large CPU tensors take the compiled kernels, and if not, why."""
    if _mode() == "off":
        return f"off ({FUSED_VARIABLE}=0)"
    if _failure:
        return f"unavailable, eager codecs run instead: {_failure[0]}"
    if _mode() == "force":
        return "on for CPU tensors of every size (forced)"
    return f"on for CPU tensors of >= {FUSED_MIN_ELEMENTS} elements"


def _wanted(x: object, min_elements: int) -> bool:
    mode = _mode()
    if mode == "off" or _failure or not isinstance(x, torch.Tensor) or x.device.type != "cpu":
        return False
    return mode == "force" or x.numel() >= min_elements


def large_cpu_compiled(
    fn: Callable[P, R], min_elements: int = FUSED_MIN_ELEMENTS
) -> Callable[P, R]:
    """``fn``, compiled (fullgraph) when its first argument is a CPU tensor of at least
    ``min_elements`` elements, else as is.

    ``fn`` must be plain tensor operations with no branch on tensor data; non-tensor
    arguments (format constants) become compile-time constants, one compiled kernel each.
    """

    @functools.cache
    def compiled() -> Callable[P, R]:
        return torch.compile(fn, fullgraph=True)  # lazily: importing dynamo takes a while

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if not (args and _wanted(args[0], min_elements)):
            return fn(*args, **kwargs)
        try:
            # One kernel per format constant and tile layout, all from one code object:
            # more than dynamo's default of 8 recompiles (a fullgraph failure past it).
            with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
                return compiled()(*args, **kwargs)
        except Exception as exc:  # decided below: bad input, or no compiler here
            result = fn(*args, **kwargs)  # bad input raises here too, as it would eagerly
            text = str(exc).strip().splitlines()
            _failure.append(f"{type(exc).__name__}: {text[0] if text else ''}")
            return result

    return run
