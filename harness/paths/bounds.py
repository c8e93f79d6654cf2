"""The one GEMM bound: where each output of a GEMM must land, from the path's `Numerics`.

Linear, loading and MoE suites all derive it here. For one output element let c be the
exact (float64) result of the operands as the path multiplies them (``operand_dtype``
rounding applied) plus any bias, and P the sum of the magnitudes of its terms. The path's
float32 accumulator v then satisfies |v - c| <= r, with (Higham, Thm 3.5)

    r = gamma_n(u32) * P + e * u32 * (|c| + gamma_n(u32) * P) + gamma_m(u64) * P

where n is the number of float32 roundings each term passes through before the sum is
done (the product and K - 1 additions, a bias added in the sum, scales applied per term),
e the declared ``epilogue_roundings`` (float32 roundings of the whole sum: scale
multiplies), and m the terms of the float64 sum that evaluates c itself. Every float32 v
in [c - r, c + r] lies between the float32 values nearest c - r and c + r from inside,
and rounding to the output dtype is monotone, so v rounds into [round(lo32), round(hi32)]:
where both ends round to one value the declaration determines the output bit for bit.
A second declaration (``also``) widens the radius to cover a second path multiplying the
same operands.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from harness.core.compare import gamma, unit_roundoff
from harness.paths.base import Numerics

U32 = unit_roundoff(torch.float32)
U64 = unit_roundoff(torch.float64)


@dataclass(frozen=True)
class GemmInterval:
    """Per output element: the exact result, its error radius, and the closed range of
    output-dtype values (held in float32) a path keeping its declared numerics returns."""

    center: torch.Tensor  # float64: exact result of the operands as multiplied (+ bias)
    abs_product: torch.Tensor  # float64: sum of the terms' magnitudes (+ |bias|)
    radius: torch.Tensor  # float64: bound on |float32 accumulator - center|
    lo: torch.Tensor
    hi: torch.Tensor

    @property
    def determined(self) -> torch.Tensor:
        """Outputs whose rounded value the bound fixes (bit-exact comparisons)."""
        return self.lo == self.hi

    def contains(self, values: torch.Tensor) -> torch.Tensor:
        return (values >= self.lo) & (values <= self.hi)  # NaN is never contained


def operands_as_multiplied(values: torch.Tensor, numerics: Numerics) -> torch.Tensor:
    """Operand values (float64) after the declared ``operand_dtype`` rounding, if any: from
    float32, as a kernel that dequantizes in float32 and then casts rounds them."""
    if numerics.operand_dtype is None:
        return values.double()
    return values.float().to(numerics.operand_dtype).double()


def accumulator_error(
    abs_product: torch.Tensor, exact_abs: torch.Tensor, term_roundings: int, numerics: Numerics
) -> torch.Tensor:
    """Bound on |float32 result before the output rounding - exact| (module docstring)."""
    err = gamma(term_roundings, U32) * abs_product
    return err + numerics.epilogue_roundings * U32 * (exact_abs + err)


def _float32_inside(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The smallest float32 >= lo and the largest float32 <= hi (float64 inputs)."""
    lo32, hi32 = lo.float(), hi.float()
    lo32 = torch.where(lo32.double() < lo, torch.nextafter(lo32, torch.tensor(torch.inf)), lo32)
    hi32 = torch.where(hi32.double() > hi, torch.nextafter(hi32, torch.tensor(-torch.inf)), hi32)
    return lo32, hi32


def gemm_interval(
    center: torch.Tensor,
    abs_product: torch.Tensor,
    numerics: Numerics,
    term_roundings: int,
    exact_terms: int,
    also: tuple[Numerics, ...] = (),
) -> GemmInterval:
    """The interval of a GEMM output under ``numerics`` (module docstring).

    ``center`` and ``abs_product`` are float64, computed from `operands_as_multiplied`;
    ``term_roundings`` is n, ``exact_terms`` m. The radius is the largest over ``numerics``
    and ``also``.
    """
    radius = torch.stack(
        [accumulator_error(abs_product, center.abs(), term_roundings, n) for n in (numerics, *also)]
    ).amax(0)
    radius = radius + gamma(exact_terms, U64) * abs_product
    lo32, hi32 = _float32_inside(center - radius, center + radius)
    return GemmInterval(
        center, abs_product, radius, numerics.round_output(lo32), numerics.round_output(hi32)
    )


# A linear layer's operands are loaded as exact code x scale products (float64); a path
# applies the float32 scales either to each operand (dequantize first: two roundings per
# term) or to the sum (declared ``epilogue_roundings``, each one rounding of the sum).
LINEAR_SCALE_ROUNDINGS = 2


