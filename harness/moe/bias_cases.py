"""MoE blocks with a per-expert bias on both GEMMs, for every MoE scheme and path.

Engines' fused-MoE kernels take expert biases (vLLM's ``fused_moe_kernel``: ``B_bias``,
added to the float32 accumulator after dequantization, before the output rounding; models
such as gpt-oss have them). The bias must enter once, after dequantization: added twice,
or to the accumulator before the scales multiply it, the block's outputs move by about the
bias itself. The layer and x are the golden ``moe/<scheme>``'s (8 experts, top-2, 7 tokens,
not renormalized); the biases are seeded bf16 values of about the GEMM outputs' size
(``b13`` ~ N(0, 2^2) [E, 2I], ``b2`` ~ N(0, 4^2) [E, H]); the expected block is the float64
reference with the biases (`harness.moe.model.reference_moe`), at test time, no golden.
Ids ``<scheme>-<path>-t7-e8k2-expert_bias``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from harness.core.inputs import generator
from harness.moe.cases import (
    MOE_HIDDEN,
    MOE_INTERMEDIATE,
    LoadedMoECase,
    MoECase,
    load_moe_case,
)
from harness.moe.dispatch import MOE_SCHEMES
from harness.moe.model import reference_moe
from harness.moe.paths import MoEProblem, moe_paths
from harness.paths.case import Case
from harness.store.golden_registry import GoldenData

BIAS_TOKENS = 7
BIAS_EXPERTS, BIAS_TOP_K = 8, 2
GATE_UP_BIAS_STD = 2.0  # about a quarter of the gate/up outputs' peak (GATE_UP_MAGNITUDE 8)
DOWN_BIAS_STD = 4.0  # likewise of the expert outputs' peak (OUTPUT_MAGNITUDE 16)


@dataclass(frozen=True)
class ExpertBiasCase(Case):
    """One biased block: a scheme's golden layer with seeded expert biases, a path."""

    SUITE = "moe"
    ID = ("scheme", "path", "tokens_id", "config", "bias_id")
    RECORD = (*MoECase.RECORD, "expert_bias")
    GOLDEN = MoECase.GOLDEN
    bias_id = "expert_bias"
    expert_bias = True
    renormalize = False

    scheme: str
    path: str
    tokens: int = BIAS_TOKENS
    experts: int = BIAS_EXPERTS
    top_k: int = BIAS_TOP_K

    @property
    def block(self) -> MoECase:
        return MoECase(self.scheme, self.path, self.tokens, self.experts, self.top_k, False)

    @property
    def tokens_id(self) -> str:
        return self.block.tokens_id

    @property
    def config(self) -> str:
        return self.block.config

    @property
    def shape_label(self) -> str:
        return self.block.shape_label

    @property
    def problem(self) -> MoEProblem:
        return replace(self.block.problem, bias=True)


def expert_bias_cases() -> Iterator[ExpertBiasCase]:
    for scheme in sorted(MOE_SCHEMES):
        for path in moe_paths():
            yield ExpertBiasCase(scheme, path)


@functools.cache
def _expert_biases() -> tuple[torch.Tensor, torch.Tensor]:
    gen = generator("moe/expert_bias")
    b13 = GATE_UP_BIAS_STD * torch.randn(BIAS_EXPERTS, 2 * MOE_INTERMEDIATE, generator=gen)
    b2 = DOWN_BIAS_STD * torch.randn(BIAS_EXPERTS, MOE_HIDDEN, generator=gen)
    return b13.to(torch.bfloat16).float(), b2.to(torch.bfloat16).float()


def expert_biases() -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded bf16-valued biases (b13 [E, 2I], b2 [E, H]) of the module docstring."""
    b13, b2 = _expert_biases()
    return b13.clone(), b2.clone()


def biased_case(data: GoldenData, case: ExpertBiasCase) -> LoadedMoECase:
    """The golden case with the expert biases in its layer, and the float64 reference of
    that biased block (intermediate rounded once to float32, its codes, the output)."""
    loaded = load_moe_case(data, case.block)
    b13, b2 = expert_biases()
    layer = replace(loaded.layer, b13=b13, b2=b2)
    ref = reference_moe(layer, loaded.x, loaded.routing)
    return replace(
        loaded, layer=layer, act_ref=ref.act.float(), act_q=ref.act_q, out_ref=ref.out.float()
    )
