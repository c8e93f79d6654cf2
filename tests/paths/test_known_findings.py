"""Known engine findings match a case's fields (suite, scheme, problem, named case),
never its test-id text; the deprecated id-pattern form still works for old plugins."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from harness import FindingCase, KnownFinding, LinearProblem
from harness.paths.findings import known_finding

BF16_8x128x256 = LinearProblem(8, 128, 256, True, torch.bfloat16)
FP32_4x16x176 = LinearProblem(4, 16, 176, False, torch.float32)


def linear(scheme: str, problem: LinearProblem) -> FindingCase:
    return FindingCase("linear", scheme, problem, id="an id no finding reads")


def test_each_field_left_none_matches_any_case() -> None:
    anything = KnownFinding("always")
    assert anything.matches(linear("fp8_per_tensor", BF16_8x128x256))
    assert anything.matches(FindingCase("quantizers", case="edge_cases", scale_mode="rceil"))


@pytest.mark.parametrize(
    ("finding", "matches"),
    [
        (KnownFinding("s", schemes=frozenset({"fp8_per_block"})), True),
        (KnownFinding("s", schemes=frozenset({"fp8_per_tensor"})), False),
        (KnownFinding("s", suites=frozenset({"linear"})), True),
        (KnownFinding("s", suites=frozenset({"loading"})), False),
        (KnownFinding("s", out_dtypes=frozenset({torch.float32})), True),
        (KnownFinding("s", out_dtypes=frozenset({torch.bfloat16})), False),
        (KnownFinding("s", when=lambda c: c.problem is not None and c.problem.k % 32 != 0), True),
        (KnownFinding("s", when=lambda c: c.problem is not None and c.problem.m > 4), False),
        (KnownFinding("s", cases=frozenset({"nan"})), False),
    ],
)
def test_every_declared_field_must_hold(finding: KnownFinding, matches: bool) -> None:
    assert finding.matches(linear("fp8_per_block", FP32_4x16x176)) is matches


def test_first_matching_finding_wins_and_none_is_none() -> None:
    path = SimpleNamespace(
        known_findings=(
            KnownFinding("odd K", when=lambda c: c.problem is not None and c.problem.k % 32 != 0),
            KnownFinding("fp32", out_dtypes=frozenset({torch.float32})),
        )
    )
    assert known_finding(path, linear("x", FP32_4x16x176)) == "odd K"
    assert known_finding(path, linear("x", LinearProblem(4, 16, 256, False, torch.float32))) == (
        "fp32"
    )
    assert known_finding(path, linear("x", BF16_8x128x256)) is None
    assert known_finding(object(), linear("x", BF16_8x128x256)) is None


def test_quantizer_cases_match_on_spec_fields() -> None:
    quantizer = SimpleNamespace(
        known_findings=(
            KnownFinding(
                "floor", suites=frozenset({"quantizers"}), when=lambda c: c.scale_mode == "floor"
            ),
        )
    )
    floor = FindingCase("quantizers", case="edge_cases", element_format="e2m1", scale_mode="floor")
    rceil = FindingCase("quantizers", case="edge_cases", element_format="e2m1", scale_mode="rceil")
    assert known_finding(quantizer, floor) == "floor"
    assert known_finding(quantizer, rceil) is None


def test_an_unknown_suite_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match="unknown suites"):
        KnownFinding("typo", suites=frozenset({"linaer"}))


def test_the_deprecated_pattern_form_matches_the_test_id() -> None:
    plugin = SimpleNamespace(known_findings={"p-fp8_*-bf16": "bf16", "p-*-fp16": "fp16"})

    def case(case_id: str) -> FindingCase:
        return FindingCase("linear", id=case_id)

    assert known_finding(plugin, case("p-fp8_per_channel-8x128x256-bias-bf16")) == "bf16"
    assert known_finding(plugin, case("p-w_mxfp4-1x16x256-bias-fp16")) == "fp16"
    assert known_finding(plugin, case("p-fp8_per_channel-8x128x256-bias-fp32")) is None


def test_a_finding_refuses_rules_the_harness_does_not_know() -> None:
    from harness.core.conventions import UnknownConventionError

    with pytest.raises(UnknownConventionError, match="no_such_rule"):
        KnownFinding("text", behaves_as=frozenset({"no_such_rule"}))


def test_finding_models_follow_each_rule_and_their_union() -> None:
    """One model per scoped finding, plus all rules at once when several match; none when a
    matching finding names no rule (it covers its whole case)."""
    from harness.core.quantize import quantize
    from harness.core.schemes import mx_spec
    from harness.quantizers.expect import finding_models
    from tests.canaries.quantizers import ControlQuantizer

    spec = mx_spec("e2m1", "floor")
    # every element an exact E2M1 tie times the block scale (2^0: amax 5 -> floor scale 1)
    x = torch.tensor([[0.25, 1.25, 2.5, 5.0] * 8, [-0.25, -1.25, -2.5, -5.0] * 8])
    ties = KnownFinding("ties", behaves_as=frozenset({"fp4_ties_away"}))
    zeros = KnownFinding("zeros", behaves_as=frozenset({"negative_zero_code_positive"}))
    whole = KnownFinding("whole case")
    q = ControlQuantizer()
    assert finding_models(q, spec, [], x) is None
    assert finding_models(q, spec, [ties, whole], x) is None
    (model,) = finding_models(q, spec, [ties], x)
    reference = quantize(x, spec)
    assert bool((model.codes != reference.codes).all())  # every tie moved, away from zero
    both = finding_models(q, spec, [ties, zeros], x)
    assert len(both) == 3


def test_finding_models_drop_the_conventions_the_finding_replaces() -> None:
    """A quantizer declaring a scale floor whose engine has no floor (a finding whose rule
    replaces the convention): the model is the reference under the rule alone, so a zero
    row is 0 / 0 = NaN there and not the floor's zeros."""
    from harness.core.quantize import quantize
    from harness.core.schemes import get_scheme
    from harness.quantizers.expect import finding_models
    from tests.canaries.quantizers import ControlQuantizer

    spec = get_scheme("fp8_per_channel").activation
    assert spec is not None
    x = torch.tensor([[0.0, 0.0], [448.0, 1.0]])
    q = ControlQuantizer()
    q.conventions = frozenset({"scale_floor_fp32_min_normal"})
    unguarded = KnownFinding(
        "no floor",
        behaves_as=frozenset({"fp32_scale_zero_unguarded"}),
        replaces=frozenset({"scale_floor_fp32_min_normal"}),
    )
    (model,) = finding_models(q, spec, [unguarded], x)
    assert model.scale.flatten().tolist() == [0.0, 1.0]
    assert bool(torch.isnan(model.dequantize()[0]).all())
    kept = KnownFinding("kept", behaves_as=frozenset({"fp32_scale_zero_unguarded"}))
    (floored,) = finding_models(q, spec, [kept], x)  # the floor, applied after the rule
    assert floored.scale.flatten().tolist() == [2.0**-126, 1.0]
    assert quantize(x, spec).scale.flatten().tolist() == [1.0, 1.0]


def test_finding_rules_replace_the_conventions_they_name() -> None:
    """A case under findings with rules is held to the declared conventions less those the
    findings replace, plus their rules; any finding without rules leaves nothing to scope."""
    from harness.paths.findings import finding_rules

    declared = frozenset({"min_scale_1_over_512max", "ue8m0_min_scale_1_over_512max"})
    order = KnownFinding(
        "order",
        behaves_as=frozenset({"ue8m0_floor_after_rounding"}),
        replaces=frozenset({"ue8m0_min_scale_1_over_512max"}),
    )
    assert finding_rules([order], declared) == frozenset(
        {"min_scale_1_over_512max", "ue8m0_floor_after_rounding"}
    )
    assert finding_rules([order, KnownFinding("whole")], declared) is None
    assert finding_rules([], declared) is None
