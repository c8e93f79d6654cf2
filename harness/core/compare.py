"""Comparison policy: bit-exact where deterministic, derived error bounds elsewhere.

Bounds follow the standard forward-error analysis of a dot product (Higham, *Accuracy and
Stability of Numerical Algorithms*, Thm 3.5): summing K products in a format with unit
roundoff u errs by at most gamma_K * sum|a_i||b_i|, gamma_K = K*u / (1 - K*u). Rounding a
result to the output dtype adds u_out * |y|, plus half the dtype's smallest subnormal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

_MANTISSA_BITS = {
    torch.float64: 52,
    torch.float32: 23,
    torch.bfloat16: 7,
    torch.float16: 10,
}


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = 2^-(p) for a dtype with p-1 stored mantissa bits (half an ULP at 1.0)."""
    try:
        return 2.0 ** -(_MANTISSA_BITS[dtype] + 1)
    except KeyError:
        raise TypeError(f"no unit roundoff known for {dtype}") from None


def gamma(n: int, u: float) -> float:
    if n * u >= 1:
        raise ValueError(f"gamma undefined for n={n}, u={u}")
    return n * u / (1 - n * u)


def gamma_bound(
    abs_terms: torch.Tensor, roundings: int, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """gamma_n(u_dtype) * abs_terms: the largest error of a sum computed in ``dtype`` whose
    every term passes through at most n = ``roundings`` roundings (Higham Thm 3.5).

    A K-term dot product (the product and K - 1 additions) is n = K; a bias added in the
    same precision one more; each float32 scale multiply or operand dequantization one more.
    ``abs_terms`` is the sum of the terms' magnitudes, |A| @ |B|^T (+ |bias|).
    """
    return gamma(roundings, unit_roundoff(dtype)) * abs_terms


def rounding_bound(y: torch.Tensor, dtype: torch.dtype, roundings: int = 1) -> torch.Tensor:
    """Error of rounding ``y`` to ``dtype`` ``roundings`` times (each <= u|y| + subnormal/2)."""
    tiny = torch.finfo(dtype).smallest_normal * unit_roundoff(dtype)
    return roundings * (unit_roundoff(dtype) * y.abs() + tiny)


def rounding_interval(
    center: torch.Tensor, radius: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lowest and highest ``dtype`` values a float32 result within center ± radius can round to.

    A kernel's float32 accumulator v lies in [center - radius, center + radius]; rounding to
    float32 and then once to ``dtype`` (to nearest) is monotone, so round(v) lies between the
    rounded ends. Where both ends round to the same value, every correct path returns exactly
    that value: results may be compared bit for bit there.
    """
    lo = (center - radius).double().float().to(dtype)
    hi = (center + radius).double().float().to(dtype)
    return lo, hi


def outside_interval(y: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """Elements of ``y`` outside [lo, hi] (NaN is outside)."""
    y64, lo64, hi64 = y.double().cpu(), lo.double().cpu(), hi.double().cpu()
    return ~((lo64 <= y64) & (y64 <= hi64))


@dataclass(frozen=True)
class Comparison:
    """Outcome of an elementwise check against a per-element bound."""

    max_abs_error: float
    worst_ratio: float  # max |err| / bound; <= 1 passes
    n_violations: int
    n_nonfinite: int
    numel: int

    @property
    def ok(self) -> bool:
        return self.n_violations == 0 and self.n_nonfinite == 0

    def describe(self) -> str:
        return (
            f"{self.n_violations}/{self.numel} elements outside the bound "
            f"(worst error/bound = {self.worst_ratio:.3g}, "
            f"max abs error {self.max_abs_error:.3g}), "
            f"{self.n_nonfinite} non-finite"
        )


def within_bound(actual: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor) -> Comparison:
    """Elementwise |actual - expected| <= bound, computed in float64. NaN never passes."""
    a = actual.detach().double().cpu()
    e = expected.detach().double().cpu()
    b = bound.detach().double().cpu()
    err = (a - e).abs()
    nonfinite = ~torch.isfinite(a)
    violation = ~(err <= b)  # NaN error compares False, so it is a violation
    ratio = torch.where(b > 0, err / b, torch.where(err > 0, math.inf, 0.0))
    finite_err = err[torch.isfinite(err)]
    return Comparison(
        max_abs_error=float(finite_err.max()) if finite_err.numel() else math.nan,
        worst_ratio=float(ratio.nan_to_num(nan=math.inf).max()) if ratio.numel() else 0.0,
        n_violations=int(violation.sum()),
        n_nonfinite=int(nonfinite.sum()),
        numel=a.numel(),
    )


def sqnr_db(reference: torch.Tensor, actual: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio, 20*log10(||ref|| / ||ref - actual||), in float64."""
    ref = reference.detach().double().cpu()
    noise = (ref - actual.detach().double().cpu()).norm()
    signal = ref.norm()
    if not torch.isfinite(noise) or not torch.isfinite(signal):
        return -math.inf
    if noise == 0:
        return math.inf
    return float(20 * torch.log10(signal / noise))


def bit_mismatches(actual: torch.Tensor, expected: torch.Tensor) -> int:
    """Number of elements whose bits differ (NaNs with equal bits are equal)."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise AssertionError(
            f"shape/dtype differ: {tuple(actual.shape)} {actual.dtype} vs "
            f"{tuple(expected.shape)} {expected.dtype}"
        )
    return int(bit_difference_mask(actual, expected).sum())


def bit_difference_mask(actual: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Where the bits of two same-shape, same-dtype tensors differ (on CPU)."""
    a, e = actual.detach().cpu(), expected.detach().cpu()
    if a.is_floating_point():
        a, e = _bits(a), _bits(e)
    return a != e


def _bits(t: torch.Tensor) -> torch.Tensor:
    view = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[t.element_size()]
    return t.contiguous().view(view)


def cancellation_db(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> float:
    """How far the exact outputs x @ w^T + bias fall below the energy of their terms, in dB.

    10*log10(||y||^2 / sum over outputs of (sum_k (x_k w_k)^2 + b^2)), computed in float64
    from the unquantized operands. Quantization errors of distinct products are independent,
    so the noise of an output scales with the energy of its terms, not with the output
    itself; when terms cancel (|y| small next to them) the plain SQNR drops by this much
    without any loss of quality. Adding it back gives an SQNR that a per-product error
    bound can floor (see harness.core.schemes, SQNR floors). Zero on average for random signs.
    """
    x64, w64 = x.detach().double().cpu(), w.detach().double().cpu()
    y = x64 @ w64.t()
    energy = (x64 * x64) @ (w64 * w64).t()
    if bias is not None:
        b64 = bias.detach().double().cpu()
        y = y + b64
        energy = energy + b64 * b64
    return float(10 * torch.log10(y.pow(2).sum() / energy.sum()))
