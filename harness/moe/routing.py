"""Routing as data: `RoutingSpec`, the reference router and the float32 router's tolerance.

Real fused-MoE kernels route themselves: they take router logits, score them (softmax or
sigmoid), pick the top k, optionally renormalize, and only then run the experts. A path
that does so (`harness.moe.paths.base.SelfRoutingMoEPath`) is handed the logits and a
`RoutingSpec` and returns the routing it chose with its trace; the suite compares that
routing with `reference_route` (docs/MOE.md, "Routing a path does itself")::

    scores  = scoring(logits)                       softmax over experts, or sigmoid per expert
    keys    = scores + correction_bias              (the bias only chooses; absent: scores)
    groups  = the topk_group best of n_group equal groups of experts by their keys' best
              two summed (with a correction bias, DeepSeek-V3) or their best (without,
              DeepSeek-V2); equal group scores: lower group index first
    ids     = top-k of the keys within the chosen groups, in descending key; equal keys:
              lower index first
    weights = scores[ids]                           ( / sum(scores[ids]) when renormalize )
              * routed_scaling_factor

That is vLLM's ``grouped_topk`` (its CPU router's ``_grouped_topk`` is the same code); with
one group and no bias it is plain top-k. Scores, keys and weights are computed in float64
from the float32 logits and bias and rounded once to float32, so the reference is the same
bits everywhere. Both scoring functions are strictly increasing in each logit (softmax for
a fixed row), so without a bias ranking the scores is ranking the logits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.core.compare import unit_roundoff
from harness.moe.model import Routing


def _softmax(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits, dim=-1)


# scoring name -> the function of float64 logits [T, E] (each strictly increasing per logit)
SCORING_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax": _softmax,
    "sigmoid": torch.sigmoid,
}
# tie-break rule name -> what it says (the one rule the reference states)
TIE_BREAKS: dict[str, str] = {
    "lower_index": "of experts with equal scores, the lower expert index is ranked first",
    "any": "experts (and groups) with exactly equal scores may be taken in any order, as "
    "torch.topk promises none; only a path may declare it (its ``tie_break``)",
}
# Routing is scheme-independent; two schemes (a static FP8 and an MX one) check that the
# block under a path's own routing is still the quantized block.
ROUTING_SCHEMES: tuple[str, ...] = ("fp8_per_tensor", "w_mxfp4_a_mxfp4")
GROUP_SCORE_TOP = 2  # with a correction bias a group scores the sum of its best 2 keys


@dataclass(frozen=True)
class RoutingSpec:
    """How a router turns logits into (expert ids, weights): the rule a path must follow.

    ``scoring`` is a key of `SCORING_FUNCTIONS`; ``renormalize`` divides the chosen k
    weights by their sum; ``tie_break`` is a key of `TIE_BREAKS` (the reference's rule,
    stated so a path can read it rather than guess). Grouped top-k: ``n_group`` equal
    groups of experts, the best ``topk_group`` of them eligible (1 and 1: plain top-k).
    ``correction_bias`` (float32 values, one per expert, or None) is added to the scores
    to choose experts and groups but never enters the weights; ``routed_scaling_factor``
    multiplies the weights after any renormalization. The defaults are plain top-k.
    """

    top_k: int
    renormalize: bool
    scoring: str = "softmax"
    tie_break: str = "lower_index"
    n_group: int = 1
    topk_group: int = 1
    correction_bias: tuple[float, ...] | None = None
    routed_scaling_factor: float = 1.0

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k}")
        if self.scoring not in SCORING_FUNCTIONS:
            raise ValueError(
                f"unknown scoring {self.scoring!r}; known: {sorted(SCORING_FUNCTIONS)}"
            )
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"unknown tie_break {self.tie_break!r}; known: {sorted(TIE_BREAKS)}")
        if not 1 <= self.topk_group <= self.n_group:
            raise ValueError(
                f"topk_group must be in 1..n_group={self.n_group}, got {self.topk_group}"
            )
        bias = self.correction_bias
        if bias is not None and torch.tensor(bias, dtype=torch.float32).double().tolist() != [
            float(b) for b in bias
        ]:
            raise ValueError("correction_bias values must be float32 values (engines hold it so)")
        if not self.routed_scaling_factor > 0:
            raise ValueError(f"routed_scaling_factor must be > 0, got {self.routed_scaling_factor}")

    @property
    def grouped(self) -> bool:
        return self.n_group > 1

    def bias(self, num_experts: int, device: torch.device | str = "cpu") -> torch.Tensor | None:
        """The correction bias as the float32 [E] tensor engines hold (None without one)."""
        if self.correction_bias is None:
            return None
        if len(self.correction_bias) != num_experts:
            raise ValueError(
                f"correction_bias has {len(self.correction_bias)} values for {num_experts} experts"
            )
        return torch.tensor(self.correction_bias, dtype=torch.float32, device=device)

    @property
    def id(self) -> str:
        """``softmax-renorm``, ``sigmoid-norenorm-g4k2-bias-x2.5``: the part of a test id it
        decides (the grouped, bias and scaling parts only where they are not the default)."""
        parts = [self.scoring, "renorm" if self.renormalize else "norenorm"]
        if self.grouped:
            parts.append(f"g{self.n_group}k{self.topk_group}")
        if self.correction_bias is not None:
            parts.append("bias")
        if self.routed_scaling_factor != 1.0:
            parts.append(f"x{self.routed_scaling_factor:g}")
        return "-".join(parts)


def _check_logits(logits: torch.Tensor, spec: RoutingSpec) -> int:
    if logits.dim() != 2:
        raise ValueError(f"router logits must be [tokens, experts], got {tuple(logits.shape)}")
    num_experts = int(logits.shape[1])
    if spec.top_k > num_experts:
        raise ValueError(f"top_k={spec.top_k} must be in 1..{num_experts} (number of experts)")
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("router logits contain NaN or Inf; routing would be ill-defined")
    if num_experts % spec.n_group:
        raise ValueError(f"{num_experts} experts do not split into {spec.n_group} groups")
    per_group = num_experts // spec.n_group
    if spec.grouped and spec.correction_bias is not None and per_group < GROUP_SCORE_TOP:
        raise ValueError(f"groups of {per_group} expert(s): a group scores its best 2")
    if spec.top_k > spec.topk_group * per_group:
        raise ValueError(
            f"top_k={spec.top_k} exceeds the {spec.topk_group * per_group} experts of "
            f"{spec.topk_group} group(s)"
        )
    return num_experts


def scores_and_keys(logits: torch.Tensor, spec: RoutingSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 scores [T, E] (what weights come from) and keys [T, E] (what is ranked:
    the scores plus the correction bias)."""
    scores = SCORING_FUNCTIONS[spec.scoring](logits.double().cpu())
    bias = spec.bias(int(logits.shape[1]))
    return scores, scores if bias is None else scores + bias.double()


