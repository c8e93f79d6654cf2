"""The platform's capabilities: what is expected is present, what is present is used.

Two real failure modes: a kernel disappears from a platform (an upgrade breaks it, and
tests quietly turn into skips), and a kernel that works on a platform is missing from the
path's supported list (users fall back to emulation for no reason).
"""

from __future__ import annotations

import pytest

from harness.linear.paths import linear_paths
from harness.moe.paths import moe_paths
from harness.paths.base import uses_capabilities
from harness.platform import capabilities
from harness.platform.info import PlatformInfo


def test_expected_capabilities_are_present(qh_platform: PlatformInfo) -> None:
    found = capabilities.capabilities(qh_platform)
    expected = capabilities.expected(qh_platform)
    if not expected:
        pytest.skip(f"no expectations recorded for {qh_platform.device}/{qh_platform.arch}")
    missing = {name: found[name].detail for name in sorted(expected) if not found[name].available}
    assert not missing, f"expected on {qh_platform.arch} but the probe failed: {missing}"


def test_every_available_capability_is_used_by_a_path(qh_platform: PlatformInfo) -> None:
    claimed: set[str] = set()
    for path in (*linear_paths().values(), *moe_paths().values()):
        claimed |= uses_capabilities(path)
    unknown = claimed - set(capabilities.PROBES)
    assert not unknown, f"paths claim capabilities no probe tests: {sorted(unknown)}"
    available = {n for n, c in capabilities.capabilities(qh_platform).items() if c.available}
    unused = sorted(available - claimed)
    assert not unused, (
        f"these ops work on {qh_platform.device}/{qh_platform.arch} but no path dispatches to "
        f"them: {unused}; add the schemes they serve to a path's table"
    )


def test_fp8_flavour_is_the_one_the_arch_runs(qh_platform: PlatformInfo) -> None:
    """The platform's FP8 flavour (what quantizers and loaders normalize to) is the flavour
    the arch's own row of the expectations table multiplies: two tables, one answer. Runs
    on a GPU and under ``torch:<arch>``, where a flavour chosen by device kind goes wrong."""
    row = capabilities.EXPECTED.get(qh_platform.arch)
    if not row:
        pytest.skip(f"no expectations row for arch {qh_platform.arch} (a CPU names none)")
    fmt = qh_platform.fp8_format
    assert f"scaled_mm.tensorwise.{fmt}" in row, (
        f"{qh_platform.arch} multiplies {sorted(r for r in row if 'tensorwise' in r)} but the "
        f"platform's FP8 flavour is {fmt}"
    )
