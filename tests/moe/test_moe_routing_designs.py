"""The near-tie routing design (`harness.moe.routing_designs`) plants what it says.

Expected expert sets are read off the planted scores by hand (module docstring), not taken
from the reference under test; the reference is then held to them.
"""

from __future__ import annotations

import pytest
import torch

from harness.moe.routing import RoutingSpec, reference_route, scores_and_keys
from harness.moe.routing_choice import NEAR_TIE_RTOL, choice_problem, keys_and_magnitudes
from harness.moe.routing_designs import (
    DESIGN_CONFIGS,
    GLOBAL_VS_GROUPED,
    GROUP_EXACT_TIE,
    GROUP_NEAR_TIE,
    NEAR_TIES,
    SOFTMAX_GROUP_EXACT_TIE,
    SOFTMAX_GROUP_NEAR_TIE,
    SOFTMAX_TOPK_EXACT_TIE,
    SOFTMAX_TOPK_NEAR_TIE,
    SUM_VS_MAX,
    TOP1_EXACT_TIE,
    TOP1_NEAR_TIE,
    TOPK_EXACT_TIE,
    TOPK_NEAR_TIE,
    design_bias,
    design_logits,
    design_specs,
)

V3 = RoutingSpec(
    4,
    True,
    "sigmoid",
    n_group=4,
    topk_group=2,
    correction_bias=design_bias(16),
    routed_scaling_factor=2.5,
)
V2 = RoutingSpec(4, True, "softmax", n_group=4, topk_group=2)
TOP1 = RoutingSpec(1, False, "sigmoid")
# row -> the planted decision, per rule
PLANTED: tuple[tuple[RoutingSpec, int, list[int]], ...] = (
    (V3, TOPK_NEAR_TIE, [0, 3, 4, 6]),
    (V3, GROUP_NEAR_TIE, [0, 3, 8, 11]),
    (V3, GROUP_EXACT_TIE, [0, 3, 4, 7]),
    (V3, TOPK_EXACT_TIE, [0, 2, 3, 4]),
    (V3, GLOBAL_VS_GROUPED, [0, 3, 4, 7]),
    (V3, SUM_VS_MAX, [0, 3, 4, 7]),
    (V2, SOFTMAX_GROUP_NEAR_TIE, [0, 1, 2, 9]),
    (V2, SOFTMAX_TOPK_NEAR_TIE, [0, 4, 5, 6]),
    (V2, SOFTMAX_GROUP_EXACT_TIE, [0, 1, 2, 6]),
    (V2, SOFTMAX_TOPK_EXACT_TIE, [0, 2, 4, 6]),
    (TOP1, TOP1_NEAR_TIE, [6]),
    (TOP1, TOP1_EXACT_TIE, [2]),
)


@pytest.mark.parametrize(("spec", "row", "expected"), PLANTED, ids=lambda v: str(v)[:12])
def test_reference_takes_the_planted_decision(
    spec: RoutingSpec, row: int, expected: list[int]
) -> None:
    r = reference_route(design_logits()[row : row + 1], spec)
    assert sorted(r.ids[0].tolist()) == expected


def test_grouping_and_the_group_score_decide() -> None:
    """Without groups the global best (12) is taken; scored by its best key, group 2 wins."""
    logits = design_logits()
    flat = RoutingSpec(4, True, "sigmoid", correction_bias=design_bias(16))
    assert 12 in reference_route(logits[GLOBAL_VS_GROUPED : GLOBAL_VS_GROUPED + 1], flat).ids
    _, keys = scores_and_keys(logits, V3)
    groups = keys[SUM_VS_MAX].reshape(4, 4)
    assert int(groups.max(dim=1).values.argmax()) == 2  # best single key in group 2
    assert sorted(groups.topk(2).values.sum(1).topk(2).indices.tolist()) == [0, 1]


@pytest.mark.parametrize(("row", "ahead", "behind", "kind"), NEAR_TIES)
def test_near_ties_are_decided_yet_finer_than_bf16_and_fp16(
    row: int, ahead: int, behind: int, kind: str
) -> None:
    """Each planted near-tie is farther apart than the stated tolerance (by 4x at least),
    and both scores round to one bf16 value and to one fp16 value."""
    spec = TOP1 if row == TOP1_NEAR_TIE else V2 if "SOFTMAX" in _name(row) else V3
    scores, keys, mags = keys_and_magnitudes(design_logits(), spec)
    gap = float(keys[row, ahead] - keys[row, behind])
    assert gap > 4 * NEAR_TIE_RTOL * float(mags[row, [ahead, behind]].max())
    pair = scores[row, [ahead, behind]]
    for dtype in (torch.bfloat16, torch.float16):
        rounded = pair.to(dtype)
        assert rounded[0] == rounded[1], (dtype, pair.tolist())
    assert ahead > behind  # a tie-break on the rounded copy picks the wrong one


def _name(row: int) -> str:
    import harness.moe.routing_designs as d

    return next(n for n in dir(d) if n.isupper() and getattr(d, n) == row and "TIE" in n)


def test_only_the_planted_choices_are_ambiguous() -> None:
    """Under every spec of the design, the reference's choice is the only one allowed
    wherever no tie is planted: no seeded decision falls within the tolerance."""
    logits = design_logits()
    for experts, top_k in DESIGN_CONFIGS:
        for spec in design_specs(experts, top_k):
            ref = reference_route(logits[:, :experts], spec)
            _, keys, mags = keys_and_magnitudes(logits[:, :experts], spec)
            for t in range(logits.shape[0]):
                chosen = ref.ids[t].tolist()
                assert choice_problem(keys[t], mags[t], spec, chosen) is None
                order = torch.argsort(keys[t], descending=True, stable=True).tolist()
                rest = [e for e in order if e not in chosen]
                for swap in rest[:2]:
                    alt = [*chosen[:-1], swap]
                    if t >= 12:  # seeded rows: every other choice is refused
                        assert choice_problem(keys[t], mags[t], spec, alt) is not None
