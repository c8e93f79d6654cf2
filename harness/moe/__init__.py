"""Mixture of experts: the block's model and reference, error bounds, dispatch table,
paths, cases and goldens.

Modules, each with its one job:

- ``model``: The fused-MoE block: routing (softmax in float64, top-k with the lowest expert
  index winning ties, optional renormalization), per-expert weight quantization through
  `harness.core.quantize`, the shared pipeline (SiLU-and-mul in float32, intermediate
  quantized as the scheme says) and the float64 reference.
- ``paths/`` (``base``, ``emulated``, ``native``, ``kernels``, ``fused``, ``router``; with
  ``harness.ops.grouped``): MoE path protocol and registry (`emulated`; `native` grouped
  GEMMs, whose kernels are in `kernels.py` and call torch through `grouped_ops.py`;
  entry-point group `qharness.moe_paths`).
- ``dispatch``: The explicit scheme -> kernel table per platform (the
  `harness.paths.dispatch` type), checked against the scheme registry and each kernel's own
  `accepts` contract; never name prefixes.
- ``agreement``: The element-wise check of each grouped GEMM's output: the rounded interval
  each output must fall in (`harness/paths/bounds.py`, from the path's declared numerics),
  and bit-exact agreement with the emulated reference where that interval allows one value
  and both paths multiply the same operands.
- ``bounds``, ``cases``, ``dispatch_report``: Stage-by-stage error bounds; the case grid and
  `moe/<scheme>` goldens; the dispatch report in `python -m harness platform`.
- ``designs``: The long-hidden designed case family (H 4160/4224, each token's amax in its
  last columns, MX block maxima across a bf16 scale point), built from seeds with its
  float64 reference at test time.
- ``routing``, ``routing_cases``, ``routing_checks``: Routing as data for paths that route
  themselves (`RoutingSpec`: top-k, renormalize, scoring softmax/sigmoid, tie-break rule,
  grouped top-k, correction bias, routed scaling; the `SelfRoutingMoEPath` protocol is in
  `paths/base.py`): the float64 reference router and a float32 router's weight tolerance;
  the logits with planted ties and the routing case grid (no golden: the reference at test
  time); the checks of a path's own routing (expert set, slot order, weights).
- ``routing_choice``: Which expert choices a spec allows: exact ties by its rule, near-ties
  closer than a float32 router resolves (one stated tolerance) either way.
- ``routing_designs``: The engines' routing rules (DeepSeek-V3/V2 grouped top-k, a
  correction bias, scaling, sigmoid top-1) on logits with a tie or near-tie planted at every
  decision, finer than a bf16 or fp16 step.
- ``bias_cases``: Blocks with a per-expert bias on both GEMMs (every scheme and path): the
  golden layer with seeded biases, held to the float64 reference with the biases added
  once, after dequantization.
- ``checks``: The MoE suite's checks of one path's block output, named and run in a fixed
  order, each stage where it can be checked honestly (routing, shapes, finiteness, the
  intermediate and the output within their derived bounds).
"""
