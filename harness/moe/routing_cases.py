"""Routing cases: router logits with planted ties, the grid, and the reference to compare with.

The suite hands these logits and a `RoutingSpec` to every path that routes itself
(`harness.moe.paths.base.SelfRoutingMoEPath`). Nothing new is stored in the golden store:
the layer (weights, static scales) and x are those of the golden ``moe/<scheme>``; the
logits are regenerated from their seed; the expected routing is `reference_route` and the
expected intermediate and output are `reference_moe` (float64) under the path's own
routing, computed at test time.

Logits lie on a grid of 1/16 in [-8, 8] (exact in bf16 and float32): any two logits that
differ, differ by at least 1/16, so their float32 softmax or sigmoid scores differ by far
more than the scores' rounding (a ratio of e^(1/16) for softmax; sigmoid's slope is above
3e-4 on [-8, 8]), and the only ties a float32 router can see are exact ties of the logits.
Planted rows (first 8 experts for the 8-expert config, all 16 for the 16-expert one):

* `BOUNDARY_TIE_TOKEN`: expert 3 first, experts 1, 4, 6, 7 tied next: top-2 [3, 1],
  top-4 [3, 1, 4, 6] (the tie crosses the top-k boundary; a higher-index rule picks 7);
* `ALL_TIED_TOKEN`: every logit equal: experts 0..k-1, in that order;
* `TOP_TIE_TOKEN`: experts 5 and 2 tied for first: order [2, 5, ...] (order only);
* `SPLIT_TIE_TOKEN`: expert 0 first, then 2, 5 (within the first 8) and 10, 12 tied:
  top-2 [0, 2], top-4 [0, 2, 5, 10];
* the other tokens are seeded, with the grid's own incidental ties.

The routing engines ship (grouped top-k, a correction bias, routed scaling, sigmoid top-1)
runs on its own logits with planted near-ties (`harness.moe.routing_designs`), as cases
with ``design = "near_ties"`` (one scheme: routing is scheme-independent): ids end in
``-near_ties``, the spec's id names its groups, bias and scaling.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from harness.core.inputs import generator
from harness.moe.cases import (
    EXPERT_CONFIGS,
    MAX_EXPERTS,
    MAX_TOKENS,
    LoadedMoECase,
    MoECase,
    load_moe_case,
)
from harness.moe.model import MoELayer, Routing, reference_moe
from harness.moe.paths import MoEProblem, moe_paths, routes_itself
from harness.moe.routing import ROUTING_SCHEMES, SCORING_FUNCTIONS, RoutingSpec
from harness.moe.routing_designs import DESIGN, DESIGN_CONFIGS, design_logits, design_specs
from harness.paths.case import Case
from harness.store.golden_registry import GoldenData

ROUTING_TOKENS = 16
LOGIT_STEP = 1.0 / 16
LOGIT_LIMIT = 8.0
DESIGN_SCHEMES: tuple[str, ...] = ("fp8_per_tensor",)  # the near-tie design's scheme
ROUTING_SPECS: tuple[tuple[str, bool], ...] = tuple(
    (scoring, renormalize) for scoring in SCORING_FUNCTIONS for renormalize in (False, True)
)

BOUNDARY_TIE_TOKEN = 0
ALL_TIED_TOKEN = 1
TOP_TIE_TOKEN = 2
SPLIT_TIE_TOKEN = 3


@dataclass(frozen=True)
class RoutingCase(Case):
    """One self-routing block: a scheme's layer, a path, tokens, (experts, top-k), a spec."""

    SUITE = "moe"
    FINDING_SUITE = "moe_routing"
    ID = ("scheme", "path", "tokens_id", "config", "spec_id", "design")
    RECORD = (*MoECase.RECORD, "scoring", "routing", "routing_spec=spec_id")
    GOLDEN = MoECase.GOLDEN
    routing = "self"

    scheme: str
    path: str
    experts: int
    top_k: int
    scoring: str
    renormalize: bool
    tokens: int = ROUTING_TOKENS
    design: str = ""  # "": the planted-tie logits; DESIGN: the engines' routing, near-ties
    rule: RoutingSpec | None = None  # the spec, where it is more than (top-k, renorm, scoring)

    @property
    def spec(self) -> RoutingSpec:
        if self.rule is not None:
            return self.rule
        return RoutingSpec(self.top_k, self.renormalize, self.scoring)

    @property
    def finding_case_name(self) -> str:
        """What findings match: the config, the spec's id and the design
        (``e16k4-sigmoid-renorm-g4k2-bias-x2.5-near_ties``)."""
        return "-".join(p for p in (self.config, self.spec_id, self.design) if p)

    @property
    def logits(self) -> torch.Tensor:
        """The router logits of this case: [tokens, experts] float32."""
        full = design_logits() if self.design == DESIGN else routing_logits()
        return full[: self.tokens, : self.experts]

    @property
    def spec_id(self) -> str:
        return self.spec.id

    @property
    def block(self) -> MoECase:
        """The same block as the MoE suite's case (routing aside)."""
        return MoECase(
            self.scheme, self.path, self.tokens, self.experts, self.top_k, self.renormalize
        )

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
        return self.block.problem


