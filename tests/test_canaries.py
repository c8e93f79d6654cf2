"""The canaries are realistic and their catalog is consistent (the run itself is
``python -m tests.canaries``, a step of ``python -m harness selftest``).

Realistic means: on a golden case of the first scheme it is run on, a canary returns finite
numbers of the right shape, not all zeros, without raising, as its control does.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pytest
import torch

from harness.core.inputs import scaled_normal
from harness.core.schemes import get_scheme
from harness.linear.cases import load_linear_case
from harness.loading.cases import checkpoint_from_golden
from harness.loading.cases import golden_entry as loading_entry
from harness.moe.cases import MoECase, load_moe_case
from harness.moe.cases import golden_entry as moe_entry
from harness.moe.model import route
from harness.moe.routing_cases import ROUTING_SPECS, RoutingCase, routing_inputs
from harness.moe.routing_designs import DESIGN, design_specs
from harness.platform.info import detect
from tests.canaries.catalog import CANARIES, CONTROLS, GROUPS, Canary
from tests.canaries.mutants import MUTANTS

SHAPE = (8, 128, 256)


def _target(spec: str) -> Any:
    module, attribute = spec.split(":")
    obj = getattr(import_module(module), attribute)
    return obj() if isinstance(obj, type) else obj


def _by_kind(kind: str) -> list[Canary]:
    return [c for c in CANARIES if c.kind == kind]


def test_catalog_is_consistent() -> None:
    names = [c.name for c in CANARIES]
    assert len(set(names)) == len(names)
    # no name is another's prefix: test ids are attributed by "-<name>-" substrings
    assert not [(a, b) for a in names for b in names if a != b and b.startswith(a)]
    for c in CANARIES:
        assert c.kind in GROUPS
        assert c.control in CONTROLS
        assert c.select
        assert CONTROLS[c.control][0] == c.kind
        if c.kind == "mutant":
            assert c.name in MUTANTS
        else:
            assert _target(c.target).name == c.name


@pytest.mark.parametrize("canary", _by_kind("path"), ids=lambda c: c.name)
def test_path_canary_gives_plausible_numbers(canary: Canary, golden_store: Any) -> None:
    scheme = canary.select[0].schemes[0]
    case = load_linear_case(golden_store.load(f"linear/{scheme}"), scheme, SHAPE, bias=True)
    for name in (canary.name, canary.control):
        path = _target(canary.target if name == canary.name else CONTROLS[name][1])
        y = path.forward(case.layer, case.x, torch.bfloat16)
        assert y.shape == SHAPE[:2]
        assert bool(torch.isfinite(y).all())
        assert bool((y != 0).any())


@pytest.mark.parametrize("canary", _by_kind("moe_path"), ids=lambda c: c.name)
def test_moe_canary_gives_plausible_numbers(canary: Canary, golden_store: Any) -> None:
    scheme = canary.select[0].schemes[0]
    case = MoECase(scheme, canary.name, 7, 8, 2, False)
    loaded = load_moe_case(golden_store.load(moe_entry(scheme)), case)
    routing = route(loaded.logits, 2, False)
    out = _target(canary.target).forward(loaded.layer, loaded.x, routing, detect()).out
    assert bool(torch.isfinite(out).all())
    assert bool((out != 0).any())


@pytest.mark.parametrize("canary", _by_kind("quantizer"), ids=lambda c: c.name)
def test_quantizer_canary_gives_plausible_codes(canary: Canary) -> None:
    """Same scales and codes as its control on a bf16-valued tensor (its fault needs
    float32 input bits), finite scales and some non-zero codes."""
    scheme = get_scheme(canary.select[0].schemes[0])
    x = scaled_normal("canaries/quantizer", 8, 256, scheme.weight)
    got = _target(canary.target).quantize(x, scheme.weight)
    want = _target(CONTROLS[canary.control][1]).quantize(x, scheme.weight)
    assert torch.equal(got.codes, want.codes)
    assert torch.equal(got.scale, want.scale)
    assert bool(torch.isfinite(got.scale).all())
    assert bool((got.codes != 0).any())


@pytest.mark.parametrize("canary", _by_kind("loader"), ids=lambda c: c.name)
def test_loader_canary_gives_plausible_numbers(canary: Canary, golden_store: Any) -> None:
    scheme = canary.select[0].schemes[0]
    data = golden_store.load(loading_entry(scheme, "fused_spread_scales"))
    ckpt = checkpoint_from_golden(data, scheme, "fused_spread_scales")
    w = _target(canary.target).load(ckpt, "e4m3fnuz").layer.weight.dequantize()
    assert bool((w != 0).any())


def _routers() -> list[Canary]:
    return [c for c in _by_kind("moe_path") if c.control == "control_moe_router"]


@pytest.mark.parametrize("canary", _routers(), ids=lambda c: c.name)
def test_router_canary_routes_plausibly_and_differs(canary: Canary, golden_store: Any) -> None:
    """A router canary routes itself to finite weights (positive where no correction bias
    can enter them) and a finite, non-zero block, and differs from its control's routing on
    at least one spec (plain top-k, or the engines' rules of the near-tie design)."""
    scheme = canary.select[0].schemes[0]
    data = golden_store.load(moe_entry(scheme))
    bad, good = _target(canary.target), _target(CONTROLS[canary.control][1])
    differs = False
    cases = [RoutingCase(scheme, canary.name, 8, 2, s, r) for s, r in ROUTING_SPECS]
    cases += [
        RoutingCase(
            scheme, canary.name, 16, 4, spec.scoring, spec.renormalize, design=DESIGN, rule=spec
        )
        for spec in design_specs(16, 4)
    ]
    for case in cases:
        layer, x = routing_inputs(data, case)
        logits = case.logits
        got = bad.route_and_forward(layer, x, logits, case.spec, detect())
        want = good.route_and_forward(layer, x, logits, case.spec, detect())
        assert bool(torch.isfinite(got.out).all())
        assert bool((got.out != 0).any())
        assert got.routing is not None
        assert want.routing is not None
        assert bool(torch.isfinite(got.routing.weights).all())
        if case.spec.correction_bias is None:
            assert bool((got.routing.weights > 0).all())
        differs |= not torch.equal(got.routing.ids, want.routing.ids)
        differs |= not torch.equal(got.routing.weights, want.routing.weights)
    assert differs
