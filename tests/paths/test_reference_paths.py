"""Only a path that declares itself a reference skips the comparison with ``emulated``."""

from __future__ import annotations

from harness.linear.paths import get_path
from harness.linear.paths.emulated import EmulatedPath
from harness.moe.paths.emulated import EmulatedMoEPath
from harness.moe.paths.native import NativeMoEPath
from harness.paths.base import is_reference


class VendorPath(EmulatedPath):
    """A plugin reusing the emulated code: still a path under test."""

    name = "vendor"


class VendorMoEPath(EmulatedMoEPath):
    name = "vendor_moe"


class DeclaredReference:
    name = "float64_model"
    is_reference = True


def test_builtin_references_are_references() -> None:
    assert is_reference(get_path("emulated"))
    assert is_reference(EmulatedMoEPath())
    assert not is_reference(get_path("native"))
    assert not is_reference(NativeMoEPath())


def test_is_reference_is_never_inherited() -> None:
    assert not is_reference(VendorPath())
    assert not is_reference(VendorMoEPath())


def test_a_path_may_declare_itself_a_reference() -> None:
    assert is_reference(DeclaredReference())
    instance = VendorPath()
    instance.is_reference = True  # type: ignore[misc]
    assert is_reference(instance)
