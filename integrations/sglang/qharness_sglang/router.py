"""SGLang's torch MoE routers as routing paths (`harness.RouterMoEPathBase`), checked by
suites/test_moe_routing.py: ``grouped_topk_gpu`` (softmax or sigmoid scores, groups scored
by their best score) and ``biased_grouped_topk_impl`` (sigmoid scores plus a correction
bias, groups scored by their best two biased scores, the unbiased scores as weights), both
in ``sglang/srt/layers/moe/topk.py``; ``select_experts`` calls them for grouped routing
where no fused GPU kernel applies (``biased_grouped_topk_gpu`` falls back to
``biased_grouped_topk_impl``).

``topk.py`` cannot be imported on a CPU without SGLang's serving stack (it imports the
distributed, scheduler and kernel registries), so the two functions are compiled from the
installed file's source, unchanged but for their ``@torch.compile`` decorator (a compiler
hint: the eager function is what it compiles), with the names they use: ``torch``,
``Optional`` and ``_RENORMALIZE_SUM_EPSILON`` (read from the same file). Shared experts
are not routed here (``num_fused_shared_experts = 0``). The routed scaling factor is
SGLang's own: ``routed_scaling_factor`` with ``apply_routed_scaling_factor_on_output=True``
(the weights are multiplied by it after renormalizing). Both return their top-k unsorted
(``sorted=False``) and break ties by ``torch.topk``.
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Callable
from typing import Any, Optional

import torch

from harness import PlatformInfo, RouterMoEPathBase, Routing, RoutingSpec, Support
from qharness_sglang.loader import sglang_root

TOPK_FILE = os.path.join("srt", "layers", "moe", "topk.py")
FUNCTIONS = ("grouped_topk_gpu", "biased_grouped_topk_impl")
CONSTANTS = ("_RENORMALIZE_SUM_EPSILON",)


def _no_shared_experts(**kwargs: Any) -> Any:
    raise RuntimeError("shared experts are not routed by these paths")


@functools.cache
def sglang_torch_routers() -> dict[str, Callable[..., Any]]:
    """The functions `FUNCTIONS` as SGLang's installed ``topk.py`` defines them."""
    path = os.path.join(sglang_root(), TOPK_FILE)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in CONSTANTS for t in node.targets
        ):
            body.append(node)
        elif isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS:
            node.decorator_list = []  # @torch.compile(...): a compiler hint
            body.append(node)
    names = sorted(n.name for n in body if isinstance(n, ast.FunctionDef))
    if names != sorted(FUNCTIONS) or len(body) != len(FUNCTIONS) + len(CONSTANTS):
        raise ImportError(f"{path} no longer defines {FUNCTIONS} and {CONSTANTS}")
    namespace: dict[str, Any] = {
        "torch": torch,
        "Optional": Optional,
        "fused_shared_expert_weight": _no_shared_experts,
        "__name__": "sglang.srt.layers.moe.topk",
    }
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), namespace)
    return {name: namespace[name] for name in FUNCTIONS}


class SglangRouterBase(RouterMoEPathBase):
    """One of SGLang's torch routers (module docstring)."""

    ranks_slots = False  # sorted=False
    tie_break = "any"  # torch.topk: equal scores in no promised order

    def supports(self, scheme: Any, problem: Any, platform: PlatformInfo) -> Support:
        try:
            sglang_torch_routers()
        except (ImportError, OSError, SyntaxError) as exc:
            return Support.no(f"sglang's topk.py: {type(exc).__name__}: {exc}")
        return super().supports(scheme, problem, platform)

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        if not spec.grouped:
            return Support.no(f"{self.name}: grouped routing only (num_expert_group set)")
        return Support.yes()

    @staticmethod
    def routing(weights: torch.Tensor, ids: torch.Tensor, e: int) -> Routing:
        return Routing(ids.long(), weights.float(), e)


class SglangBiasedGroupedTopk(SglangRouterBase):
    """``biased_grouped_topk_impl``: sigmoid scores with a correction bias."""

    name = "sglang_biased_grouped_topk"

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        if spec.scoring != "sigmoid" or spec.correction_bias is None:
            return Support.no(f"{self.name}: sigmoid scores with a correction bias")
        return super().supports_routing(spec, platform)

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        e = int(logits.shape[1])
        fn = sglang_torch_routers()["biased_grouped_topk_impl"]
        weights, ids = fn(
            x,
            logits,
            spec.bias(e, logits.device),
            spec.top_k,
            spec.renormalize,
            num_expert_group=spec.n_group,
            topk_group=spec.topk_group,
            routed_scaling_factor=spec.routed_scaling_factor,
            apply_routed_scaling_factor_on_output=True,
        )
        return self.routing(weights, ids, e)


class SglangGroupedTopk(SglangRouterBase):
    """``grouped_topk_gpu``: softmax or sigmoid scores, no correction bias."""

    name = "sglang_grouped_topk"

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        if spec.correction_bias is not None:
            return Support.no(f"{self.name}: takes no correction bias")
        return super().supports_routing(spec, platform)

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        e = int(logits.shape[1])
        fn = sglang_torch_routers()["grouped_topk_gpu"]
        weights, ids = fn(
            x,
            logits,
            spec.top_k,
            spec.renormalize,
            num_expert_group=spec.n_group,
            topk_group=spec.topk_group,
            routed_scaling_factor=spec.routed_scaling_factor,
            apply_routed_scaling_factor_on_output=True,
            scoring_func=spec.scoring,
        )
        return self.routing(weights, ids, e)
