"""An engine's scale tensor held to the layout its own API documents, before an adapter
puts it on the harness's tile grid.

Adapters reshape what an engine returns (a per-tensor scale to [1, 1], per-token scales to
[M, 1]) so the suites can compare values; that reshape would also hide a scale returned in
the wrong layout, which the engine's own callers then misread (a per-tensor scale returned
as [1, 1] taken for per-token because its callers test ``scale.dim() == 2``; a 1-D row-wise
scale where ``torch._scaled_mm`` wants (M, 1)). An adapter states the shapes its engine
documents for each kind of scale and checks the raw tensor here first.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from harness.errors import QHarnessError


class ScaleLayoutError(QHarnessError, AssertionError):
    """A scale tensor whose shape is not one its engine documents (a failed check, not an
    error of the harness)."""


def check_scale_layout(
    who: str, kind: str, scale: torch.Tensor, documented: Iterable[tuple[int, ...]], source: str
) -> torch.Tensor:
    """``scale`` unchanged when its shape is one of ``documented``; else a
    `ScaleLayoutError` naming the shape, the documented ones and where they are documented
    (``source``)."""
    shapes = [tuple(s) for s in documented]
    if tuple(scale.shape) not in shapes:
        raise ScaleLayoutError(
            f"{who}: the {kind} scale has shape {tuple(scale.shape)}; documented: "
            f"{' or '.join(str(s) for s in shapes)} ({source})"
        )
    return scale
