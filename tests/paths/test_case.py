"""`Case`: a suite case's id, record fields, finding case and golden entry come from the
fields it declares. The ids and records below are the contract users script against
(`-k` expressions, results.json columns): each is what that suite produced before its case
classes shared this type, and a change here is a change to that contract."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import pytest
import torch

from harness.linear.call_cases import CallCase
from harness.linear.cases import LinearCase, OperandCase, QuantizeCase
from harness.linear.designs import DesignCase
from harness.linear.operand_designs import DesignedCase
from harness.linear.special_values import SpecialCase
from harness.loading.cases import LoadingParams
from harness.models.cases import ModelCase
from harness.moe.bias_cases import ExpertBiasCase
from harness.moe.cases import MoECase
from harness.moe.designs import LongKMoECase
from harness.moe.routing import RoutingSpec
from harness.moe.routing_cases import RoutingCase
from harness.paths import LinearProblem
from harness.paths.case import Case, id_part, record_value
from tests.conftest import REPO_ROOT


@dataclass(frozen=True)
class Sample(Case):
    SUITE = "sample"
    ID = ("scheme", "shape", "bias", "note")
    RECORD = ("scheme", "shape", "bias", "label=note")
    FINDING_SUITE = "linear"
    GOLDEN = "sample/{scheme}"

    scheme: str
    shape: tuple[int, int, int]
    bias: bool
    note: str = ""


def test_id_parts_render_shapes_flags_and_text() -> None:
    assert id_part("shape", (1, 16, 256)) == "1x16x256"
    assert id_part("bias", True) == "bias"
    assert id_part("bias", False) == "nobias"
    assert id_part("tokens", 7) == "7"
    assert record_value((8, 128, 256)) == "8x128x256"
    assert record_value(True) is True


def test_a_case_builds_its_id_record_finding_and_golden_from_its_fields() -> None:
    case = Sample("fp8_per_tensor", (4, 8, 16), False)
    assert case.id == "fp8_per_tensor-4x8x16-nobias"  # the empty note is dropped
    assert case.record_fields() == {
        "suite": "sample",
        "scheme": "fp8_per_tensor",
        "shape": "4x8x16",
        "bias": False,
        "label": "",
    }
    assert case.golden_entry == "sample/fp8_per_tensor"
    problem = LinearProblem(4, 8, 16, False, torch.float32)
    finding = case.finding_case(problem=problem)
    assert (finding.suite, finding.scheme, finding.problem, finding.id) == (
        "linear",
        "fp8_per_tensor",
        problem,
        case.id,
    )


def test_a_case_without_findings_or_golden_says_so() -> None:
    case = QuantizeCase("fp8_per_tensor", (1, 16, 256))
    with pytest.raises(TypeError, match="no findings"):
        case.finding_case()
    with pytest.raises(TypeError, match="no findings"):
        MoECase("s", "p", 1, 2, 1, False).finding_case()
    with pytest.raises(TypeError, match="no golden entry"):
        _ = ModelCase("llama_tiny", "amd-quark:fp8").golden_entry


CONTRACT: list[tuple[Case, str, dict[str, object], str | None]] = [
    (
        LinearCase("fp8_per_block", "emulated", (1, 16, 256), True, "bf16"),
        "fp8_per_block-emulated-1x16x256-bias-bf16",
        {"suite": "linear", "shape": "1x16x256", "bias": True, "out_dtype": "bf16"},
        "linear/fp8_per_block",
    ),
    (
        OperandCase("fp8_per_block", "emulated", (1, 16, 256), "bf16"),
        "fp8_per_block-emulated-1x16x256-bf16",
        {"suite": "linear_operands", "shape": "1x16x256"},
        "linear/fp8_per_block",
    ),
    (
        QuantizeCase("fp8_per_block", (1, 16, 256)),
        "fp8_per_block-1x16x256",
        {"suite": "quantize", "scheme": "fp8_per_block", "shape": "1x16x256"},
        "linear/fp8_per_block",
    ),
    (
        DesignCase("fp16_overflow", "fp8_per_block", "emulated", "fp16"),
        "fp8_per_block-emulated-fp16_overflow-fp16",
        {"suite": "linear", "design": "fp16_overflow", "bias": True},
        None,
    ),
    (
        DesignedCase("fp8_per_block", "emulated", "small_weight_block", "bf16"),
        "fp8_per_block-emulated-small_weight_block-bf16",
        {"suite": "linear_designed", "case": "small_weight_block", "shape": "4x128x256"},
        None,
    ),
    (
        SpecialCase("fp8_per_block", "emulated", "nan"),
        "fp8_per_block-emulated-nan",
        {"suite": "special_values", "special": "nan"},
        None,
    ),
    (
        LoadingParams("fp8_per_block", "fused_spread_scales", "e4m3fn", "fp8", "emulated"),
        "fp8_per_block-fused_spread_scales-e4m3fn-fp8-emulated-bias",
        {"suite": "loading", "loader": "fp8", "path": "emulated", "bias": True},
        "loading/fp8_per_block/fused_spread_scales",
    ),
    (
        LoadingParams("fp8_per_block", "fused_spread_scales", "e4m3fn"),
        "fp8_per_block-fused_spread_scales-e4m3fn",
        {"suite": "loading", "loader": None, "path": None},
        "loading/fp8_per_block/fused_spread_scales",
    ),
    (
        MoECase("fp8_per_block", "emulated", 1, 16, 4, False),
        "fp8_per_block-emulated-t1-e16k4-norenorm",
        {"suite": "moe", "shape": "t1-h32-i32", "experts": 16, "renormalize": False},
        "moe/fp8_per_block",
    ),
    (
        LongKMoECase("fp8_per_block", "emulated"),
        "fp8_per_block-emulated-t4-e3k2-long_k4224",
        {"suite": "moe", "shape": "t4-h4224-i32", "design": "long_k", "top_k": 2},
        None,
    ),
    (
        RoutingCase("fp8_per_tensor", "emulated", 16, 4, "sigmoid", False),
        "fp8_per_tensor-emulated-t16-e16k4-sigmoid-norenorm",
        {"suite": "moe", "routing": "self", "scoring": "sigmoid", "shape": "t16-h32-i32"},
        "moe/fp8_per_tensor",
    ),
    (
        RoutingCase(
            "fp8_per_tensor",
            "emulated",
            16,
            4,
            "sigmoid",
            True,
            design="near_ties",
            rule=RoutingSpec(
                4,
                True,
                "sigmoid",
                n_group=4,
                topk_group=2,
                correction_bias=(0.5, -1.0, -0.75, -0.875) * 4,
                routed_scaling_factor=2.5,
            ),
        ),
        "fp8_per_tensor-emulated-t16-e16k4-sigmoid-renorm-g4k2-bias-x2.5-near_ties",
        {"suite": "moe", "routing": "self", "routing_spec": "sigmoid-renorm-g4k2-bias-x2.5"},
        "moe/fp8_per_tensor",
    ),
    (
        ExpertBiasCase("w_mxfp4", "native"),
        "w_mxfp4-native-t7-e8k2-expert_bias",
        {"suite": "moe", "expert_bias": True, "shape": "t7-h32-i32", "renormalize": False},
        "moe/w_mxfp4",
    ),
    (
        CallCase("fp8_per_tensor", "emulated", "order"),
        "fp8_per_tensor-emulated-order-bf16",
        {"suite": "linear", "kind": "order", "shape": "8x128x2048", "out_dtype": "bf16"},
        None,
    ),
    (
        ModelCase("llama_tiny", "amd-quark:fp8", "model.layers.0.mlp.down_proj"),
        "llama_tiny-amd-quark:fp8-model.layers.0.mlp.down_proj",
        {"suite": "models", "model": "llama_tiny", "tool": "amd-quark", "scheme": "fp8_per_tensor"},
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "want_id", "want_record", "want_golden"), CONTRACT, ids=lambda v: type(v).__name__
)
def test_each_suites_ids_and_records_are_unchanged(
    case: Case, want_id: str, want_record: dict[str, object], want_golden: str | None
) -> None:
    assert case.id == want_id
    record = case.record_fields()
    assert {k: record.get(k, "<missing>") for k in want_record} == want_record
    if want_golden is not None:
        assert case.golden_entry == want_golden


def test_no_suite_builds_record_fields_by_hand() -> None:
    """Only `Case` (and the memory tracker's measurement, which is no case) defines
    ``record_fields``: a case class declares its fields instead."""
    allowed = {"harness/paths/case.py", "harness/memory/tracker.py"}
    found = []
    for root in ("harness", "suites"):
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            label = str(path.relative_to(REPO_ROOT))
            for node in ast.walk(ast.parse(path.read_text())):
                is_def = isinstance(node, ast.FunctionDef) and node.name == "record_fields"
                if is_def and label not in allowed:
                    found.append(f"{label}:{node.lineno}")
    assert found == []


def test_the_contract_list_covers_every_case_class_of_the_harness() -> None:
    """A new case class in harness/ gets a row above (its ids are a contract too)."""
    covered = {type(case).__name__ for case, *_ in CONTRACT}
    declared = set()
    for path in sorted((REPO_ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "Case" for b in node.bases
            ):
                declared.add(node.name)
    assert declared - covered == set()
