"""The MoE dispatch table: explicit decisions, checked against the registry and contracts."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from moe_helpers import FP8_PER_BLOCK, FP8_PER_CHANNEL, W_MXFP4, W_MXFP4_A_MXFP6, small_moe

from harness.core.schemes import SCHEMES, Scheme
from harness.moe.dispatch import (
    EMULATE,
    MOE_ALL_INTENDED,
    MOE_NATIVE_DISPATCH,
    MOE_SCHEMES,
    decision,
    dispatch_problems,
)
from harness.moe.model import Operand, QuantizedExperts, route
from harness.moe.paths import MoEProblem, get_moe_path
from harness.moe.paths.emulated import per_expert_gemm
from harness.moe.paths.kernels import MOE_KERNELS, Fp8RowwiseGroupedKernel
from harness.moe.paths.native import NativeMoEPath
from harness.paths.base import EXACT_FP32, Numerics, Support
from harness.platform.info import PlatformInfo

CPU = PlatformInfo("cpu", "x86_64", "test cpu", torch.__version__, None, None)
PROBLEM = MoEProblem(tokens=9, experts=4, top_k=2, hidden=64, intermediate=32)
MX_PAIR = {s.name: s for s in (W_MXFP4, W_MXFP4_A_MXFP6)}  # a two-scheme registry


class PureMXFP4Kernel:
    """A fake kernel that, like a real one did, runs pure w_mxfp4 only (no activation
    quantization). It records what it was sent and fails loudly on anything else."""

    name = "fake.pure_mxfp4"

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def accepts(self, scheme: Scheme) -> Support:
        w = scheme.weight
        if w.format != "e2m1" or w.block != (1, 32):
            return Support.no("weights must be e2m1 in 1x32 blocks")
        if scheme.activation is not None:
            return Support.no("activations must stay unquantized (pure w_mxfp4 only)")
        return Support.yes()

    def capability(self, scheme: Scheme) -> str:
        return "fake"

    def fits(self, problem: MoEProblem, platform: PlatformInfo) -> Support:
        return Support.yes()

    def numerics(self, scheme: Scheme) -> Numerics:
        return EXACT_FP32

    def gemm(self, a: Operand, row_experts: torch.Tensor, w: QuantizedExperts) -> torch.Tensor:
        self.calls.append((w.spec.format, a.quantized is not None))
        if a.quantized is not None:
            raise AssertionError("pure w_mxfp4 kernel was sent quantized activations")
        return per_expert_gemm(a, row_experts, w)


def _explicit_table(kernel: str) -> dict[str, dict[str, frozenset[str]]]:
    return {
        "cpu": {
            kernel: frozenset({"w_mxfp4"}),
            EMULATE: frozenset({"w_mxfp4_a_mxfp6_e3m2"}),
        }
    }


def _prefix_table(kernel: str) -> dict[str, dict[str, frozenset[str]]]:
    """What a name-prefix dispatcher decides: the real bug, rebuilt as a table."""
    prefixed = frozenset(n for n in MX_PAIR if n.startswith("w_mxfp4"))
    return {"cpu": {kernel: prefixed, EMULATE: frozenset(MX_PAIR) - prefixed}}


def test_explicit_table_passes_and_never_sends_mixed_scheme_to_pure_kernel() -> None:
    fake = PureMXFP4Kernel()
    kernels = {fake.name: fake}
    table = _explicit_table(fake.name)
    assert dispatch_problems(MX_PAIR, kernels, table) == []
    native = NativeMoEPath(table, kernels, probe=False)

    mixed = native.supports(W_MXFP4_A_MXFP6, PROBLEM, CPU)
    assert not mixed.ok
    assert "emulated on cpu" in mixed.reason
    layer, x, logits = small_moe(W_MXFP4_A_MXFP6)
    with pytest.raises(ValueError, match="cannot run w_mxfp4_a_mxfp6_e3m2"):
        native.forward(layer, x, route(logits, 2, True), CPU)
    assert fake.calls == []

    assert native.supports(W_MXFP4, PROBLEM, CPU).ok
    layer, x, logits = small_moe(W_MXFP4)
    routing = route(logits, 2, True)
    out = native.forward(layer, x, routing, CPU).out
    assert fake.calls == [("e2m1", False), ("e2m1", False)]  # two GEMMs, pure w_mxfp4
    emulated = get_moe_path("emulated").forward(layer, x, routing, CPU).out
    assert torch.equal(out, emulated)  # the fake kernel computes exactly what emulation does


def test_prefix_dispatcher_fails_the_table_check() -> None:
    fake = PureMXFP4Kernel()
    problems = dispatch_problems(MX_PAIR, {fake.name: fake}, _prefix_table(fake.name))
    assert problems == [
        "row 'cpu' sends 'w_mxfp4_a_mxfp6_e3m2' to 'fake.pure_mxfp4', which cannot run it: "
        "activations must stay unquantized (pure w_mxfp4 only)"
    ]
    # And even if such a table were used, the path refuses rather than call the kernel.
    native = NativeMoEPath(_prefix_table(fake.name), {fake.name: fake}, probe=False)
    support = native.supports(W_MXFP4_A_MXFP6, PROBLEM, CPU)
    assert not support.ok
    assert "dispatch table error" in support.reason
    assert fake.calls == []


def test_table_check_reports_each_kind_of_error() -> None:
    fake = PureMXFP4Kernel()
    kernels = {fake.name: fake}
    schemes = dict(MX_PAIR)
    bad = {
        "cpu": {
            fake.name: frozenset({"w_mxfp4", "w_mxfp4_typo"}),
            EMULATE: frozenset({"w_mxfp4"}),
            "no.such.kernel": frozenset(),
        }
    }
    problems = dispatch_problems(schemes, kernels, bad)
    text = "\n".join(problems)
    assert "'no.such.kernel' is neither 'emulate' nor a known kernel" in text
    assert "'w_mxfp4_typo' is not a registered scheme" in text
    assert "scheme 'w_mxfp4' has two decisions" in text
    assert "registered scheme 'w_mxfp4_a_mxfp6_e3m2' has no decision" in text
    assert len(problems) == 4


def test_every_row_decides_the_full_intended_list() -> None:
    for key, row in MOE_NATIVE_DISPATCH.items():
        named = [n for names in row.values() for n in names]
        assert sorted(named) == sorted(MOE_ALL_INTENDED), key  # each exactly once
        assert decision(key, "fp8_per_tensor") in row


def test_the_table_decides_exactly_the_registered_schemes() -> None:
    """Every registered scheme with one-level scales; two-level ones (NVFP4) are left out
    of MoE by `MOE_SCHEMES`, and only those."""
    assert set(MOE_SCHEMES) == MOE_ALL_INTENDED
    left_out = {n for n, s in SCHEMES.items() if s.weight.scale_fmt.per_tensor_level}
    assert set(SCHEMES) - set(MOE_SCHEMES) == left_out == {"w_nvfp4", "w_nvfp4_a_nvfp4"}


def test_rowwise_kernel_contract_reads_quantspec_fields() -> None:
    """Contracts are read from QuantSpec fields, so a renamed twin would face the same."""
    rowwise = Fp8RowwiseGroupedKernel()
    assert rowwise.accepts(SCHEMES["fp8_per_tensor"]) == Support.yes()
    assert rowwise.accepts(FP8_PER_CHANNEL) == Support.yes()
    block = rowwise.accepts(FP8_PER_BLOCK)
    assert not block.ok
    assert "block_128x128" in block.reason
    mx = rowwise.accepts(W_MXFP4)
    assert not mx.ok
    assert "e2m1" in mx.reason
    fnuz_act = dataclasses.replace(
        FP8_PER_CHANNEL,
        activation=dataclasses.replace(FP8_PER_CHANNEL.weight, format="e4m3fnuz"),
    )
    assert rowwise.accepts(fnuz_act) == Support.no(
        "weight and activation element formats differ (e4m3fn x e4m3fnuz); the kernel takes "
        "one format on both operands"
    )
    assert set(MOE_KERNELS) == {"grouped_mm.bf16", "scaled_grouped_mm.rowwise"}


def test_platform_without_a_row_is_not_dispatched() -> None:
    odd = PlatformInfo("cuda", "sm_12", "made-up", torch.__version__, "12", None)
    support = NativeMoEPath().supports(SCHEMES["fp8_per_tensor"], PROBLEM, odd)
    assert not support.ok
    assert "no MoE dispatch row for platform 'sm_12'" in support.reason


def test_platform_command_prints_the_dispatch_table(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main
    from harness.moe.dispatch import platform_key
    from harness.platform.info import detect

    assert main(["platform", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["moe_dispatch"]
    key = platform_key(detect())
    assert report["platform_key"] == key
    assert set(report["schemes"]) == set(MOE_SCHEMES)
    for name, row in report["schemes"].items():
        assert row["decision"] == decision(key, name)
    assert report["problems"] == []
    assert report["table"][key]  # the platform's own row is printed
    assert main(["platform"]) == 0
    text = capsys.readouterr().out
    assert f"MoE native dispatch (table row {key!r}" in text
    assert "TABLE PROBLEM" not in text
