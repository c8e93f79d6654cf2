"""aiter's MXFP4 quantizing function (`_mxfp4_quant_op`) on exact FP4 ties: a finding.

The kernel rounds e2m1 ties away from zero ("rounding nearest with tie breaking up"). It
was once declared a convention; aiter's own tracker calls it a bug (ROCm/aiter#974, fixed on
main by ROCm/aiter#975, the same logic in `aiter/utility/fp4_utils.py` reported as
ROCm/aiter#2247), so it is a finding (docs/CONVENTIONS.md): the round-to-nearest-even test
is a strict xfail naming it, and a second test checks that the deviation is exactly the
tie rule (codes equal the reference quantizer under `fp4_ties_away`, scales equal), so a
fix upstream turns the first into a failure to record. Runs where aiter's Triton kernels
run (a ROCm GPU or a simulated one: ``python3 scripts/engine.py aiter``).
"""

from __future__ import annotations

import pytest
import torch

from harness import detect_platform
from harness.core.conventions import with_conventions
from harness.core.quantize import quantize
from harness.core.schemes import mx_spec
from harness.quantizers import get_quantizer

qharness_aiter = pytest.importorskip(
    "qharness_aiter.quantizer", reason="aiter adapter not installed (scripts/engine.py aiter)"
)

QUANTIZERS = (
    "aiter_dynamic_mxfp4_quant",
    "aiter_fused_flatten_mxfp4_quant",
    "aiter_fp4_utils_dynamic_mxfp4_quant",  # fp4_utils' copy (ROCm/aiter#2247)
)


def _ties_finding(name: str) -> str:
    """The text of the quantizer's ties finding (the one scoped by `fp4_ties_away`)."""
    found = [f.text for f in get_quantizer(name).known_findings if "fp4_ties_away" in f.behaves_as]
    assert len(found) == 1, f"{name}: one ties finding expected, got {found}"
    return found[0]


SPEC = mx_spec("e2m1", "even")


def _ties_block() -> torch.Tensor:
    # amax 6 -> scale 2^0 under the even rule; every e2m1 tie, both signs, and non-ties
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    values = [6.0, *ties, *(-t for t in ties), 0.3, 2.9, 1.5, -6.0]
    x = torch.zeros(2, 32)
    x[:, : len(values)] = torch.tensor(values)
    x[1] *= 2.0**-3  # a second block on another scale (2^-3)
    return x


def _engine(name: str) -> object:
    quantizer = get_quantizer(name)
    where = quantizer.supports(SPEC)
    if not where.ok:
        pytest.skip(f"{name} does not run here: {where.reason} (platform {detect_platform()})")
    return quantizer


@pytest.mark.parametrize("name", QUANTIZERS)
def test_aiter_mxfp4_quant_rounds_ties_to_even(name: str, request: pytest.FixtureRequest) -> None:
    request.applymarker(pytest.mark.xfail(strict=True, reason=_ties_finding(name)))
    x = _ties_block()
    got = _engine(name).quantize(x, SPEC)  # type: ignore[attr-defined]
    want = quantize(x, SPEC)
    assert torch.equal(got.scale, want.scale)
    assert torch.equal(got.codes, want.codes)


@pytest.mark.parametrize("name", QUANTIZERS)
def test_aiter_mxfp4_quant_differs_from_even_by_the_tie_rule_only(name: str) -> None:
    x = _ties_block()
    got = _engine(name).quantize(x, SPEC)  # type: ignore[attr-defined]
    away = quantize(x, with_conventions(SPEC, ["fp4_ties_away"]))
    even = quantize(x, SPEC)
    assert torch.equal(got.scale, even.scale)
    assert torch.equal(got.codes, away.codes)
    assert not torch.equal(away.codes, even.codes)  # the block does hold ties
