"""Check a path's forward call against its memory budget (`harness.memory.budget`).

One function serves the memory suite and the self-tests that feed it deliberately wasteful
paths, so the check that passes real paths is the one shown to catch bad ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.core.quantize import QuantizedLinear, QuantizedTensor
from harness.memory.budget import (
    DEVICE_SCRATCH_ALLOWANCE,
    ForwardBudget,
    forward_budget,
    full_precision_weight_bytes,
    held_bytes,
)
from harness.memory.tracker import measure_peak
from harness.paths.base import LinearPath, LinearProblem
from harness.platform.info import PlatformInfo

__all__ = [
    "MEMORY_SHAPES",
    "ForwardMemory",
    "check_forward_memory",
    "check_forward_peak",
    "reachable_bytes",
    "retention_allowance",
]

# M x N x K for memory checks, with N much larger than M: a kernel budget (terms in M*K and
# M*N) stays below a bf16 copy of the weight (N*K*2), so a copy cannot hide inside it. K and N
# are multiples of 128, so block-scaled schemes have whole weight tiles. The last has a long
# K (33 * 128: no multiple of 256..1024, as real layers' K often is not), its weight under
# 2^20 elements so no codec compiles (harness/core/fused.py).
MEMORY_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 512, 256),
    (4, 1024, 512),
    (16, 2048, 256),
    (2, 128, 4224),
)


def check_forward_peak(peak_bytes: int, budget: ForwardBudget, n: int, k: int) -> list[str]:
    """Violations of the forward budget (empty when the peak is within it)."""
    found: list[str] = []
    full_copy = full_precision_weight_bytes(n, k)
    if not budget.allows_full_precision_weight and peak_bytes >= full_copy:
        found.append(
            f"path {budget.path!r} allocated {peak_bytes} bytes at its peak, at least a bf16 "
            f"copy of the [{n}, {k}] weight ({full_copy} bytes): kernels must consume the "
            "quantized codes, not a dequantized weight (a path that dequantizes while its "
            "numerics come first declares memory_not_judged = '<why>': docs/PATHS.md)"
        )
    if peak_bytes > budget.total:
        found.append(f"peak {peak_bytes} bytes exceeds the {budget.describe()}")
    return found


@dataclass(frozen=True)
class ForwardMemory:
    peak_bytes: int  # over two consecutive calls on the measured layer
    retained_bytes: int  # allocated by those calls and still alive after both outputs died
    layer_growth_bytes: int  # bytes the layer holds after the calls minus before them
    budget: ForwardBudget
    violations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


def retention_allowance(platform: PlatformInfo) -> int:
    """Bytes a forward may leave alive after its output is dropped: none on CPU, where the
    tracker is exact; on CUDA/ROCm the allocator's per-call scratch allowance, far below
    any weight-sized cache at the memory suite's shapes (a persistent workspace is created
    by the warm-up call on a copy of the layer, so it is not new in the measured region)."""
    return DEVICE_SCRATCH_ALLOWANCE if platform.is_cuda_alike else 0


def _tensors_reachable(obj: Any, seen: set[int]) -> list[torch.Tensor]:
    """Every tensor reachable from ``obj`` through attributes, lists, tuples and dicts."""
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        children: list[Any] = list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = list(vars(obj).values())
    else:
        return []
    found: list[torch.Tensor] = []
    for child in children:
        found += _tensors_reachable(child, seen)
    return found


def reachable_bytes(obj: Any) -> int:
    """Bytes of every storage reachable from ``obj`` (each once): a layer's fields and
    anything a path attached to it or to its tensors' holders (a cached weight included)."""
    return held_bytes(_tensors_reachable(obj, set()))


def _throwaway_copy(layer: QuantizedLinear) -> QuantizedLinear:
    """An independent layer with equal tensors, for the warm-up call."""
    g = layer.weight.global_scale  # a two-level format's per-tensor level (NVFP4)
    weight = QuantizedTensor(
        layer.weight.codes.clone(),
        layer.weight.scale.clone(),
        layer.weight.spec,
        None if g is None else g.clone(),
    )
    return QuantizedLinear(
        layer.scheme,
        weight,
        None if layer.input_scale is None else layer.input_scale.clone(),
        None if layer.bias is None else layer.bias.clone(),
    )


def _checked_forward(
    path: LinearPath, layer: QuantizedLinear, x: torch.Tensor, problem: LinearProblem
) -> None:
    y = path.forward(layer, x, problem.out_dtype)
    if tuple(y.shape) != (problem.m, problem.n):
        raise ValueError(
            f"path {path.name!r} returned shape {tuple(y.shape)}, expected {(problem.m, problem.n)}"
        )


def check_forward_memory(
    path: LinearPath,
    layer: QuantizedLinear,
    x: torch.Tensor,
    problem: LinearProblem,
    platform: PlatformInfo,
) -> ForwardMemory:
    """Measure two consecutive forward calls of ``path`` and check them against its budget.

    The warm-up call (the codec's tables, cuBLAS workspaces) runs on a throwaway copy of the
    layer, never on the measured one, so a path cannot pay for a cache on the layer outside
    the measurement. Both measured calls run in one region, each output dropped before the
    next call: whatever the first call leaves alive (on the layer, on the path, in a module)
    is live during the second and counts in the peak, and bytes still alive after both
    outputs died are retained. The layer must hold the same bytes after the calls as before.
    """
    _checked_forward(path, _throwaway_copy(layer), x, problem)
    before = reachable_bytes(layer)
    with measure_peak(platform) as measured:
        _checked_forward(path, layer, x, problem)
        _checked_forward(path, layer, x, problem)
    growth = reachable_bytes(layer) - before
    budget = forward_budget(path, layer.scheme, problem, platform)
    violations = check_forward_peak(measured.peak_bytes, budget, problem.n, problem.k)
    allowance = retention_allowance(platform)
    if measured.retained_bytes > allowance:
        violations.append(
            f"path {path.name!r} left {measured.retained_bytes} bytes allocated by two forward "
            f"calls alive after their outputs were dropped (allowed {allowance}): a forward "
            "must not keep state between calls (a cached dequantized weight counts)"
        )
    if growth:
        violations.append(
            f"path {path.name!r} changed the bytes the layer holds by {growth} over two forward "
            "calls: a path must not attach tensors (a dequantized weight) to the loaded layer"
        )
    return ForwardMemory(
        measured.peak_bytes, measured.retained_bytes, growth, budget, tuple(violations)
    )
