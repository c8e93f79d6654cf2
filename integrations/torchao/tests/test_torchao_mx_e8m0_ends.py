"""torchao 0.18 `to_mx` at the ends of E8M0: findings, formerly declared conventions.

A block holding Inf gets a finite scale (floor/even/ceil: 2^(128 - emax); rceil: 2^127)
and a block whose scale is 2^-127 is divided by 2^-126 (floor/even/ceil). torchao's main
branch replaced both by OCP MX's behaviour (pytorch/ao#4725), so they are findings
(docs/CONVENTIONS.md): each OCP test below is a strict xfail naming its finding, and a
second test checks that the difference is exactly the former convention (the reference
quantizer with it matches torchao bit for bit), so a release with the change turns the
strict xfail into a failure to record. Skips where the torchao adapter is not installed
(``python3 scripts/engine.py torchao``).
"""

from __future__ import annotations

import pytest
import torch

from harness.core.conventions import with_conventions
from harness.core.quantize import quantize
from harness.core.schemes import mx_spec
from harness.quantizers import get_quantizer

adapter = pytest.importorskip(
    "qharness_torchao.quantizer",
    reason="torchao adapter not installed (python3 scripts/engine.py torchao)",
)

# (element format, scale mode, the block's second value, the former convention)
CASES = {
    "inf_floor": ("e4m3fn", "floor", float("inf"), "mx_inf_amax_as_2pow128"),
    "inf_even": ("e2m1", "even", float("inf"), "mx_inf_amax_as_2pow128"),
    "inf_rceil": ("e4m3fn", "rceil", float("inf"), "mx_inf_amax_scale_0xfe"),
    # amax 2^-120: e4m3 floor scale 2^(-120 - 8) clamped to 2^-127 (code 0x00)
    "min_scale_floor": ("e4m3fn", "floor", 2.0**-120, "mx_min_scale_divides_as_2pow-126"),
}
FINDING = {"inf_rceil": adapter.RCEIL_INF}


def _block(second: float) -> torch.Tensor:
    x = torch.full((1, 32), 0.0)
    x[0, 0] = 2.0**-121 if second == 2.0**-120 else 1.0
    x[0, 3] = second
    return x


def _run(case: str) -> tuple[object, object, object]:
    fmt, mode, second, convention = CASES[case]
    spec = mx_spec(fmt, mode)
    x = _block(second)
    got = get_quantizer("torchao_to_mx").quantize(x, spec)
    return got, quantize(x, spec), quantize(x, with_conventions(spec, [convention]))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0), b.nan_to_num(0))


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c, marks=pytest.mark.xfail(strict=True, reason=FINDING.get(c, adapter.E8M0_ENDS))
        )
        for c in CASES
    ],
)
def test_torchao_to_mx_follows_ocp_mx_at_the_ends_of_e8m0(case: str) -> None:
    got, ocp, _ = _run(case)
    assert _same(got.scale, ocp.scale)
    assert torch.equal(got.codes, ocp.codes)


@pytest.mark.parametrize("case", sorted(CASES))
def test_torchao_to_mx_differs_from_ocp_mx_by_the_former_convention_only(case: str) -> None:
    got, ocp, former = _run(case)
    assert _same(got.scale, former.scale)
    assert torch.equal(got.codes, former.codes)
    differs = not _same(ocp.scale, former.scale) or not torch.equal(ocp.codes, former.codes)
    assert differs  # the block does show the former convention
