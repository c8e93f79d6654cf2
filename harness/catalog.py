"""Every suite's golden builders, in one place above the domains that define them.

Each case module registers its builders with `harness.store.golden_registry.register_each`
when it is imported. The store itself imports none of them (it sits below the paths and
kernels), so the commands that recompute goldens ask this module for the full set.
"""

from __future__ import annotations

import importlib

from harness.store.golden_registry import Builder, registered_builders

# Modules whose import registers golden builders (each suite's case module).
CASE_MODULES: tuple[str, ...] = (
    "harness.linear.cases",
    "harness.quantizers.mx_edge_cases",
    "harness.quantizers.mx_scale_points",
    "harness.loading.cases",
    "harness.moe.cases",
)


def golden_builders() -> dict[str, tuple[Builder, str]]:
    """Import every case module, then return every registered builder by entry name."""
    for module in CASE_MODULES:
        importlib.import_module(module)
    return registered_builders()
