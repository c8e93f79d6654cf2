"""Checks of a MoE block in a tool's checkpoint files: every expert quantized on its own.

A Mixtral block is a router (``<block>.gate``, left in the model dtype) and E experts, each
three linear layers. The tools write them per expert (llm-compressor 0.14 as
``experts.<j>.{gate,up,down}_proj``; the float checkpoint, as Mixtral names them,
``experts.<j>.{w1,w3,w2}``; vLLM's Mixtral maps one onto the other), each with its own
scales; vLLM fuses them into one MoE layer (w13 = gate and up stacked per expert, w2). The
per-expert gate/up pair and down projection are also checked as linear layers by the loading
suite's validators (`harness.models.files.layer_modules` groups gate/up as the fused shards);
`moe_block_checks` adds what only the block shows:

- ``experts_complete``: all E experts, each with all three projections quantized;
- ``router_float``: the router has no scales and keeps the model dtype (a quantized router
  changes which experts run);
- ``expert_scales_uniform``: every expert's scales have the same shape and dtype;
- ``expert_codes_match_float``: each expert's codes are its own float weight divided by its
  own scales, rounded: within half an e4m3 step of w/s plus the tool's rounding of w/s in
  bf16 (relative 2^-8), after saturation at 448. One expert's scales used for another's
  weights (the shared-scale class at expert level) moves codes by many steps.
"""

from __future__ import annotations

import torch

from harness.core.checks import CheckResult, failed, passed
from harness.core.formats import decode, get_format
from harness.models.files import ModelCheckpoint

# projection -> (name in the tool's files, name in the float Mixtral checkpoint)
EXPERT_PROJECTIONS: dict[str, str] = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}
E4M3 = "e4m3fn"
FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)  # a model dtype, not codes
BF16_DIVISION = 2.0**-8  # unit roundoff of bf16: the tool may form w/s in the model dtype


def router_of(block: str) -> str:
    """The router module of an experts module (``<moe block>.experts`` -> ``<moe block>.gate``)."""
    return f"{block.rpartition('.')[0]}.gate"


def expert_module(block: str, expert: int, projection: str) -> str:
    return f"{block}.{expert}.{projection}"


def _step(q: torch.Tensor) -> torch.Tensor:
    """The e4m3fn step at |q| (3 mantissa bits; subnormal step 2^-9 below 2^-6)."""
    fmt = get_format(E4M3)
    a = q.abs().clamp(min=2.0**-6, max=fmt.max_finite)
    return torch.exp2(torch.floor(torch.log2(a)) - 3)


def codes_match(codes: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> str | None:
    """None when ``codes`` are ``weight / scale`` rounded to e4m3fn (see the module doc), else
    where they are not."""
    fmt = get_format(E4M3)
    q = weight.double() / scale.double()
    target = q.clamp(-fmt.max_finite, fmt.max_finite)
    got = decode(codes.view(torch.uint8), E4M3).double()
    bound = _step(target) / 2 + q.abs() * BF16_DIVISION
    excess = (got - target).abs() - bound
    if bool((excess <= 0).all()):
        return None
    i = int(excess.flatten().argmax())
    at = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), excess.shape))
    return (
        f"{int((excess > 0).sum())}/{excess.numel()} codes off; worst at {list(at)}: code "
        f"{float(got.flatten()[i])!r}, w/s {float(q.flatten()[i])!r} within "
        f"{float(bound.flatten()[i]):.4g}"
    )


def moe_block_checks(
    ckpt: ModelCheckpoint, block: str, experts: int, float_tensors: dict[str, torch.Tensor]
) -> list[CheckResult]:
    """The block checks of the module doc for the experts module ``block``."""
    t = ckpt.tensors
    missing = [
        expert_module(block, j, p)
        for j in range(experts)
        for p in EXPERT_PROJECTIONS
        if f"{expert_module(block, j, p)}.weight_scale" not in t
    ]
    results = [
        failed(
            "experts_complete",
            f"{len(missing)} expert projections unquantized or absent: {', '.join(missing[:4])}",
        )
        if missing
        else passed("experts_complete", experts=experts)
    ]
    router = router_of(block)
    router_weight = t.get(f"{router}.weight")
    if router_weight is None:
        results.append(failed("router_float", f"no {router}.weight in the files"))
    elif f"{router}.weight_scale" in t or router_weight.dtype not in FLOAT_DTYPES:
        results.append(
            failed("router_float", f"{router} is stored as {router_weight.dtype} with scales")
        )
    else:
        results.append(passed("router_float"))
    if missing:
        return results
    scales = {
        (j, p): t[f"{expert_module(block, j, p)}.weight_scale"]
        for j in range(experts)
        for p in EXPERT_PROJECTIONS
    }
    layouts = {(p, tuple(s.shape), s.dtype) for (_, p), s in scales.items()}
    results.append(
        passed("expert_scales_uniform")
        if len(layouts) == len(EXPERT_PROJECTIONS)
        else failed("expert_scales_uniform", f"scale layouts differ: {sorted(map(str, layouts))}")
    )
    problems = []
    for j in range(experts):
        for proj, float_name in EXPERT_PROJECTIONS.items():
            module = expert_module(block, j, proj)
            weight = float_tensors[f"{block}.{j}.{float_name}.weight"]
            problem = codes_match(t[f"{module}.weight"], weight, t[f"{module}.weight_scale"])
            if problem:
                problems.append(f"{module}: {problem}")
    results.append(
        failed("expert_codes_match_float", "; ".join(problems[:3]))
        if problems
        else passed("expert_codes_match_float")
    )
    return results
