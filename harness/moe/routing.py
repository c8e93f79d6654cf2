"""Routing as data: `RoutingSpec`, the reference router and the float32 router's tolerance.

Real fused-MoE kernels route themselves: they take router logits, score them (softmax or
sigmoid), pick the top k, optionally renormalize, and only then run the experts. A path
that does so (`harness.moe.paths.base.SelfRoutingMoEPath`) is handed the logits and a
`RoutingSpec` and returns the routing it chose with its trace; the suite compares that
routing with `reference_route` (docs/MOE.md, "Routing a path does itself")::

    scores  = scoring(logits)                       softmax over experts, or sigmoid per expert
    ids     = top-k of scores per token, in descending score; equal scores: lower index first
    weights = scores[ids]                           ( / sum(scores[ids]) when renormalize )

Both scoring functions are strictly increasing in each logit (softmax for a fixed row), so
ranking the scores is ranking the logits: the reference ranks the raw logits, which is
exact (rounded scores could tie where the logits do not). Scores and weights are computed
in float64 and rounded once to float32, so the reference is the same bits everywhere.
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
}


@dataclass(frozen=True)
class RoutingSpec:
    """How a router turns logits into (expert ids, weights): the rule a path must follow.

    ``scoring`` is a key of `SCORING_FUNCTIONS`; ``renormalize`` divides the chosen k
    weights by their sum; ``tie_break`` is a key of `TIE_BREAKS` (the reference's rule,
    stated so a path can read it rather than guess).
    """

    top_k: int
    renormalize: bool
    scoring: str = "softmax"
    tie_break: str = "lower_index"

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k}")
        if self.scoring not in SCORING_FUNCTIONS:
            raise ValueError(
                f"unknown scoring {self.scoring!r}; known: {sorted(SCORING_FUNCTIONS)}"
            )
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"unknown tie_break {self.tie_break!r}; known: {sorted(TIE_BREAKS)}")

    @property
    def id(self) -> str:
        """``softmax-renorm``, ``sigmoid-norenorm``: the part of a test id it decides."""
        return f"{self.scoring}-{'renorm' if self.renormalize else 'norenorm'}"


def reference_route(logits: torch.Tensor, spec: RoutingSpec) -> Routing:
    """The routing ``spec`` defines for ``logits`` [T, E], bit-exact and portable.

    Selection: a stable descending sort of the logits (= of the scores, see the module
    docstring), so equal logits keep ascending expert order: the lower index wins a tie,
    also across the top-k boundary. Weights: the scores in float64, the chosen ones
    optionally renormalized in float64, rounded once to float32. With ``softmax`` this is
    `harness.moe.model.route` bit for bit.
    """
    if logits.dim() != 2:
        raise ValueError(f"router logits must be [tokens, experts], got {tuple(logits.shape)}")
    num_experts = int(logits.shape[1])
    if spec.top_k > num_experts:
        raise ValueError(f"top_k={spec.top_k} must be in 1..{num_experts} (number of experts)")
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("router logits contain NaN or Inf; routing would be ill-defined")
    order = torch.sort(logits.float(), dim=1, descending=True, stable=True).indices
    ids = order[:, : spec.top_k].contiguous()
    chosen = SCORING_FUNCTIONS[spec.scoring](logits.double()).gather(1, ids)
    if spec.renormalize:
        chosen = chosen / chosen.sum(dim=1, keepdim=True)
    return Routing(ids=ids, weights=chosen.float(), num_experts=num_experts)


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
    return 2 * (s + 1) * U32 * reference.weights.double().cpu().abs()
