"""Routing as engines ship it: grouped top-k, a correction bias, scaling, sigmoid top-1,
on router logits with a tie or a near-tie planted at every decision.

The grid (`design_specs`, with `harness.moe.routing_cases.RoutingCase`'s ``design`` set to
``near_ties``): DeepSeek-V3 style (sigmoid, correction bias, 4 groups of which 2 are used,
the group scored by its best two biased scores, routed scaling 2.5, with and without
renormalize), DeepSeek-V2 style (softmax, no bias, the group scored by its best score),
a correction bias without groups (sigmoid: MiniMax-M2, Laguna; softmax: ERNIE-4.5-MoE),
and Llama-4 style sigmoid top-1 (weight = sigmoid of the chosen logit). Logits are
float32 (not bf16 values): the near-ties are finer than bf16.

Planted rows (16 experts, groups 0-3, 4-7, 8-11, 12-15; bias `BIAS_PATTERN` per group:
+0.5 on a group's first expert, negative on the others, so chosen groups hold experts with
negative keys and a router that masks other groups with 0 instead of -inf takes masked
experts over them). Scores are sigmoid(logit) for rows 0-5 and 10-11:

* ``TOPK_NEAR_TIE`` (0): top-4 of groups {0, 1} ends at a near-tie, expert 6 ahead of 2 by
  ~2.3e-4 (both scores round to one bf16 and one fp16 value): {0, 3, 4, 6};
* ``GROUP_NEAR_TIE`` (1): groups 2 and 1 tie but for ~4e-4 in their best-two sums, group 2
  ahead: groups {0, 2}, experts {0, 3, 8, 11};
* ``GROUP_EXACT_TIE`` (2): groups 1 and 2 equal: group 1 (lower) wins: {0, 3, 4, 7};
* ``TOPK_EXACT_TIE`` (3): row 0 with experts 2 and 6 equal: expert 2 wins: {0, 2, 3, 4};
* ``GLOBAL_VS_GROUPED`` (4): the best key of all (expert 12) is in a losing group;
* ``SUM_VS_MAX`` (5): group 2 has the best single key but the lower best-two sum;
* ``SOFTMAX_GROUP_NEAR_TIE`` (6), ``SOFTMAX_TOPK_NEAR_TIE`` (7): the same near-ties for
  softmax without a bias (group best logits 1.875 and 1.875 + 2^-12; top-4 boundary
  0.875 and 0.875 + 2^-12), ``SOFTMAX_GROUP_EXACT_TIE`` (8), ``SOFTMAX_TOPK_EXACT_TIE`` (9);
* ``TOP1_NEAR_TIE`` (10): experts 3 and 6 at 1.25 and 1.25 + 2^-10: top-1 is 6;
  ``TOP1_EXACT_TIE`` (11): experts 2 and 5 tied first: 2;
* rows 12-15: seeded float32 logits.

`planted_near_ties` lists each near-tie pair and its decision, so a test can show each is
decided (farther apart than `harness.moe.routing_choice.NEAR_TIE_RTOL`) yet closer than a
bf16 and an fp16 step.
"""

from __future__ import annotations

import functools
import math

import torch

from harness.core.inputs import generator
from harness.moe.routing import RoutingSpec

DESIGN = "near_ties"
DESIGN_TOKENS = 16
DESIGN_EXPERTS = 16
BIAS_PATTERN = (0.5, -1.0, -0.75, -0.875)  # per group of 4, dyadic: exact in float32
SCALING = 2.5  # DeepSeek-V3's routed_scaling_factor
SIGMOID_NEAR = 2.0**-10  # logit step of the sigmoid top-k near-ties
GROUP_NEAR = 2.0**-9  # logit step of the sigmoid group-boundary near-tie
SOFTMAX_NEAR = 2.0**-12  # logit step of the softmax near-ties (relative score gap 2^-12)

(
    TOPK_NEAR_TIE,
    GROUP_NEAR_TIE,
    GROUP_EXACT_TIE,
    TOPK_EXACT_TIE,
    GLOBAL_VS_GROUPED,
    SUM_VS_MAX,
    SOFTMAX_GROUP_NEAR_TIE,
    SOFTMAX_TOPK_NEAR_TIE,
    SOFTMAX_GROUP_EXACT_TIE,
    SOFTMAX_TOPK_EXACT_TIE,
    TOP1_NEAR_TIE,
    TOP1_EXACT_TIE,
) = range(12)


def design_bias(experts: int) -> tuple[float, ...]:
    return tuple(BIAS_PATTERN[e % len(BIAS_PATTERN)] for e in range(experts))


