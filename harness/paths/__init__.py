"""The execution model linear and MoE paths share.

`Support`, `Numerics`, `PathBase`, `LinearPathBase`, the `LinearPath` protocol and
`KernelContract` (harness.paths.base), the dispatch-table type (harness.paths.dispatch)
and known engine findings (harness.paths.findings). The paths themselves live with their
domain: linear paths and their registry in `harness.linear.paths`, MoE paths in
`harness.moe.paths`; the registry type in `harness.registry`. Plugin authors import these
names from the front door, ``harness``.
"""

from __future__ import annotations

from harness.paths.base import (
    KernelContract,
    LinearPath,
    LinearPathBase,
    LinearProblem,
    Numerics,
    OperandContract,
    PathBase,
    Support,
)

__all__ = [
    "KernelContract",
    "LinearPath",
    "LinearPathBase",
    "LinearProblem",
    "Numerics",
    "OperandContract",
    "PathBase",
    "Support",
]