def _linear_operands(numerics: Numerics) -> Numerics:
    """Float32 operands are what every linear path multiplies once it has applied the
    scales per term, which the per-term scale roundings already cover: only a coarser
    declared operand dtype moves the center."""
    if numerics.operand_dtype == torch.float32:
        return replace(numerics, operand_dtype=None)
    return numerics


def linear_gemm_interval(
    a: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    numerics: Numerics,
) -> GemmInterval:
    """Interval of ``a @ w.T + bias`` (float64 exact operands) as a linear path declaring
    ``numerics`` computes and rounds it; linear and loading suites share it.

    Per term: K roundings (product, K - 1 additions), the scale roundings not declared as
    epilogue roundings, the declared ``extra_term_roundings``, one for a bias added in the
    float32 sum; the center is a float64 sum of K products (+ the bias).
    """
    k = int(a.shape[1])
    numerics = _linear_operands(numerics)
    a_op, w_op = operands_as_multiplied(a, numerics), operands_as_multiplied(w, numerics)
    b = torch.zeros(w.shape[0], dtype=torch.float64) if bias is None else bias.double()
    center = a_op @ w_op.t() + b
    abs_product = a_op.abs() @ w_op.abs().t() + b.abs()
    per_term_scales = max(0, LINEAR_SCALE_ROUNDINGS - numerics.epilogue_roundings)
    with_bias = 0 if bias is None else 1
    terms = k + per_term_scales + numerics.extra_term_roundings + with_bias
    return gemm_interval(center, abs_product, numerics, terms, k + with_bias)


def rounds_operands(a: torch.Tensor, w: torch.Tensor, numerics: Numerics) -> bool:
    """Whether a linear path's declared operand rounding (coarser than float32) changes any
    operand value: it then multiplies other operands than the emulated path."""
    numerics = _linear_operands(numerics)
    if numerics.operand_dtype is None:
        return False
    return any(not torch.equal(operands_as_multiplied(t, numerics), t.double()) for t in (a, w))


def other_than_emulated(a: torch.Tensor, w: torch.Tensor, numerics: Numerics) -> str:
    """Why a path declaring ``numerics`` need not give `emulated`'s bits on operands ``a``,
    ``w`` (its activation unquantized, another rounding mode, a declared operand rounding
    that changes values), or "" where it must."""
    reasons = []
    if not numerics.activation_quantized:
        reasons.append("the path multiplies the activation unquantized (declared)")
    if numerics.rounding_mode != "nearest":
        mode = numerics.rounding_mode.replace("_", " ")
        reasons.append(f"the path rounds {mode} (declared), emulated to nearest")
    if rounds_operands(a, w, numerics):
        reasons.append(f"the path multiplies operands rounded to {numerics.operand_dtype}")
    return "; ".join(reasons)


# ------------------------------------------------ the radius form, for propagation
def tiny(dtype: torch.dtype) -> float:
    """The absolute rounding error of a result below ``dtype``'s normal range (its
    subnormal spacing, as a multiple of the unit roundoff)."""
    return float(torch.finfo(dtype).smallest_normal) * unit_roundoff(dtype)


def gemm_error(
    abs_product: torch.Tensor, exact_abs: torch.Tensor, k: int, numerics: Numerics
) -> torch.Tensor:
    """Elementwise bound on |computed - exact| of a K-term GEMM under ``numerics``, the
    output rounding included: the radius form of the bound, for stages that propagate a
    GEMM's error rather than compare its bits (MoE's SiLU-and-mul, harness.moe.bounds).

        operands rounded to dtype O first:   (2 u_O + u_O^2) P
        accumulation in dtype A (float32):   gamma_K(u_A) (1 + u_O)^2 P
        scale epilogue (n roundings in A):   n u_A (|y| + the above)
        output rounded to dtype D (r times): each u_D (|y| + the above) + tiny_D
    """
    u_acc = unit_roundoff(numerics.accumulation_dtype)
    u_op = 0.0 if numerics.operand_dtype is None else unit_roundoff(numerics.operand_dtype)
    err = ((2 * u_op + u_op**2) + gamma(k, u_acc) * (1 + u_op) ** 2) * abs_product
    err = err + numerics.epilogue_roundings * u_acc * (exact_abs + err)
    if numerics.out_dtype != torch.float32:
        u_out = numerics.rounding_units * unit_roundoff(numerics.out_dtype)  # 2u truncating
        for _ in range(numerics.output_roundings):
            err = (
                err + u_out * (exact_abs + err) + numerics.rounding_units * tiny(numerics.out_dtype)
            )
    return err
