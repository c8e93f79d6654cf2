"""vLLM's own MoE routers as routing paths (`harness.RouterMoEPathBase`): the engine's
routing in front of the emulated block, checked by suites/test_moe_routing.py.

* ``vllm_grouped_topk``: ``fused_moe.router.grouped_topk_router.grouped_topk``, the
  DeepSeek-V2/V3 router ``GroupedTopKRouter`` runs (torch-compiled, as vLLM ships it;
  the CUDA fused kernel it prefers with a correction bias is not in the CPU build). Every
  spec: one group is plain top-k. Its top-k is unsorted (``sorted=False`` unless
  ``VLLM_BATCH_INVARIANT``): slot order is not checked.
* ``vllm_cpu_router``: the router vLLM's factory builds on a CPU
  (``create_fused_moe_router`` -> ``CPURouter``), configured as a model's config would:
  ``use_grouped_topk`` for a grouped spec (DeepSeek-style configs), the correction bias
  passed as given (ungrouped with a bias: ERNIE-4.5-MoE with softmax, MiniMax-M2 and
  Laguna with sigmoid), Llama-4's ``custom_routing_function`` for sigmoid top-1, plain
  softmax top-k otherwise. Ungrouped routing with a bias is a finding
  (findings/vllm_cpu_router_correction_bias.py): the bias is dropped (softmax) or the
  router asserts (sigmoid).
* ``vllm_fused_topk``: ``fused_topk``, the default ``FusedTopKRouter`` (vLLM's compiled
  ``_moe_C.topk_softmax`` / ``topk_sigmoid``): absent from the CPU build, so it skips
  there with that reason and runs on a GPU.
"""

from __future__ import annotations

import re
from typing import ClassVar

import torch

from harness import (
    FindingCase,
    KnownFinding,
    PlatformInfo,
    RouterMoEPathBase,
    Routing,
    RoutingSpec,
    Support,
)


def _routing(weights: torch.Tensor, ids: torch.Tensor, experts: int) -> Routing:
    return Routing(ids.long(), weights.float(), experts)


class VllmGroupedTopkRouter(RouterMoEPathBase):
    """vLLM's ``grouped_topk`` (module docstring)."""

    name = "vllm_grouped_topk"
    ranks_slots = False
    tie_break = "any"  # torch.topk: equal scores in no promised order (higher first on CPU)

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        from vllm.model_executor.layers.fused_moe.router.grouped_topk_router import (
            grouped_topk,
        )

        e = int(logits.shape[1])
        weights, ids = grouped_topk(
            x,
            logits,
            spec.top_k,
            spec.renormalize,
            spec.n_group,
            spec.topk_group,
            spec.scoring,
            spec.routed_scaling_factor,
            spec.bias(e, logits.device),
        )
        return _routing(weights, ids, e)


def _llama4_routing_function() -> object:
    from vllm.model_executor.models.llama4 import Llama4MoE

    return Llama4MoE.custom_routing_function


def _ungrouped_bias(case: FindingCase) -> bool:
    """A routing case with a correction bias and no groups (its named case is
    ``e<E>k<k>-<spec id>[-<design>]``, the spec id as `RoutingSpec.id` spells it)."""
    parts = case.case.split("-")
    return "bias" in parts and not any(re.fullmatch(r"g\d+k\d+", p) for p in parts)


_CPU_ROUTER_BIAS = (
    "vLLM 0.32 (CPU build): CPURouter drops the score-correction bias of ungrouped routing "
    "(softmax, as ERNIE-4.5-MoE configures it: plain softmax top-k, bias and scaling ignored) "
    "or asserts on it (sigmoid, as MiniMax-M2 and Laguna configure it); GPU builds route it "
    "with FusedTopKBiasRouter (integrations/vllm/findings/vllm_cpu_router_correction_bias.py)"
)


class VllmCpuRouter(RouterMoEPathBase):
    """The router vLLM builds on a CPU (``CPURouter``), configured as a model would."""

    name = "vllm_cpu_router"
    ranks_slots = False  # its top-k calls pass sorted=False
    tie_break = "any"  # torch.topk: equal scores in no promised order
    known_findings = (
        KnownFinding(_CPU_ROUTER_BIAS, suites=frozenset({"moe_routing"}), when=_ungrouped_bias),
    )

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        plain = not spec.grouped and spec.correction_bias is None
        if plain and spec.scoring == "sigmoid" and spec.top_k != 1:
            return Support.no(
                "vLLM's CPURouter has no plain sigmoid top-k (a model with one passes its "
                "own custom_routing_function; Llama-4's is top-1)"
            )
        if plain and spec.routed_scaling_factor != 1.0:
            return Support.no("no vLLM model config scales plain top-k routing")
        return Support.yes()

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        from vllm.model_executor.layers.fused_moe.router.router_factory import (
            create_fused_moe_router,
        )

        e = int(logits.shape[1])
        grouped = spec.grouped
        llama4 = not grouped and spec.scoring == "sigmoid" and spec.correction_bias is None
        router = create_fused_moe_router(
            top_k=spec.top_k,
            global_num_experts=e,
            renormalize=spec.renormalize,
            use_grouped_topk=grouped,
            num_expert_group=spec.n_group if grouped else None,
            topk_group=spec.topk_group if grouped else None,
            scoring_func=spec.scoring,
            routed_scaling_factor=spec.routed_scaling_factor,
            e_score_correction_bias=spec.bias(e, logits.device),
            custom_routing_function=_llama4_routing_function() if llama4 else None,
        )
        weights, ids = router._compute_routing(x, logits, None)
        return _routing(weights, ids, e)


class VllmFusedTopkRouter(RouterMoEPathBase):
    """vLLM's ``fused_topk`` (the compiled ``topk_softmax``/``topk_sigmoid`` ops)."""

    name = "vllm_fused_topk"
    ranks_slots = False
    tie_break = "any"  # the compiled top-k promises no order among equal scores
    OPS: ClassVar[dict[str, str]] = {"softmax": "topk_softmax", "sigmoid": "topk_sigmoid"}

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        if spec.grouped or spec.correction_bias is not None or spec.routed_scaling_factor != 1:
            return Support.no("fused_topk is plain top-k: no groups, bias or scaling")
        import vllm._custom_ops  # noqa: F401  (registers the compiled ops it has)

        op = self.OPS[spec.scoring]
        if not hasattr(torch.ops._moe_C, op):
            return Support.no(f"this vLLM build has no compiled _moe_C.{op} (GPU builds do)")
        return Support.yes()

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        from vllm.model_executor.layers.fused_moe.router.fused_topk_router import fused_topk

        weights, ids, _ = fused_topk(
            x, logits, spec.top_k, spec.renormalize, scoring_func=spec.scoring
        )
        return _routing(weights, ids, int(logits.shape[1]))