def design_specs(experts: int, top_k: int) -> tuple[RoutingSpec, ...]:
    """The specs of the design for (experts, top-k): see the module docstring."""
    if top_k == 1:
        return (RoutingSpec(1, False, "sigmoid"),)
    bias = design_bias(experts)
    v3 = dict(scoring="sigmoid", n_group=4, topk_group=2, correction_bias=bias)
    specs = [
        RoutingSpec(top_k, True, routed_scaling_factor=SCALING, **v3),  # type: ignore[arg-type]
        RoutingSpec(top_k, True, "softmax", n_group=4, topk_group=2),
    ]
    if experts == DESIGN_EXPERTS:
        specs += [
            RoutingSpec(top_k, False, routed_scaling_factor=SCALING, **v3),  # type: ignore[arg-type]
            RoutingSpec(top_k, False, "softmax", n_group=4, topk_group=2),
            RoutingSpec(top_k, True, "sigmoid", correction_bias=bias),
            RoutingSpec(top_k, True, "softmax", correction_bias=bias),
        ]
    return tuple(specs)


# (experts, top-k) configs of the design; top-1 is Llama-4's sigmoid routing
DESIGN_CONFIGS: tuple[tuple[int, int], ...] = ((8, 2), (16, 4), (8, 1), (16, 1))


def _logit(score: float) -> float:
    return math.log(score / (1.0 - score))


def _sigmoid_row(scores: dict[int, float], rest: float = 0.1) -> list[float]:
    return [_logit(scores.get(e, rest)) for e in range(DESIGN_EXPERTS)]


def _background() -> list[float]:
    """Distinct low logits, falling with the index (no incidental ties)."""
    return [-1.0 - e / 16 for e in range(DESIGN_EXPERTS)]


def _softmax_row(peaks: dict[int, float]) -> list[float]:
    row = _background()
    for e, v in peaks.items():
        row[e] = v
    return row


# (row, the expert planted ahead, the expert it must beat, "expert" or "group" decision)
NEAR_TIES: tuple[tuple[int, int, int, str], ...] = (
    (TOPK_NEAR_TIE, 6, 2, "expert"),
    (GROUP_NEAR_TIE, 8, 4, "group"),
    (SOFTMAX_GROUP_NEAR_TIE, 9, 5, "group"),
    (SOFTMAX_TOPK_NEAR_TIE, 5, 1, "expert"),
    (TOP1_NEAR_TIE, 6, 3, "expert"),
)


@functools.cache
def _design_logits() -> torch.Tensor:
    rows: dict[int, list[float]] = {}
    g0 = {0: 0.9, 3: 0.825}
    row0 = _sigmoid_row({**g0, 1: 0.5, 2: 0.6, 4: 0.85, 5: 0.3, 6: 0.6, 7: 0.2})
    rows[TOPK_EXACT_TIE] = list(row0)
    row0[6] += SIGMOID_NEAR
    rows[TOPK_NEAR_TIE] = row0
    twins = {4: 0.7, 7: 0.5, 8: 0.7, 11: 0.5}
    rows[GROUP_EXACT_TIE] = _sigmoid_row({**g0, **twins})
    row1 = _sigmoid_row({**g0, **twins})
    row1[8] += GROUP_NEAR
    rows[GROUP_NEAR_TIE] = row1
    rows[GLOBAL_VS_GROUPED] = _sigmoid_row({**g0, 4: 0.85, 7: 0.6, 12: 0.95})
    rows[SUM_VS_MAX] = _sigmoid_row({0: 0.8, 3: 0.85, 4: 0.75, 7: 0.7, 8: 0.95})
    rows[SOFTMAX_GROUP_NEAR_TIE] = _softmax_row(
        {0: 3.0, 5: 1.875, 9: 1.875 + SOFTMAX_NEAR, 12: 1.0}
    )
    rows[SOFTMAX_TOPK_NEAR_TIE] = _softmax_row(
        {0: 3.0, 1: 0.875, 4: 2.5, 5: 0.875 + SOFTMAX_NEAR, 6: 1.5, 8: 1.25, 13: 1.25}
    )
    rows[SOFTMAX_GROUP_EXACT_TIE] = _softmax_row({0: 3.0, 6: 2.0, 10: 2.0, 13: 1.0})
    rows[SOFTMAX_TOPK_EXACT_TIE] = _softmax_row(
        {0: 3.0, 2: 1.0, 4: 2.5, 6: 1.5, 7: 1.0, 8: 0.5, 12: 0.5}
    )
    rows[TOP1_NEAR_TIE] = _softmax_row({3: 1.25, 6: 1.25 + SIGMOID_NEAR})
    rows[TOP1_EXACT_TIE] = _softmax_row({2: 1.75, 5: 1.75})
    gen = generator("moe/routing/near_ties")
    seeded = (2.0 * torch.randn(DESIGN_TOKENS - len(rows), DESIGN_EXPERTS, generator=gen)).clamp(
        -8, 8
    )
    planted = torch.tensor([rows[r] for r in range(len(rows))], dtype=torch.float64).float()
    return torch.cat([planted, seeded])


def design_logits() -> torch.Tensor:
    """[DESIGN_TOKENS, DESIGN_EXPERTS] float32 router logits of the design."""
    return _design_logits().clone()
