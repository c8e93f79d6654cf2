"""MoE paths that route themselves: router logits and a `RoutingSpec` in, routing and block out.

For every path with ``route_and_forward`` (`harness.moe.paths.base.SelfRoutingMoEPath`;
paths without it are handed the suite's routing in suites/test_moe.py, unchanged): the
routing it chose against `harness.moe.routing.reference_route` (harness/moe/routing_checks.py),
then the block under its own routing against the float64 reference with the MoE suite's
derived bounds (harness/moe/checks.py). Cases and logits: harness/moe/routing_cases.py.
"""

from __future__ import annotations

import pytest
import torch

from harness.core.schemes import get_scheme
from harness.moe.cases import MOE_HIDDEN
from harness.moe.checks import ReferenceRun, moe_block_checks, recorded_metrics, shape_checks
from harness.moe.model import MoETrace, Routing
from harness.moe.paths import (
    get_moe_path,
    moe_paths,
    ranks_slots,
    routes_itself,
    routing_support,
    tie_break,
)
from harness.moe.routing import reference_route
from harness.moe.routing_cases import (
    ALL_TIED_TOKEN,
    BOUNDARY_TIE_TOKEN,
    DESIGN_SCHEMES,
    ROUTING_SCHEMES,
    ROUTING_SPECS,
    RoutingCase,
    expected_under,
    routing_cases,
    routing_inputs,
    routing_logits,
)
from harness.moe.routing_checks import returned_routing, self_routing_checks
from harness.moe.routing_designs import DESIGN_CONFIGS, design_specs
from harness.paths.base import is_reference, kernel_name
from harness.paths.findings import known_finding
from harness.platform.info import PlatformInfo
from harness.plugin import RecordChecks, RecordResult, load_golden
from harness.pytest_plugin.verdicts import xfail_known
from harness.store.golden_store import GoldenStore


def _routed(
    case: RoutingCase,
    path: object,
    finding: str | None,
    record_result: RecordResult,
    *args: object,
) -> MoETrace:
    try:
        return path.route_and_forward(*args)  # type: ignore[attr-defined,no-any-return]
    except Exception as exc:
        raised = f"MoE path {case.path!r} raised: {type(exc).__name__}: {exc}"
        if finding is not None:
            xfail_known(record_result, finding, raised)
        pytest.fail(raised, pytrace=False)


@pytest.mark.parametrize("case", list(routing_cases()), ids=lambda c: c.id)
def test_moe_routing(
    case: RoutingCase,
    golden_store: GoldenStore,
    qh_platform: PlatformInfo,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    """The path's routing (expert set, slot order, weights), then every block check."""
    scheme = get_scheme(case.scheme)
    path = get_moe_path(case.path)
    for support in (
        path.supports(scheme, case.problem, qh_platform),
        routing_support(path, case.spec, qh_platform),
    ):
        if not support.ok:
            pytest.skip(support.reason)
    numerics = path.numerics(scheme, qh_platform)
    record_result(kernel=kernel_name(path, scheme, qh_platform), numerics=numerics.describe())
    layer, x = routing_inputs(load_golden(golden_store, case.golden_entry), case)
    logits = case.logits
    expected = reference_route(logits, case.spec)
    device = qh_platform.torch_device
    finding = known_finding(path, case.finding_case())
    trace = _routed(
        case,
        path,
        finding,
        record_result,
        layer.to(device),
        x.to(device),
        logits.to(device),
        case.spec,
        qh_platform,
    )

    gate = returned_routing(trace.routing, expected)
    if gate.failed or trace.routing is None:
        record_checks([gate], known_finding=finding)
        return
    own = Routing(trace.routing.ids.cpu().long(), trace.routing.weights.cpu().float(), case.experts)
    checks = [
        gate,
        *self_routing_checks(
            own, expected, logits, case.spec, ranks_slots(path), tie_break(path, case.spec)
        ),
    ]
    # The block under the path's own routing (its ids, slot order and weights): the float64
    # reference for those experts, so expert errors are told apart from routing errors.
    loaded = expected_under(layer, x, own)
    shapes = shape_checks(trace, loaded, MOE_HIDDEN)
    if any(c.failed for c in shapes):
        record_checks(checks + shapes, known_finding=finding)
    reference = None
    if not is_reference(path):
        emulated = get_moe_path("emulated")
        reference = ReferenceRun(
            emulated.forward(layer, x, own, qh_platform), emulated.numerics(scheme, qh_platform)
        )
    record_result(**recorded_metrics(trace, loaded, own, numerics, reference))
    block = moe_block_checks(case.path, trace, loaded, own, numerics, reference)
    record_checks(checks + shapes + block, known_finding=finding)


def test_routing_cases_cover_every_self_routing_path() -> None:
    """Every path that routes itself gets every scheme x config x spec; no other path does."""
    cases = list(routing_cases())
    selfrouting = {n for n, p in moe_paths().items() if routes_itself(p)}
    assert "emulated" in selfrouting  # so the cases run on every platform
    assert {c.path for c in cases} == selfrouting
    per = len(ROUTING_SCHEMES) * 2 * len(ROUTING_SPECS)
    designed = len(DESIGN_SCHEMES) * sum(len(design_specs(e, k)) for e, k in DESIGN_CONFIGS)
    assert len(cases) == len(selfrouting) * (per + designed)
    assert len({c.id for c in cases}) == len(cases)


def test_routing_logits_plant_the_ties() -> None:
    """The planted rows decide what the tie-break rule decides (module docstring)."""
    logits = routing_logits()
    for k, experts in ((2, 8), (4, 16)):
        boundary = logits[BOUNDARY_TIE_TOKEN, :experts]
        kth = boundary.sort(descending=True).values[k - 1]
        # more experts tied at the k-th score than slots left for them: the rule decides
        assert int((boundary == kth).sum()) > k - int((boundary > kth).sum())
        tied = logits[ALL_TIED_TOKEN, :experts]
        assert bool((tied == tied[0]).all())
    assert bool(torch.equal(logits, logits.to(torch.bfloat16).float()))
