"""An engine's raw scale is held to its documented shapes before an adapter reshapes it."""

from __future__ import annotations

import pytest
import torch

from harness.quantizers.layout import ScaleLayoutError, check_scale_layout


def test_a_documented_shape_passes_unchanged() -> None:
    scale = torch.tensor([0.5])
    assert check_scale_layout("q", "per-tensor", scale, [(), (1,)], "its docstring") is scale


def test_another_shape_fails_as_a_check_naming_shapes_and_source() -> None:
    with pytest.raises(
        ScaleLayoutError, match=r"shape \(1, 1\); documented: \(\) or \(1,\) \(doc\)"
    ):
        check_scale_layout("q", "per-tensor", torch.ones(1, 1), [(), (1,)], "doc")
    assert issubclass(ScaleLayoutError, AssertionError)  # a failed test, not an error