def group_scores(keys: torch.Tensor, spec: RoutingSpec) -> torch.Tensor:
    """[T, n_group]: the sum of each group's best 2 keys with a correction bias, its best
    key without (vLLM's ``grouped_topk``)."""
    t, e = keys.shape
    grouped = keys.reshape(t, spec.n_group, e // spec.n_group)
    if spec.correction_bias is not None:
        return grouped.topk(GROUP_SCORE_TOP, dim=-1).values.sum(dim=-1)
    return grouped.max(dim=-1).values


def _descending(values: torch.Tensor) -> torch.Tensor:
    """Indices by descending value, equal values in ascending index (the tie-break rule)."""
    return torch.sort(values, dim=1, descending=True, stable=True).indices


def reference_route(logits: torch.Tensor, spec: RoutingSpec) -> Routing:
    """The routing ``spec`` defines for ``logits`` [T, E], bit-exact and portable.

    Selection: the best ``topk_group`` groups (a stable descending sort of the group
    scores), then a stable descending sort of the keys of their experts, so equal keys
    keep ascending expert order: the lower index wins a tie, also across the top-k and the
    group boundary. Weights: the unbiased scores in float64, optionally renormalized, times
    the routed scaling factor, rounded once to float32. With plain softmax top-k this is
    `harness.moe.model.route` bit for bit.
    """
    num_experts = _check_logits(logits, spec)
    scores, keys = scores_and_keys(logits, spec)
    if spec.grouped:
        groups = _descending(group_scores(keys, spec))[:, : spec.topk_group]
        per_group = num_experts // spec.n_group
        eligible = torch.zeros(keys.shape[0], spec.n_group, dtype=torch.bool)
        eligible.scatter_(1, groups, True)
        eligible = eligible.repeat_interleave(per_group, dim=1)
        keys = keys.masked_fill(~eligible, float("-inf"))
    ids = _descending(keys)[:, : spec.top_k].contiguous()
    weights = weights_for(scores, ids, spec)
    return Routing(
        ids=ids.to(logits.device), weights=weights.to(logits.device), num_experts=num_experts
    )


def weights_for(scores: torch.Tensor, ids: torch.Tensor, spec: RoutingSpec) -> torch.Tensor:
    """The spec's float32 weights of the experts ``ids`` [T, k] from float64 ``scores``."""
    chosen = scores.gather(1, ids.cpu().long())
    if spec.renormalize:
        chosen = chosen / chosen.sum(dim=1, keepdim=True)
    return (chosen * spec.routed_scaling_factor).float()


U32 = unit_roundoff(torch.float32)
EXP_ULPS = 4  # torch's float32 exp on CPU and GPU is within 2 ulps (2u each): 4 u


def routing_weight_bound(
    logits: torch.Tensor, reference: Routing, spec: RoutingSpec
) -> torch.Tensor:
    """Per chosen weight, the most a float32 router may differ from ``reference``: [T, k].

    A router that scores, selects and renormalizes in float32 errs, relative to the exact
    weight, by at most s_i u32 (first order in u32 = 2^-24; the second-order terms are
    below the factor 2 applied at the end):

    * softmax, d_i = l_i - max_j l_j, R = max - min of the row's logits, E experts:
      (|d_i| + EXP_ULPS) u for exp(l_i - max) (its argument rounded once, then exp),
      (R + EXP_ULPS + E - 1) u for the sum of E positive terms (each term's error, then
      E - 1 additions), u for the division;
    * sigmoid 1 / (1 + exp(-l_i)): (|l_i| + EXP_ULPS) u for exp, u for the add, u for the
      division;
    * renormalize over k weights: twice the largest s_j of the chosen (numerator and sum),
      k - 1 additions, one division;
    * a routed scaling factor: one multiplication, u;
    * the reference itself is rounded once to float32: u.
    """
    lg = logits.double().cpu()
    ids = reference.ids.cpu()
    e = int(lg.shape[1])
    if spec.scoring == "softmax":
        top = lg.max(dim=1, keepdim=True).values
        spread = top - lg.min(dim=1, keepdim=True).values
        s = (top - lg).gather(1, ids) + EXP_ULPS + spread + EXP_ULPS + (e - 1) + 1
    else:
        s = lg.gather(1, ids).abs() + EXP_ULPS + 2
    if spec.renormalize:
        s = 2 * s.max(dim=1, keepdim=True).values + (spec.top_k - 1) + 1
    if spec.routed_scaling_factor != 1.0:
        s = s + 1
    return 2 * (s + 1) * U32 * reference.weights.double().cpu().abs()
