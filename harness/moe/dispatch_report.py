"""The MoE dispatch table as this platform applies it, for ``python -m harness platform``.

Answers come from the table (harness.moe.dispatch), its checks, and the native MoE path's
``supports`` (which consults the capability probe), so the report shows the decisions the
suites make.
"""

from __future__ import annotations

from typing import Any

from harness.moe.dispatch import (
    EMULATE,
    MOE_SCHEMES,
    decision,
    dispatch_problems,
    table_json,
)
from harness.moe.paths import MoEProblem
from harness.moe.paths.kernels import MOE_KERNELS
from harness.moe.paths.native import NativeMoEPath
from harness.platform.info import PlatformInfo, platform_key

# A typical block, independent of the suite's case grid (the report imports no test cases):
# widths are multiples of 128, so every kernel's alignment rule is met as in real models.
REPRESENTATIVE_MOE_PROBLEM = MoEProblem(
    tokens=64, experts=16, top_k=4, hidden=256, intermediate=128
)


def moe_dispatch_report(platform: PlatformInfo) -> dict[str, Any]:
    key = platform_key(platform)
    native = NativeMoEPath()
    schemes: dict[str, Any] = {}
    for name in sorted(MOE_SCHEMES):
        dec = decision(key, name)
        support = native.supports(MOE_SCHEMES[name], REPRESENTATIVE_MOE_PROBLEM, platform)
        schemes[name] = {
            "decision": dec,
            "native_runs_here": support.ok,
            "reason": support.reason or None,
        }
    return {
        "platform_key": key,
        "schemes": schemes,
        "table": table_json(),
        "problems": dispatch_problems(MOE_SCHEMES, MOE_KERNELS),
        "emulate_decision": EMULATE,
    }
