"""Checks of the routing a self-routing MoE path chose, against `reference_route`.

Run before the block checks (`harness.moe.checks`), which then hold the experts to the
float64 reference under the path's own routing:

1. ``routing_returned``: the trace carries a routing of the problem's shape ([T, k] ids of
   experts 0..E-1, [T, k] finite weights). A gate: nothing below can be checked without it;
2. ``routing_expert_set``: each token's set of chosen experts (and groups) is one the spec
   allows: the reference's, exactly, except across a near-tie closer than a float32 router
   can resolve (`harness.moe.routing_choice`, one stated tolerance); exact ties go by the
   tie-break rule, also where a tie crosses the top-k or the group boundary;
3. ``routing_slot_order``: the slots are in descending key order (ties to the lower index,
   near-ties either way); n/a for a path that declares ``ranks_slots = False``;
4. ``routing_weights_vs_reference``: each chosen expert's weight within
   `routing_weight_bound` (float32 ulps) of the spec's weight for that expert (the unbiased
   score, renormalized over the path's own chosen set, times the scaling factor).
"""

from __future__ import annotations

import torch

from harness.core.checks import (
    CheckResult,
    check_within_bound,
    failed,
    not_applicable,
    passed,
)
from harness.moe.model import Routing
from harness.moe.routing import RoutingSpec, routing_weight_bound, weights_for
from harness.moe.routing_choice import choice_problem, keys_and_magnitudes, order_problem

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
    routing: Routing,
    expected: Routing,
    logits: torch.Tensor,
    spec: RoutingSpec,
    ordered: bool,
    tie_break: str | None = None,
) -> list[CheckResult]:
    """Checks 2 to 4 (``routing`` has passed `returned_routing`); ``ordered``: the path
    declares its slots in the reference's order; ``tie_break``: the rule the path declares
    for exact ties (default: the spec's)."""
    rule = tie_break or spec.tie_break
    names = SELF_ROUTING_CHECKS
    scores, keys, mags = keys_and_magnitudes(logits, spec)
    got_ids = routing.ids.cpu().long()
    problems = {
        t: p
        for t in range(got_ids.shape[0])
        if (p := choice_problem(keys[t], mags[t], spec, got_ids[t].tolist(), rule)) is not None
    }
    if problems:
        t, why = next(iter(problems.items()))
        expert_set = failed(
            names[1],
            f"{len(problems)} token(s) routed to other experts; token {t}: "
            f"{sorted(got_ids[t].tolist())}, expected {sorted(expected.ids[t].tolist())}: {why} "
            f"({rule} tie-break, {spec.id})",
        )
    else:
        expert_set = passed(names[1])
    if not ordered:
        order = not_applicable(names[2], "the path declares ranks_slots = False")
    elif problems:
        order = failed(names[2], "expert sets differ (routing_expert_set): not comparable")
    else:
        bad = {
            t: p
            for t in range(got_ids.shape[0])
            if (p := order_problem(keys[t], mags[t], got_ids[t].tolist(), rule)) is not None
        }
        order = (
            passed(names[2])
            if not bad
            else failed(
                names[2],
                f"{len(bad)} token(s) with slots out of the reference's order (descending "
                f"score, ties to the lower index); token {next(iter(bad))}: "
                f"{next(iter(bad.values()))}",
            )
        )
    if problems:
        weights = failed(names[3], "expert sets differ (routing_expert_set): not comparable")
    else:
        own = Routing(got_ids, weights_for(scores, got_ids, spec), expected.num_experts)
        got_perm, _ = _by_expert(routing)
        bound = routing_weight_bound(logits, own, spec).gather(1, got_perm)
        weights = check_within_bound(
            names[3],
            routing.weights.cpu().double().gather(1, got_perm),
            own.weights.double().gather(1, got_perm),
            bound,
            "routing weights (slots sorted by expert) vs the reference",
            worst_ratio="routing_weights_worst_error_to_bound",
        )
    return [expert_set, order, weights]
