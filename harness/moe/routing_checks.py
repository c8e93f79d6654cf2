"""Checks of the routing a self-routing MoE path chose, against `reference_route`.

Run before the block checks (`harness.moe.checks`), which then hold the experts to the
float64 reference under the path's own routing:

1. ``routing_returned``: the trace carries a routing of the problem's shape ([T, k] ids of
   experts 0..E-1, [T, k] finite weights). A gate: nothing below can be checked without it;
2. ``routing_expert_set``: each token's set of chosen experts is the reference's, exactly
   (the tie-break rule decides it where a tie crosses the top-k boundary);
3. ``routing_slot_order``: the slots are in the reference's order (descending score, ties
   to the lower index); n/a for a path that declares ``ranks_slots = False``;
4. ``routing_weights_vs_reference``: each chosen expert's weight within
   `routing_weight_bound` (float32 ulps) of the reference's weight for that expert.
"""

from __future__ import annotations

import torch

from harness.core.checks import (
    CheckResult,
    check_within_bound,
    failed,
    first_offender,
    not_applicable,
    passed,
)
from harness.moe.model import Routing
from harness.moe.routing import RoutingSpec, routing_weight_bound

SELF_ROUTING_CHECKS = (
    "routing_returned",
    "routing_expert_set",
    "routing_slot_order",
    "routing_weights_vs_reference",
)


def returned_routing(routing: Routing | None, expected: Routing) -> CheckResult:
    """The path's routing exists and has the reference's shape, valid ids, finite weights."""
    name = SELF_ROUTING_CHECKS[0]
    if routing is None:
        return failed(name, "the path routes itself but its trace has no routing")
    shape = tuple(expected.ids.shape)
    if tuple(routing.ids.shape) != shape or tuple(routing.weights.shape) != shape:
        return failed(
            name,
            f"ids {tuple(routing.ids.shape)}, weights {tuple(routing.weights.shape)}, "
            f"expected {shape}",
        )
    ids = routing.ids.cpu()
    if ids.is_floating_point() or bool(((ids < 0) | (ids >= expected.num_experts)).any()):
        return failed(name, f"expert ids outside 0..{expected.num_experts - 1}")
    if not bool(torch.isfinite(routing.weights.cpu()).all()):
        return failed(name, "non-finite routing weights")
    return passed(name)


def _by_expert(routing: Routing) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's slots sorted by expert id: (the permutation, the sorted ids)."""
    ids = routing.ids.cpu().long()
    perm = torch.argsort(ids, dim=1, stable=True)
    return perm, ids.gather(1, perm)


def self_routing_checks(
    routing: Routing, expected: Routing, logits: torch.Tensor, spec: RoutingSpec, ordered: bool
) -> list[CheckResult]:
    """Checks 2 to 4 (``routing`` has passed `returned_routing`); ``ordered``: the path
    declares its slots in the reference's order."""
    names = SELF_ROUTING_CHECKS
    got_perm, got_ids = _by_expert(routing)
    ref_perm, ref_ids = _by_expert(expected)
    wrong_set = (got_ids != ref_ids).any(dim=1)
    if bool(wrong_set.any()):
        tokens = wrong_set.nonzero().squeeze(1)
        t = int(tokens[0])
        expert_set = failed(
            names[1],
            f"{tokens.numel()} token(s) routed to other experts; token {t}: "
            f"{got_ids[t].tolist()}, expected {ref_ids[t].tolist()} "
            f"({spec.tie_break} tie-break, {spec.scoring})",
        )
    else:
        expert_set = passed(names[1])
    if not ordered:
        order = not_applicable(names[2], "the path declares ranks_slots = False")
    else:
        differ = routing.ids.cpu().long() != expected.ids.cpu()
        order = (
            passed(names[2])
            if not bool(differ.any())
            else failed(
                names[2],
                f"{int(differ.any(dim=1).sum())} token(s) with slots out of the reference's "
                "order (descending score, ties to the lower index)",
                first_offender(differ, routing.ids, expected.ids),
            )
        )
    if bool(wrong_set.any()):
        weights = failed(names[3], "expert sets differ (routing_expert_set): not comparable")
    else:
        bound = routing_weight_bound(logits, expected, spec).gather(1, ref_perm)
        weights = check_within_bound(
            names[3],
            routing.weights.cpu().double().gather(1, got_perm),
            expected.weights.cpu().double().gather(1, ref_perm),
            bound,
            "routing weights (slots sorted by expert) vs the reference",
            worst_ratio="routing_weights_worst_error_to_bound",
        )
    return [expert_set, order, weights]
