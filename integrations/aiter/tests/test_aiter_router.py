"""aiter's torch routers as routing paths (`qharness_aiter.router`): compiled from aiter's
installed ``ops/topk.py``, registered, and the zero-mask finding declared for the cases
it covers (grouped, with a correction bias) and no others. The routing itself is checked
by suites/test_moe_routing.py (the aiter stage runs it).

Skips, counted and with the reason, where the aiter adapter is not installed.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip(
    "qharness_aiter",
    reason="aiter adapter not installed (scripts/engine.py aiter installs it in its own venv)",
)

from qharness_aiter.router import AiterBiasedGroupedTopkTorch, aiter_torch_routers

from harness.moe.paths import moe_paths, routes_itself
from harness.moe.routing_cases import design_cases
from harness.paths.findings import known_finding


def test_routers_compile_from_aiter_and_register() -> None:
    assert set(aiter_torch_routers()) == {"biased_grouped_topk_torch", "grouped_topk_torch"}
    for name in ("aiter_biased_grouped_topk_torch", "aiter_grouped_topk_torch"):
        assert routes_itself(moe_paths()[name])


def test_zero_mask_by_hand() -> None:
    """Groups {0, 1} win (biased best-two sums 0.38 and 0.35); top-3 is {0, 2, 3}; with
    the masked groups' biased scores (-1.95) filled with 0.0, expert 4 replaces 3."""
    fn = aiter_torch_routers()["biased_grouped_topk_torch"]
    logits = torch.tensor([[2.0, 0.0, 1.0, 0.5, -3.0, -3.0, -3.0, -3.0]])
    bias = torch.tensor([0.0, -1.0, 0.0, -1.0, -2.0, -2.0, -2.0, -2.0])
    _, ids = fn(logits, bias, 3, True, 4, 2)
    assert 3 not in ids[0].tolist()  # the finding: the true third expert is lost


def test_zero_mask_finding_covers_exactly_the_grouped_bias_cases() -> None:
    path = AiterBiasedGroupedTopkTorch()
    for case in design_cases():
        spec = case.spec
        expected = spec.correction_bias is not None and spec.grouped
        assert (known_finding(path, case.finding_case()) is not None) == expected, case.id
