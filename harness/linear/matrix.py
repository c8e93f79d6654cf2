"""Which path runs which scheme on this platform, and why not: the support matrix.

Answers come from each path's ``supports`` (which consults the capability probe) for a
representative problem, so ``python -m harness platform`` shows the same decisions the
suites make. A scheme no non-emulated path supports is "emulated-only", with the reasons.
`linear_dispatch_report` shows the native path's dispatch table and its checks, in the
shape of the MoE report (harness.moe.dispatch_report).
"""

from __future__ import annotations

from typing import Any

import torch

from harness.core.schemes import SCHEMES
from harness.linear.paths import linear_paths
from harness.linear.paths.native import LINEAR_NATIVE_DISPATCH, linear_dispatch_problems
from harness.paths import LinearProblem
from harness.paths.dispatch import EMULATE, decision, table_json
from harness.platform.info import PlatformInfo, platform_key

REPRESENTATIVE_PROBLEM = LinearProblem(m=32, n=64, k=256, bias=True, out_dtype=torch.bfloat16)


def support_matrix(
    platform: PlatformInfo, problem: LinearProblem = REPRESENTATIVE_PROBLEM
) -> dict[str, dict[str, Any]]:
    matrix: dict[str, dict[str, Any]] = {}
    for name in sorted(SCHEMES):
        row: dict[str, Any] = {}
        for path_name, path in linear_paths().items():
            s = path.supports(SCHEMES[name], problem, platform)
            row[path_name] = {"supported": s.ok, "reason": s.reason or None}
        matrix[name] = row
    return matrix


def linear_dispatch_report(platform: PlatformInfo) -> dict[str, Any]:
    """The linear native-dispatch table as it applies here, with its consistency checks."""
    key = platform_key(platform)
    return {
        "platform_key": key,
        "schemes": {
            name: {"decision": decision(LINEAR_NATIVE_DISPATCH, key, name)}
            for name in sorted(SCHEMES)
        },
        "table": table_json(LINEAR_NATIVE_DISPATCH),
        "problems": linear_dispatch_problems(),
        "emulate_decision": EMULATE,
    }
