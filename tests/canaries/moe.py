"""MoE canaries (``qharness.moe_paths``) and a faulty dispatch table.

Control: `ControlMoEPath`, the built-in native MoE path (dispatch table and grouped kernels)
under another name. Each canary changes one thing: the routing it hands to the block, the
kernel's group bookkeeping, the activation's precision, or the dispatch table.
The router canaries route themselves (`route_and_forward`); their control,
`ControlRouterMoEPath`, routes with an independent float32 router, and each canary changes
one rule of it.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from harness.core.quantize import quantize
from harness.core.schemes import SCHEMES, Scheme, mx_spec
from harness.moe.dispatch import EMULATE, GROUPED_BF16, MOE_NATIVE_DISPATCH
from harness.moe.model import (
    MoELayer,
    MoETrace,
    Operand,
    QuantizedExperts,
    Routing,
    combine,
    gather_rows,
    quantize_operand,
    run_moe,
    silu_and_mul,
)
from harness.moe.paths.emulated import EmulatedMoEPath, per_expert_gemm
from harness.moe.paths.kernels import MOE_KERNELS, Bf16GroupedKernel, unsort
from harness.moe.paths.native import NativeMoEPath
from harness.moe.routing import RoutingSpec
from harness.ops.grouped import grouped_mm_bf16
from harness.paths.base import Support
from harness.platform.info import PlatformInfo
from tests.canaries.common import quantize_with
from tests.canaries.paths import prefix_amax


class ControlMoEPath(NativeMoEPath):
    """Correct: the built-in native MoE path under another name."""

    name = "control_moe"


class RoutingSlotOrder(ControlMoEPath):
    """MoE routing order: each token's experts are sorted by index for the kernel, but the
    routing weights stay in their original (descending-logit) slot order."""

    name = "canary_moe_routing_order"

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        ids = torch.sort(routing.ids, dim=1).values
        return super().forward(
            layer, x, Routing(ids, routing.weights, routing.num_experts), platform
        )


class AlwaysRenormalize(ControlMoEPath):
    """Renormalization: the path renormalizes the top-k weights whatever the router said."""

    name = "canary_moe_renormalize"

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        w = routing.weights / routing.weights.sum(dim=1, keepdim=True)
        return super().forward(layer, x, Routing(routing.ids, w, routing.num_experts), platform)


class UniqueCountsKernel(Bf16GroupedKernel):
    """Expert index: group sizes come from ``torch.unique(return_counts=True)``, which skips
    experts without tokens, so after an empty expert every group lands on the wrong one."""

    def gemm(self, a: Operand, row_experts: torch.Tensor, w: QuantizedExperts) -> torch.Tensor:
        order = torch.argsort(row_experts, stable=True)
        _, present = torch.unique(row_experts, return_counts=True)
        counts = torch.zeros(w.num_experts, dtype=torch.int64, device=row_experts.device)
        counts[: present.numel()] = present  # the one change: no bincount(minlength=E)
        a_sorted = a.values[order].to(torch.bfloat16)
        y = grouped_mm_bf16(a_sorted, w.dequantize().to(torch.bfloat16), counts)
        return unsort(y.float(), order)


class ExpertIndex(ControlMoEPath):
    """Expert index: the native path with `UniqueCountsKernel` as its bf16 grouped GEMM."""

    name = "canary_moe_expert_index"

    def __init__(self) -> None:
        super().__init__(kernels={**MOE_KERNELS, GROUPED_BF16: UniqueCountsKernel()})


def run_moe_silu_bf16(layer: MoELayer, x: torch.Tensor, routing: Routing, gemm: object) -> MoETrace:
    """`harness.moe.model.run_moe` with SiLU-and-mul evaluated in bf16 (the one change)."""
    spec = layer.scheme.activation
    experts = routing.row_experts()
    a1 = gather_rows(quantize_operand(x, spec, layer.a1_scale), routing.row_tokens())
    gate_up = gemm(a1, experts, layer.w13)  # type: ignore[operator]
    g, u = gate_up.to(torch.bfloat16).chunk(2, dim=-1)
    act = (torch.nn.functional.silu(g) * u).float()
    a2 = quantize_operand(act, spec, layer.a2_scale)
    y = gemm(a2, experts, layer.w2)  # type: ignore[operator]
    return MoETrace(
        out=combine(y, routing), act=act, act_q=a2.quantized, gate_up=gate_up.float(), y=y.float()
    )


class SiluInBf16(ControlMoEPath):
    """Activation precision: SiLU-and-mul runs in bf16 instead of float32."""

    name = "canary_moe_silu_bf16"

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        kernel, reason = self.kernel_for(layer.scheme, platform)
        if kernel is None:
            raise ValueError(reason)
        return run_moe_silu_bf16(layer, x, routing, kernel.gemm)


def run_moe_prefix_amax(
    layer: MoELayer, x: torch.Tensor, routing: Routing, gemm: object
) -> MoETrace:
    """`harness.moe.model.run_moe` with the block input's dynamic per-token (or per-tensor)
    amax taken over its first 1024 columns (`prefix_amax`; the one change)."""
    spec = layer.scheme.activation
    experts = routing.row_experts()
    if spec is None or not spec.dynamic:
        x_op = quantize_operand(x, spec, layer.a1_scale)
    else:
        q = quantize_with(x, spec, amax_fn=prefix_amax)
        x_op = Operand(q.dequantize(), q)
    a1 = gather_rows(x_op, routing.row_tokens())
    gate_up = gemm(a1, experts, layer.w13)  # type: ignore[operator]
    act = silu_and_mul(gate_up)
    a2 = quantize_operand(act, spec, layer.a2_scale)
    y = gemm(a2, experts, layer.w2)  # type: ignore[operator]
    return MoETrace(
        out=combine(y, routing), act=act, act_q=a2.quantized, gate_up=gate_up.float(), y=y.float()
    )


class MoEPrefixAmax(ControlMoEPath):
    """A reduction over part of a long row: the MoE block input's dynamic per-token amax
    is taken over its first 1024 hidden columns (one K tile of the kernel)."""

    name = "canary_moe_prefix_amax"

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        kernel, reason = self.kernel_for(layer.scheme, platform)
        if kernel is None:
            raise ValueError(reason)
        return run_moe_prefix_amax(layer, x, routing, kernel.gemm)


# ------------------------------------------------------------- dispatch table canary
MXFP4_GROUPED = "grouped_mm.mxfp4"


class Mxfp4GroupedKernel(Bf16GroupedKernel):
    """A pure-MXFP4 grouped kernel: it quantizes activations to MXFP4 itself, so its
    contract is MXFP4 weights with MXFP4 activations."""

    name = MXFP4_GROUPED

    def accepts(self, scheme: Scheme) -> Support:
        act = scheme.activation
        if scheme.weight.format != "e2m1" or act is None or act.format != "e2m1":
            return Support.no("the MXFP4 kernel runs MXFP4 weights x MXFP4 activations only")
        return Support.yes()

    def gemm(self, a: Operand, row_experts: torch.Tensor, w: QuantizedExperts) -> torch.Tensor:
        spec = mx_spec("e2m1", w.spec.scale_rounding, dynamic=True)
        as_mxfp4 = Operand(quantize(a.values, spec).dequantize(), None)
        return super().gemm(as_mxfp4, row_experts, w)


def _prefix_table() -> dict[str, dict[str, frozenset[str]]]:
    """The cpu row rebuilt with a name-prefix test: ``startswith("w_mxfp4")`` -> MXFP4."""
    cpu = MOE_NATIVE_DISPATCH["cpu"]
    everything = frozenset().union(*cpu.values())
    mxfp4 = frozenset(n for n in everything if n.startswith("w_mxfp4"))
    return {"cpu": {MXFP4_GROUPED: mxfp4, GROUPED_BF16: everything - mxfp4, EMULATE: frozenset()}}


class Mxfp4PrefixTable(ControlMoEPath):
    """Seed bug, prefix dispatch of mixed MX schemes, in an MoE dispatch table."""

    name = "canary_moe_mxfp4_prefix"

    def __init__(self) -> None:
        super().__init__(
            table=_prefix_table(), kernels={**MOE_KERNELS, MXFP4_GROUPED: Mxfp4GroupedKernel()}
        )


assert all(n in SCHEMES for n in _prefix_table()["cpu"][MXFP4_GROUPED])


# ------------------------------------------------------------- self-routing canaries
def _descending(values: torch.Tensor, tie_to_higher: bool = False) -> torch.Tensor:
    """Stable descending order (ties to the lower index; reversed: to the higher)."""
    if not tie_to_higher:
        return torch.sort(values, dim=1, descending=True, stable=True).indices
    e = values.shape[1]
    return e - 1 - torch.sort(values.flip(1), dim=1, descending=True, stable=True).indices


def float32_router(
    logits: torch.Tensor,
    spec: RoutingSpec,
    *,
    tie_to_higher: bool = False,
    rank_dtype: torch.dtype | None = None,
    bias_in_weights: bool = False,
    masked: float = float("-inf"),
) -> Routing:
    """A router as engines write one (vLLM's ``grouped_topk``): scores in float32, the
    correction bias added to choose, groups scored by their best two biased scores (their
    best score without a bias), other groups masked with -inf, a stable descending sort
    (ties to the lower index), the chosen unbiased scores optionally renormalized and
    scaled in float32. Each keyword is one canary's change: ``tie_to_higher`` sorts the
    experts reversed; ``rank_dtype`` ranks a copy of the scores rounded to that dtype;
    ``bias_in_weights`` weights by the biased scores; ``masked`` is the masked groups' fill."""
    x = logits.float()
    scores = torch.softmax(x, dim=-1) if spec.scoring == "softmax" else torch.sigmoid(x)
    t, e = scores.shape
    ranked = scores if rank_dtype is None else scores.to(rank_dtype).float()
    bias = spec.bias(e, scores.device)
    keys = ranked if bias is None else ranked + bias
    if spec.n_group > 1:
        grouped = keys.view(t, spec.n_group, -1)
        if bias is not None:
            group = grouped.topk(2, dim=-1).values.sum(dim=-1)
        else:
            group = grouped.max(dim=-1).values
        chosen = _descending(group)[:, : spec.topk_group]
        mask = torch.zeros_like(group, dtype=torch.bool).scatter_(1, chosen, True)
        keys = keys.masked_fill(~mask.repeat_interleave(e // spec.n_group, dim=1), masked)
    ids = _descending(keys, tie_to_higher)[:, : spec.top_k].contiguous()
    source = scores if bias is None or not bias_in_weights else scores + bias
    weights = source.gather(1, ids)
    if spec.renormalize:
        weights = weights / weights.sum(dim=1, keepdim=True)
    return Routing(ids, weights * spec.routed_scaling_factor, e)


class ControlRouterMoEPath(ControlMoEPath):
    """Correct: the native MoE path that routes itself with `float32_router`, an
    implementation independent of the reference's float64 one."""

    name = "control_moe_router"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        return float32_router(logits, spec)

    def route_and_forward(
        self,
        layer: MoELayer,
        x: torch.Tensor,
        logits: torch.Tensor,
        spec: RoutingSpec,
        platform: PlatformInfo,
    ) -> MoETrace:
        routing = self.router(logits, spec)
        return replace(self.forward(layer, x, routing, platform), routing=routing)


class RouterTiesToHigher(ControlRouterMoEPath):
    """Tie-break: equal scores go to the higher expert index."""

    name = "canary_moe_router_ties_high"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        return float32_router(logits, spec, tie_to_higher=True)


class RouterSoftmaxAfterTopk(ControlRouterMoEPath):
    """Softmax after top-k: the top k logits are chosen, then softmax over those k only."""

    name = "canary_moe_router_softmax_after_topk"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        if spec.scoring != "softmax":
            return float32_router(logits, spec)
        ids = torch.sort(logits.float(), dim=1, descending=True, stable=True).indices
        ids = ids[:, : spec.top_k].contiguous()
        weights = torch.softmax(logits.float().gather(1, ids), dim=-1)
        return Routing(ids, weights, int(logits.shape[1]))


class RouterRenormalizeIgnored(ControlRouterMoEPath):
    """Renormalization: the renormalize flag is ignored (the weights are never divided)."""

    name = "canary_moe_router_renorm_ignored"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        return float32_router(logits, replace(spec, renormalize=False))


class RouterRenormalizeAlways(ControlRouterMoEPath):
    """Renormalization: the weights are renormalized whatever the flag says."""

    name = "canary_moe_router_renorm_always"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        return float32_router(logits, replace(spec, renormalize=True))


class RouterSigmoidAsSoftmax(ControlRouterMoEPath):
    """Scoring function: sigmoid routing is scored with softmax."""

    name = "canary_moe_router_sigmoid_as_softmax"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        return float32_router(logits, replace(spec, scoring="softmax"))


class RouterRanksBf16Scores(ControlRouterMoEPath):
    """Rounded ranking: experts and groups are ranked on a bf16 copy of the scores (the
    weights still come from the float32 scores), as a router fed bf16 scores does."""

    name = "canary_moe_router_bf16_ranking"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        return float32_router(logits, spec, rank_dtype=torch.bfloat16)


class RouterBiasInWeights(ControlRouterMoEPath):
    """Correction bias in the weights: the chosen experts are weighted by their biased
    scores (the bias should only choose them)."""

    name = "canary_moe_router_bias_in_weights"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        return float32_router(logits, spec, bias_in_weights=True)


class RouterMasksWithZero(ControlRouterMoEPath):
    """Group mask: experts of the groups not chosen are filled with 0 instead of -inf, so
    with a correction bias they outrank chosen experts whose biased scores are negative."""

    name = "canary_moe_router_mask_zero"

    def router(self, logits: torch.Tensor, spec: RoutingSpec) -> Routing:
        return float32_router(logits, spec, masked=0.0)


# ------------------------------------------------------------- expert-bias canaries
class ControlBiasMoEPath(EmulatedMoEPath):
    """Correct: the emulated MoE path (which adds expert biases once, to the float32
    product of the dequantized operands) under another name, compared like any path."""

    name = "control_moe_bias"
    is_reference = False


class BiasTwice(ControlBiasMoEPath):
    """Expert bias applied twice: each GEMM's bias is added by the kernel and again by its
    caller (the layer's biases doubled)."""

    name = "canary_moe_bias_twice"

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        def twice(b: torch.Tensor | None) -> torch.Tensor | None:
            return None if b is None else 2 * b

        return super().forward(
            replace(layer, b13=twice(layer.b13), b2=twice(layer.b2)), x, routing, platform
        )


def _row_scales(a: Operand, w: QuantizedExperts, experts: torch.Tensor) -> torch.Tensor:
    """[M, N] the product of each output's activation and weight scales (per-tensor or
    per-row activation scales, per-tensor or per-channel weight scales)."""
    m, n = int(a.values.shape[0]), int(w.codes.shape[1])
    sa = torch.ones(m) if a.quantized is None else a.quantized.scale.float().reshape(-1)
    sa = sa.expand(m) if sa.numel() == 1 else sa
    sw = w.scale.float()[experts].reshape(m, -1)
    sw = sw.expand(m, n) if sw.shape[1] == 1 else sw
    return sa[:, None] * sw


class BiasBeforeDequant(ControlBiasMoEPath):
    """Expert bias before dequantization: added to the accumulator of codes, so the
    activation and weight scales multiply it too (per-tensor and per-channel scales)."""

    name = "canary_moe_bias_before_dequant"

    def forward(
        self, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
    ) -> MoETrace:
        biases = {id(layer.w13): layer.b13, id(layer.w2): layer.b2}

        def gemm(a: Operand, experts: torch.Tensor, w: QuantizedExperts) -> torch.Tensor:
            y = per_expert_gemm(a, experts, w)
            b = biases[id(w)]
            return y if b is None else y + b[experts] * _row_scales(a, w, experts)

        return run_moe(replace(layer, b13=None, b2=None), x, routing, gemm)
