"""Check a path's forward call against its memory budget (`harness.memory.budget`).

One function serves the memory suite and the self-tests that feed it deliberately wasteful
paths, so the check that passes real paths is the one shown to catch bad ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.core.quantize import QuantizedLinear
from harness.memory.budget import ForwardBudget, forward_budget, full_precision_weight_bytes
from harness.memory.tracker import measure_peak
from harness.paths.base import LinearPath, LinearProblem
from harness.platform.info import PlatformInfo

__all__ = ["MEMORY_SHAPES", "ForwardMemory", "check_forward_memory", "check_forward_peak"]

# M x N x K for memory checks, with N much larger than M: a kernel budget (terms in M*K and
# M*N) stays below a bf16 copy of the weight (N*K*2), so a copy cannot hide inside it. K and N
# are multiples of 128, so block-scaled schemes have whole weight tiles.
MEMORY_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 512, 256), (4, 1024, 512), (16, 2048, 256))


def check_forward_peak(peak_bytes: int, budget: ForwardBudget, n: int, k: int) -> list[str]:
    """Violations of the forward budget (empty when the peak is within it)."""
    found: list[str] = []
    full_copy = full_precision_weight_bytes(n, k)
    if not budget.allows_full_precision_weight and peak_bytes >= full_copy:
        found.append(
            f"path {budget.path!r} allocated {peak_bytes} bytes at its peak, at least a bf16 "
            f"copy of the [{n}, {k}] weight ({full_copy} bytes): kernels must consume the "
            "quantized codes, not a dequantized weight"
        )
    if peak_bytes > budget.total:
        found.append(f"peak {peak_bytes} bytes exceeds the {budget.describe()}")
    return found


@dataclass(frozen=True)
class ForwardMemory:
    peak_bytes: int
    budget: ForwardBudget
    violations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


def check_forward_memory(
    path: LinearPath,
    layer: QuantizedLinear,
    x: torch.Tensor,
    problem: LinearProblem,
    platform: PlatformInfo,
) -> ForwardMemory:
    """Measure one forward call of ``path`` and check it against its budget.

    A first, unmeasured call warms up what persists across calls (the codec's tables,
    cuBLAS workspaces), so the measurement is what each call costs.
    """
    path.forward(layer, x, problem.out_dtype)
    with measure_peak(platform) as measured:
        y = path.forward(layer, x, problem.out_dtype)
    if tuple(y.shape) != (problem.m, problem.n):
        raise ValueError(
            f"path {path.name!r} returned shape {tuple(y.shape)}, expected {(problem.m, problem.n)}"
        )
    budget = forward_budget(path, layer.scheme, problem, platform)
    violations = check_forward_peak(measured.peak_bytes, budget, problem.n, problem.k)
    return ForwardMemory(measured.peak_bytes, budget, tuple(violations))
