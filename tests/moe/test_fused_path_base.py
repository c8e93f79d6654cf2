"""`FusedMoEPathBase`: a fused kernel path supplies only its calls; the table, refusals and
the block around its GEMMs are the harness's (`run_fused_moe`), held here against the
emulated path with a stand-in kernel that multiplies exactly as `per_expert_gemm` does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
import torch
from moe_helpers import small_moe

from harness import (
    MOE_SCHEMES,
    WHOLE,
    FusedMoEPathBase,
    Kernel,
    OperandContract,
    QuantizedExperts,
    QuantizedTensor,
    Routing,
    Support,
    rest_emulated,
)
from harness.moe.model import Operand, route, run_moe
from harness.moe.paths.base import MoEProblem
from harness.moe.paths.emulated import per_expert_gemm
from harness.platform.info import PlatformInfo

CPU = PlatformInfo("cpu", "x86_64", "test cpu", torch.__version__, None, None)

PER_TENSOR = Kernel(
    "stand_in.per_tensor",
    OperandContract(
        frozenset({"e4m3fn"}), "fp32", frozenset({(WHOLE, WHOLE)}), frozenset({(WHOLE, WHOLE)})
    ),
)


class StandInFusedPath(FusedMoEPathBase):
    """Gathers row pair // top_k itself, then the harness's exact grouped GEMM."""

    name = "stand_in_fused"
    modes: ClassVar[Mapping[str, Kernel]] = {PER_TENSOR.name: PER_TENSOR}

    def make_table(self) -> Mapping[str, Any]:
        return {"*": rest_emulated({PER_TENSOR.name: frozenset({"fp8_per_tensor"})}, MOE_SCHEMES)}

    def prepare(self, layer: Any, routing: Routing, mode: Kernel, platform: Any) -> Any:
        return routing.row_experts()

    def gemm(
        self,
        prepared: Any,
        mode: Kernel,
        q: QuantizedTensor | None,
        w: QuantizedExperts,
        routing: Routing,
        top_k: int,
        platform: Any,
    ) -> torch.Tensor:
        assert q is not None
        rows = torch.arange(routing.ids.numel()) // top_k
        gathered = Operand(q.dequantize(torch.float32)[rows], None)
        return per_expert_gemm(gathered, prepared, w).float()


def _block(scheme: str, tokens: int = 9, top_k: int = 2) -> tuple[Any, ...]:
    layer, x, logits = small_moe(MOE_SCHEMES[scheme], tokens=tokens, top_k=top_k)
    return layer, x, route(logits, top_k, renormalize=False)


def test_the_fused_form_gives_the_reference_pipelines_bits() -> None:
    """Gathering rows in the kernel or before it is the same block: bit for bit."""
    layer, x, routing = _block("fp8_per_tensor")
    path = StandInFusedPath()
    platform = CPU
    fused = path.forward(layer, x, routing, platform)
    plain = run_moe(layer, x, routing, per_expert_gemm)
    for name in ("out", "act", "gate_up", "y"):
        assert torch.equal(getattr(fused, name).float(), getattr(plain, name).float()), name


def test_the_table_runs_its_modes_and_emulates_the_rest_with_a_reason() -> None:
    path = StandInFusedPath()
    platform = CPU
    problem = MoEProblem(9, 4, 2, 64, 32)
    assert path.supports(MOE_SCHEMES["fp8_per_tensor"], problem, platform).ok
    other = path.supports(MOE_SCHEMES["fp8_per_block"], problem, platform)
    key = path.dispatch_key(platform)
    reason = f"stand_in_fused: stand_in_fused dispatch table: fp8_per_block is emulated on {key}"
    assert other == Support.no(reason)
    row = path.table["*"]
    assert set().union(*row.values()) == set(MOE_SCHEMES)  # every scheme has a decision
    layer, x, routing = _block("fp8_per_block")
    with pytest.raises(ValueError, match="cannot run fp8_per_block"):
        path.forward(layer, x, routing, platform)


def test_a_missing_row_names_the_adapters_module() -> None:
    class NoRowHere(StandInFusedPath):
        def make_table(self) -> Mapping[str, Any]:
            return {"gfx950": rest_emulated({PER_TENSOR.name: frozenset()}, MOE_SCHEMES)}

    mode, reason = NoRowHere().mode(MOE_SCHEMES["fp8_per_tensor"], CPU)
    assert mode is None
    assert __name__ in reason
