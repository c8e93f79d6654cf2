"""MX scale edge cases on this platform's device, bit for bit against the golden store.

The quantizer runs where the kernels run, so a device that flushes the 2^-127 scale (a
float32 subnormal), computes log2 in a lower precision, or rounds amax through bf16 on the
way to the scale shows up here as mismatching E8M0 or element codes.
"""

from __future__ import annotations

import pytest

from harness.core.compare import bit_mismatches
from harness.core.quantize import quantize, stored_scale
from harness.core.schemes import mx_spec
from harness.platform.info import PlatformInfo
from harness.plugin import golden_failures
from harness.quantizers.mx_edge_cases import (
    MX_ELEMENT_FORMATS,
    MX_MODES,
    edge_blocks,
    golden_blocks,
    golden_entry,
)
from harness.store.golden_store import GoldenStore


@pytest.mark.parametrize("mode", MX_MODES)
@pytest.mark.parametrize("fmt", MX_ELEMENT_FORMATS)
def test_mx_scale_edge_cases(
    fmt: str, mode: str, golden_store: GoldenStore, qh_platform: PlatformInfo
) -> None:
    with golden_failures():
        data = golden_store.load(golden_entry(fmt))
        blocks = golden_blocks(data, fmt)
    spec = mx_spec(fmt, mode)
    q = quantize(blocks.to(qh_platform.torch_device), spec)
    scale_codes = stored_scale(q.scale, spec).flatten().cpu()
    want = data.tensors[f"{mode}.scale_codes"]
    names = edge_blocks(fmt).names
    wrong = [
        n for n, a, b in zip(names, scale_codes.tolist(), want.tolist(), strict=True) if a != b
    ]
    assert not wrong, f"{fmt}/{mode} scale codes differ on {qh_platform.device} for: {wrong}"
    assert bit_mismatches(q.codes.cpu(), data.tensors[f"{mode}.element_codes"]) == 0, (
        f"{fmt}/{mode} element codes differ"
    )