def routing_cases() -> Iterator[RoutingCase]:
    """Every routing scheme x self-routing path x (experts, top-k) x scoring x renormalize."""
    for scheme in ROUTING_SCHEMES:
        for name, path in moe_paths().items():
            if not routes_itself(path):
                continue
            for experts, top_k in EXPERT_CONFIGS:
                for scoring, renormalize in ROUTING_SPECS:
                    yield RoutingCase(scheme, name, experts, top_k, scoring, renormalize)
    yield from design_cases()


def design_cases() -> Iterator[RoutingCase]:
    """The engines' routing rules on the near-tie logits (`harness.moe.routing_designs`)."""
    for scheme in DESIGN_SCHEMES:
        for name, path in moe_paths().items():
            if not routes_itself(path):
                continue
            for experts, top_k in DESIGN_CONFIGS:
                for spec in design_specs(experts, top_k):
                    yield RoutingCase(
                        scheme,
                        name,
                        experts,
                        top_k,
                        spec.scoring,
                        spec.renormalize,
                        design=DESIGN,
                        rule=spec,
                    )


def routing_logits() -> torch.Tensor:
    """[ROUTING_TOKENS, MAX_EXPERTS] float32 logits on the 1/16 grid, ties planted."""
    return _routing_logits().clone()


@functools.cache
def _routing_logits() -> torch.Tensor:
    gen = generator("moe/routing/logits")
    raw = 2.0 * torch.randn(ROUTING_TOKENS, MAX_EXPERTS, generator=gen)
    logits = (raw / LOGIT_STEP).round().clamp(-LOGIT_LIMIT / LOGIT_STEP, LOGIT_LIMIT / LOGIT_STEP)
    logits = logits * LOGIT_STEP
    logits[BOUNDARY_TIE_TOKEN] = -4.0
    logits[BOUNDARY_TIE_TOKEN, 3] = 2.0
    logits[BOUNDARY_TIE_TOKEN, [1, 4, 6, 7]] = 1.0
    logits[ALL_TIED_TOKEN] = 0.5
    logits[TOP_TIE_TOKEN] = -1.0
    logits[TOP_TIE_TOKEN, [2, 5]] = 3.0
    logits[TOP_TIE_TOKEN, [0, 9]] = 1.25
    logits[SPLIT_TIE_TOKEN] = -2.5
    logits[SPLIT_TIE_TOKEN, 0] = 3.0
    logits[SPLIT_TIE_TOKEN, [2, 5, 10, 12]] = 1.5
    assert bool((logits.to(torch.bfloat16).float() == logits).all())  # exact in bf16
    return logits


def routing_inputs(data: GoldenData, case: RoutingCase) -> tuple[MoELayer, torch.Tensor]:
    """The golden ``moe/<scheme>`` layer for the experts and x [tokens, H] (the layer of the
    golden's config with that many experts: its static scales serve any top-k)."""
    golden_top_k = dict(EXPERT_CONFIGS)[case.experts]
    full = MoECase(case.scheme, case.path, MAX_TOKENS, case.experts, golden_top_k, False)
    loaded = load_moe_case(data, full)
    return loaded.layer, loaded.x[: case.tokens]


def expected_under(layer: MoELayer, x: torch.Tensor, routing: Routing) -> LoadedMoECase:
    """The float64 reference block under ``routing`` (ids and weights), in the form the
    block checks (`harness.moe.checks`) take a golden case: intermediate rounded once to
    float32, its codes, and the output from those codes."""
    ref = reference_moe(layer, x, routing)
    return LoadedMoECase(
        layer=layer,
        x=x,
        logits=torch.empty(0),
        ids=routing.ids,
        weights=routing.weights,
        act_ref=ref.act.float(),
        act_q=ref.act_q,
        out_ref=ref.out.float(),
    )
