"""Error bounds for the MoE block, derived stage by stage from each path's numerics.

A path declares how its grouped GEMMs round (`harness.paths.base.Numerics`, the one
declaration linear and MoE paths share); the bounds below follow from that declaration
and the standard dot-product analysis (Higham Thm 3.5, see harness.core.compare).
Notation per intermediate row r (token t, slot j, expert e): P = |a| @ |W_e|^T (the sum
of absolute products), y the exact product, u_X the unit roundoff of dtype X.

GEMM (K terms): `harness.paths.bounds.gemm_error`, the radius form of the one GEMM bound
(a radius, not an interval, because the SiLU stage propagates it).

SiLU-and-mul act = silu(g) * u from computed g~, u~ with errors Eg, Eu:
    |silu'| <= L = 1.0999 (max of s(x)(1 + x(1 - s(x))), at x ~ 2.40), so
    |act~ - act| <= L Eg (|u| + Eu) + |silu(g)| Eu
                  + 6 u_act (|silu(g)| + L Eg)(|u| + Eu)
    where 6 u_act covers float32 silu = x / (1 + exp(-x)) (exp 1 ULP = 2u, add u, divide u)
    and the product with up (u), with one u to spare.

Combine out[t] = sum_j w_j y_j over k experts in float32, weights bit-exact:
    sum_j w_j Ey_j + gamma_k(u_32) sum_j w_j (|y_j| + Ey_j)

The intermediate quantization is discontinuous, so the output is never compared across
different intermediate codes without accounting for them: `intermediate_delta` is the exact
float64 effect of two intermediates on the output, sum_j w_j (|a2 - a2'| @ |W2_e|^T).
"""

from __future__ import annotations

import torch

from harness.core.compare import gamma, unit_roundoff
from harness.moe.model import MoELayer, Routing, quantize_operand
from harness.paths.base import EXACT_FP32 as EXACT_FP32  # re-exported
from harness.paths.base import Numerics
from harness.paths.bounds import gemm_error, tiny

SILU_LIPSCHITZ = 1.0999  # max |d/dx x*sigmoid(x)| = 1.09984... at x ~ 2.3994
SILU_MUL_ROUNDOFFS = 6  # silu (4 u) + product (1 u) + 1 u spare, in the activation dtype


def silu_and_mul_error(
    g: torch.Tensor,
    u: torch.Tensor,
    err_g: torch.Tensor,
    err_u: torch.Tensor,
    numerics: Numerics,
) -> torch.Tensor:
    """Bound on |computed SiLU(g~) u~ - SiLU(g) u| from the GEMM errors (module docstring)."""
    silu = (g * torch.sigmoid(g)).abs()
    u_abs = u.abs() + err_u
    u_act = unit_roundoff(numerics.activation_dtype)
    propagated = SILU_LIPSCHITZ * err_g * u_abs + silu * err_u
    rounding = SILU_MUL_ROUNDOFFS * u_act * (silu + SILU_LIPSCHITZ * err_g) * u_abs
    return propagated + rounding + tiny(numerics.activation_dtype)


def combine_error(y_abs: torch.Tensor, err_y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Bound on the float32 weighted sum over k experts: [T*k, H] -> [T, H]."""
    t, k = weights.shape
    w = weights.double().abs()[:, :, None]
    e = err_y.double().reshape(t, k, -1)
    y = y_abs.double().reshape(t, k, -1)
    return (w * e).sum(1) + gamma(k, unit_roundoff(torch.float32)) * (w * (y + e)).sum(1)


def row_products(
    a: torch.Tensor,
    w: torch.Tensor,
    row_experts: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 (a @ W_e^T + b_e, |a| @ |W_e|^T + |b_e|) for rows a [M, K], expert weights
    w [E, N, K] and the experts' biases b [E, N] (None: none)."""
    we = w.double()[row_experts]
    a64 = a.double()
    exact = torch.einsum("rk,rnk->rn", a64, we)
    spread = torch.einsum("rk,rnk->rn", a64.abs(), we.abs())
    if bias is not None:
        b = bias.double().cpu()[row_experts.cpu()]
        exact, spread = exact + b, spread + b.abs()
    return exact, spread


def bias_terms(bias: torch.Tensor | None) -> int:
    """Float32 roundings a bias adds to a GEMM's sum: one addition, or none."""
    return 0 if bias is None else 1


def intermediate_delta(
    a2: torch.Tensor,
    a2_other: torch.Tensor,
    w2: torch.Tensor,
    routing_ids: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """Largest effect on the output of using intermediate ``a2`` instead of ``a2_other``."""
    t, k = weights.shape
    diff = (a2.double() - a2_other.double()).abs()
    _, spread = row_products(diff, w2, routing_ids.reshape(-1))
    return (weights.double().abs()[:, :, None] * spread.reshape(t, k, -1)).sum(1)


# ------------------------------------------------------------- stage bounds, assembled
def intermediate_bound(
    layer: MoELayer, x: torch.Tensor, routing: Routing, numerics: Numerics
) -> torch.Tensor:
    """Bound [T*k, I] on a path's SiLU-and-mul output vs the exact one (float64).

    The operands are the exact dequantized a1 (x quantized as the scheme says) and w13.
    """
    a1 = quantize_operand(x.cpu(), layer.scheme.activation, _cpu(layer.a1_scale)).values
    rows, experts = routing.row_tokens().cpu(), routing.row_experts().cpu()
    b13 = _cpu(layer.b13)
    exact, abs_product = row_products(a1[rows], layer.w13.to("cpu").dequantize(), experts, b13)
    err = gemm_error(abs_product, exact.abs(), layer.hidden + bias_terms(b13), numerics)
    g, u = exact.chunk(2, dim=-1)
    err_g, err_u = err.chunk(2, dim=-1)
    return silu_and_mul_error(g, u, err_g, err_u, numerics)


def output_bound(
    layer: MoELayer, a2: torch.Tensor, routing: Routing, numerics: Numerics
) -> torch.Tensor:
    """Bound [T, H] on a path's output vs the float64 output from the same intermediate a2."""
    experts = routing.row_experts().cpu()
    b2 = _cpu(layer.b2)
    exact, abs_product = row_products(a2.cpu(), layer.w2.to("cpu").dequantize(), experts, b2)
    err = gemm_error(abs_product, exact.abs(), layer.intermediate + bias_terms(b2), numerics)
    return combine_error(exact.abs(), err, routing.weights.cpu())


def _cpu(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.cpu()
