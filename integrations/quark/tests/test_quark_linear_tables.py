"""The Quark linear path's scheme table agrees with the scheme registry's fields.

Every entry of its explicit table of scheme names (never name prefixes) exists and is
something Quark's imported linear runs. Skips, counted and with the reason, where the
adapter is not installed (``python3 scripts/engine.py quark``).
"""

from __future__ import annotations

import pytest

from harness import dispatch_problems
from harness.core.schemes import SCHEMES


def test_quark_fp8_linear_table_matches_the_specs() -> None:
    linear = pytest.importorskip(
        "qharness_quark.linear",
        reason="Quark adapter not installed (python3 scripts/engine.py quark)",
    )
    assert dispatch_problems(SCHEMES, linear.KERNELS, linear.FP8_LINEAR_DISPATCH) == []
    for name in linear.FP8_LINEAR_SCHEMES:
        scheme = SCHEMES[name]
        assert scheme.activation is not None, name
        for spec in (scheme.weight, scheme.activation):
            assert (spec.format, spec.scale_format) == ("e4m3fn", "fp32"), name
            assert spec.granularity in ("per_tensor", "per_row"), name
        static_per_tensor = (
            not scheme.activation.dynamic and scheme.activation.granularity == "per_tensor"
        )
        dynamic_per_row = scheme.activation.dynamic and scheme.activation.granularity == "per_row"
        assert static_per_tensor or dynamic_per_row, name
