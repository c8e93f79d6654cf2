"""FP8 schemes of other granularities, registered only inside the tests that use them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.schemes import SCHEMES, QuantSpec, Scheme

# Granularities not registered on this branch, built here to exercise the loaders now.
# Registered only for the duration of a test (monkeypatch), never in harness/schemes.py.
_BASE = Scheme(
    name="local_fp8_per_channel",
    family="fp8",
    weight=QuantSpec("e4m3fn", block=(1, None)),
    activation=QuantSpec("e4m3fn", block=(1, None), dynamic=True),
    sqnr_floor_db=20.0,
    description="test-local: per-output-channel W, dynamic per-token A",
)
LOCAL_SCHEMES: tuple[Scheme, ...] = (
    _BASE,
    replace(
        _BASE,
        name="local_fp8_per_block",
        weight=QuantSpec("e4m3fn", block=(128, 128)),
        activation=QuantSpec("e4m3fn", block=(1, 128), dynamic=True),
        description="test-local: 128x128 W blocks, dynamic 1x128 A groups",
    ),
    replace(
        _BASE,
        name="local_fp8_per_tensor_fnuz",
        weight=QuantSpec("e4m3fnuz", clamp_max=224),
        activation=QuantSpec("e4m3fnuz", clamp_max=224),
        description="test-local: e4m3fnuz twin of fp8_per_tensor, saturating at 224",
    ),
    replace(
        _BASE,
        name="local_fp8_per_channel_fnuz240",
        weight=QuantSpec("e4m3fnuz", block=(1, None)),
        activation=QuantSpec("e4m3fnuz", block=(1, None), dynamic=True),
        description="test-local: e4m3fnuz per-channel, saturating at 240 (no exact fn form)",
    ),
)


def register_local_schemes(monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """Register the test-local FP8 schemes for one test; returns every FP8 scheme name."""
    for scheme in LOCAL_SCHEMES:
        if scheme.name not in SCHEMES:
            monkeypatch.setitem(SCHEMES, scheme.name, scheme)
    return tuple(sorted(n for n, s in SCHEMES.items() if s.family == "fp8"))
