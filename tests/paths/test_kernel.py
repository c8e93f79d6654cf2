"""`Kernel`: a native kernel's contract as data, with ``accepts`` written once.

Each refusal reads the scheme's QuantSpec fields (never its name), operands before the
activation's scales, and quotes the engine's reason for an activation limit.
"""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from harness import (
    SCHEMES,
    WHOLE,
    ActivationScales,
    Kernel,
    MixedOperands,
    OperandContract,
    OperandSide,
    SpecCheck,
    get_scheme,
)
from harness.core.schemes import Scheme
from tests.conftest import REPO_ROOT

FP8 = frozenset({"e4m3fn", "e4m3fnuz"})
TENSOR_OR_ROW = frozenset({(WHOLE, WHOLE), (1, WHOLE)})
ROWWISE = OperandContract(FP8, "fp32", TENSOR_OR_ROW, TENSOR_OR_ROW)


def _with_activation(name: str, **fields: object) -> Scheme:
    """A registered scheme with its activation spec's ``fields`` replaced."""
    scheme = get_scheme(name)
    assert scheme.activation is not None
    return replace(scheme, activation=replace(scheme.activation, **fields))


def test_a_kernel_refuses_operands_before_activation_scales() -> None:
    kernel = Kernel("k", ROWWISE, ActivationScales(static=frozenset(), why="the recipe"))
    assert kernel.accepts(get_scheme("fp8_per_channel")).ok  # dynamic per-row activation
    block = kernel.accepts(get_scheme("fp8_per_block"))
    assert not block.ok
    assert "scales are block_128x128" in block.reason  # the operands decide first
    static = kernel.accepts(get_scheme("fp8_per_tensor"))  # static per-tensor activation
    assert not static.ok
    assert (
        static.reason
        == "the activation scales are static; the kernel runs no static ones (the recipe)"
    )


def test_activation_scales_limit_each_kind_to_its_tiles() -> None:
    rule = ActivationScales(
        dynamic=frozenset({(1, WHOLE)}), static=frozenset({(WHOLE, WHOLE)}), why="engine"
    )
    kernel = Kernel("k", ROWWISE, rule)
    assert kernel.accepts(get_scheme("fp8_per_tensor")).ok  # static per tensor
    assert kernel.accepts(get_scheme("fp8_per_channel")).ok  # dynamic per row
    dynamic_tensor = kernel.accepts(
        _with_activation("fp8_per_tensor", dynamic=True, block=(WHOLE, WHOLE))
    )
    assert not dynamic_tensor.ok
    assert dynamic_tensor.reason == "dynamic activation scales are per_tensor, not per_row (engine)"


def test_a_weight_only_scheme_meets_only_the_operand_rule() -> None:
    anything = Kernel("k", SpecCheck(lambda spec, role: ""), ActivationScales(dynamic=frozenset()))
    assert anything.accepts(get_scheme("w_mxfp4")).ok  # no activation spec to limit
    quantized_only = SpecCheck(lambda spec, role: "" if spec else f"{role} is not quantized")
    refused = Kernel("k", quantized_only).accepts(get_scheme("w_mxfp4"))
    assert refused.reason == "activation is not quantized"


def test_mixed_operands_state_each_side_on_its_own() -> None:
    mixed = MixedOperands(
        weight=OperandSide(frozenset({"e2m1"}), "e8m0", frozenset({(1, 32)})),
        activation=OperandSide(frozenset({"e4m3fn"}), "fp32", frozenset({(1, WHOLE)})),
    )
    kernel = Kernel("gemm_a8wfp4", mixed)
    assert kernel.accepts(get_scheme("w_mxfp4_a_fp8_per_token")).ok
    same_format = kernel.accepts(get_scheme("w_mxfp4_a_mxfp4"))
    assert same_format.reason == "activation format e2m1 is not one of ['e4m3fn']"


@pytest.mark.parametrize(
    ("probe", "per_format", "want"),
    [("", False, ""), ("triton", False, "triton"), ("triton.dot", True, "triton.dot.e4m3fn")],
)
def test_the_capability_probe_is_named_per_format_where_declared(
    probe: str, per_format: bool, want: str
) -> None:
    kernel = Kernel("k", ROWWISE, probe=probe, probe_per_format=per_format)
    assert kernel.capability(get_scheme("fp8_per_channel")) == want


def test_every_registered_scheme_gets_a_verdict_and_a_reason_when_refused() -> None:
    kernel = Kernel("k", ROWWISE, ActivationScales(static=frozenset({(WHOLE, WHOLE)})))
    for scheme in SCHEMES.values():
        verdict = kernel.accepts(scheme)
        assert verdict.ok or verdict.reason, scheme.name


def test_accepts_is_written_once() -> None:
    """Every kernel contract in the harness and the adapters is a `Kernel` (or delegates to
    one): no other class writes its own ``accepts``."""
    allowed = {"harness/paths/kernel.py", "harness/paths/base.py"}  # base: the protocol
    found = []
    for root in ("harness", "integrations"):
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            label = str(path.relative_to(REPO_ROOT))
            if "tests" in path.parts or label in allowed:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and node.name == "accepts":
                    found.append(f"{label}:{node.lineno}")
    assert found == []
