"""The reference router (`harness.moe.routing`), its float32 tolerance and the routing checks.

Expected values are worked by hand from the formula in docs/MOE.md, never taken from the
function under test.
"""

from __future__ import annotations

import math

import pytest
import torch

from harness.moe.model import Routing, route
from harness.moe.paths import get_moe_path, ranks_slots, routes_itself, routing_support
from harness.moe.routing import (
    SCORING_FUNCTIONS,
    RoutingSpec,
    reference_route,
    routing_weight_bound,
)
from harness.moe.routing_cases import ROUTING_SPECS, routing_logits
from harness.moe.routing_checks import returned_routing, self_routing_checks
from harness.paths.base import Support
from harness.platform.info import detect

ROW = torch.tensor([[2.0, 1.0, 1.0, 0.0]])  # expert 0 first, 1 and 2 tied, 3 last


def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


@pytest.mark.parametrize(
    ("scoring", "renormalize", "expected"),
    [
        ("softmax", False, [v / (math.e**2 + 2 * math.e + 1) for v in (math.e**2, math.e)]),
        ("softmax", True, [math.e**2 / (math.e**2 + math.e), math.e / (math.e**2 + math.e)]),
        ("sigmoid", False, [_sigmoid(2.0), _sigmoid(1.0)]),
        (
            "sigmoid",
            True,
            [
                _sigmoid(2.0) / (_sigmoid(2.0) + _sigmoid(1.0)),
                _sigmoid(1.0) / (_sigmoid(2.0) + _sigmoid(1.0)),
            ],
        ),
    ],
)
def test_reference_route_by_hand(scoring: str, renormalize: bool, expected: list[float]) -> None:
    """Top-2 of [2, 1, 1, 0]: expert 0, then 1 wins its tie with 2; weights as worked out."""
    r = reference_route(ROW, RoutingSpec(2, renormalize, scoring))
    assert r.ids.tolist() == [[0, 1]]
    assert r.weights.dtype == torch.float32
    assert (
        r.weights.tolist() == torch.tensor([list(expected)], dtype=torch.float64).float().tolist()
    )


def test_ties_go_to_the_lower_index_in_slot_order_too() -> None:
    logits = torch.tensor([[0.5, 0.5, 0.5, 0.5], [-1.0, 3.0, 0.0, 3.0]])
    r = reference_route(logits, RoutingSpec(3, False, "sigmoid"))
    assert r.ids.tolist() == [[0, 1, 2], [1, 3, 2]]


def test_softmax_reference_is_route_bit_for_bit() -> None:
    logits = routing_logits()
    for k in (1, 2, 4, 16):
        for renormalize in (False, True):
            a = reference_route(logits, RoutingSpec(k, renormalize))
            b = route(logits, k, renormalize)
            assert torch.equal(a.ids, b.ids)
            assert torch.equal(a.weights.view(torch.int32), b.weights.view(torch.int32))


def test_spec_refuses_what_it_cannot_mean() -> None:
    with pytest.raises(ValueError, match="unknown scoring"):
        RoutingSpec(2, False, "softplus")
    with pytest.raises(ValueError, match="unknown tie_break"):
        RoutingSpec(2, False, "softmax", "higher_index")
    with pytest.raises(ValueError, match="at least 1"):
        RoutingSpec(0, False)
    with pytest.raises(ValueError, match=r"must be in 1\.\.4"):
        reference_route(ROW, RoutingSpec(5, False))
    with pytest.raises(ValueError, match="NaN or Inf"):
        reference_route(torch.tensor([[0.0, math.nan]]), RoutingSpec(1, False))
    assert set(SCORING_FUNCTIONS) == {"softmax", "sigmoid"}


def _float32_router(logits: torch.Tensor, spec: RoutingSpec) -> Routing:
    """An engine-style router (scores, sort and renormalization in float32)."""
    x = logits.float()
    scores = torch.softmax(x, -1) if spec.scoring == "softmax" else torch.sigmoid(x)
    ids = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, : spec.top_k]
    w = scores.gather(1, ids)
    if spec.renormalize:
        w = w / w.sum(dim=1, keepdim=True)
    return Routing(ids, w, int(logits.shape[1]))


@pytest.mark.parametrize(("scoring", "renormalize"), ROUTING_SPECS)
def test_a_float32_router_passes_and_the_bound_is_tight(scoring: str, renormalize: bool) -> None:
    """On the suite's logits a float32 router chooses the reference's experts in its order
    and stays within the bound, which is below 2e-5 relative (a wrong rule moves weights
    by percents)."""
    for k, e in ((2, 8), (4, 16)):
        logits = routing_logits()[:, :e]
        spec = RoutingSpec(k, renormalize, scoring)
        ref = reference_route(logits, spec)
        got = _float32_router(logits, spec)
        checks = self_routing_checks(got, ref, logits, spec, ordered=True)
        assert [c.verdict() for c in checks] == ["pass"] * 3
        bound = routing_weight_bound(logits, ref, spec)
        assert bool((bound <= 2e-5 * ref.weights.double()).all())
        assert bool((bound > 0).all())


def test_checks_tell_order_from_set_and_weights() -> None:
    spec = RoutingSpec(2, True)
    ref = reference_route(ROW, spec)
    swapped = Routing(ref.ids.flip(1), ref.weights.flip(1), 4)
    order = self_routing_checks(swapped, ref, ROW, spec, ordered=True)
    assert [c.failed for c in order] == [False, True, False]
    unordered = self_routing_checks(swapped, ref, ROW, spec, ordered=False)
    assert [c.verdict()[:3] for c in unordered] == ["pas", "n/a", "pas"]
    other = Routing(torch.tensor([[0, 2]]), ref.weights, 4)  # the tie to the higher index
    assert [c.failed for c in self_routing_checks(other, ref, ROW, spec, ordered=True)] == [
        True,
        True,
        True,
    ]
    nudged = Routing(ref.ids, ref.weights * (1 + 1e-4), 4)
    assert self_routing_checks(nudged, ref, ROW, spec, ordered=True)[2].failed
    assert returned_routing(None, ref).failed
    assert returned_routing(Routing(ref.ids + 3, ref.weights, 4), ref).failed
    assert not returned_routing(ref, ref).failed


def test_emulated_routes_itself_and_native_does_not() -> None:
    platform = detect()
    spec = RoutingSpec(2, False, "sigmoid")
    assert routes_itself(get_moe_path("emulated"))
    assert routing_support(get_moe_path("emulated"), spec, platform).ok
    native = get_moe_path("native")
    assert not routes_itself(native)
    assert "does not route itself" in routing_support(native, spec, platform).reason


class _SoftmaxOnly:
    """A self-routing path that declines sigmoid routing and leaves its slots unordered."""

    name = "softmax_only"
    ranks_slots = False

    def supports_routing(self, spec: RoutingSpec, platform: object) -> Support:
        return Support.yes() if spec.scoring == "softmax" else Support.no("softmax only")

    def route_and_forward(self, *args: object) -> None:
        raise AssertionError("not called here")


def test_a_path_may_decline_a_spec_and_its_slot_order() -> None:
    path, platform = _SoftmaxOnly(), detect()
    assert routes_itself(path)
    assert routing_support(path, RoutingSpec(2, True, "softmax"), platform).ok
    assert routing_support(path, RoutingSpec(2, True, "sigmoid"), platform).reason == (
        "softmax only"
    )
    assert not ranks_slots(path)
    assert ranks_slots(get_moe_path("emulated"))
