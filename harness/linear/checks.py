"""The linear suite's checks of one path's output, named and run in a fixed order.

`expected_output` derives, from the golden case, everything the output is compared with;
`linear_checks` runs every check on the output (and, for non-reference paths, the emulated
path's output on the same operands) and returns one `CheckResult` per check, in this order:

1. ``finite``: no NaN in the output, and no Inf except where the exact result lies beyond
   the output dtype's range and the path's declared overflow rule (`Numerics.overflow`)
   rounds it to Inf;
2. ``vs_golden``: within the derived bound of the golden float64 reference plus bias;
3. ``rounding_interval``: (paths rounding once) a rounding of some value in the float32
   accumulation interval, so bit-exact wherever that rounding is unique;
4. ``bits_vs_emulated``: (non-reference paths rounding once) identical bits to `emulated`
   wherever the correctly rounded value is unique;
5. ``vs_emulated``: (non-reference paths) within twice the bound of `emulated`'s output;
6. ``sqnr_floor``: SQNR vs the unquantized product, cancellation added back, above the
   scheme's floor.

Outputs whose exact result lies beyond the output dtype's largest finite value are held by
``finite`` and ``rounding_interval`` alone (the declared rule fixes them: Inf or the
saturated max, docs/SCHEMES.md#output-overflow); the bounds and SQNR compare the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.core import checks as core_checks
from harness.core.checks import (
    CheckResult,
    check_within_bound,
    failed,
    not_applicable,
    passed,
)
from harness.core.compare import (
    cancellation_db,
    rounding_bound,
    sqnr_db,
)
from harness.core.schemes import Scheme
from harness.linear.cases import LoadedLinearCase
from harness.paths.base import Numerics, multiplied_activation, scheme_as_multiplied
from harness.paths.bounds import linear_gemm_interval, other_than_emulated, rounds_operands

LINEAR_CHECKS = (
    "finite",
    "vs_golden",
    "rounding_interval",
    "bits_vs_emulated",
    "vs_emulated",
    "sqnr_floor",
)


@dataclass(frozen=True)
class ExpectedOutput:
    """What a path's output is compared with, for one case (float64 unless noted)."""

    reference: torch.Tensor  # golden product plus bias
    bound: torch.Tensor  # allowed |y - reference|
    lo: torch.Tensor  # output-dtype ends of the rounded accumulation interval
    hi: torch.Tensor
    exact: torch.Tensor  # unquantized product plus bias (for SQNR)
    cancellation_db: float
    roundings: int  # how many times the path rounds to the output dtype
    scheme: Scheme
    # why the path's bits need not match emulated's (other operands, another rounding), if so
    other_operands: str = ""
    beyond_range: torch.Tensor | None = None  # exact result past the output dtype's max

    @property
    def in_range(self) -> torch.Tensor:
        """Outputs whose exact result the output dtype holds (bounds and SQNR apply)."""
        if self.beyond_range is None:
            return torch.ones_like(self.reference, dtype=torch.bool)
        return ~self.beyond_range

    @property
    def determined(self) -> torch.Tensor:
        """Outputs whose correctly rounded value is unique (bit-exact comparisons)."""
        return self.lo == self.hi


def expected_output(
    loaded: LoadedLinearCase,
    scheme: Scheme,
    bias: bool,
    numerics: Numerics,
    conventions: frozenset[str] = frozenset(),
) -> ExpectedOutput:
    """The golden reference, the derived bound and the rounding interval of one case, for a
    path declaring ``numerics`` (`harness.paths.bounds`, the one GEMM bound).

    A path that declares engine ``conventions`` for its activation quantizer is held to the
    activation the reference quantizer computes under them, and a path whose numerics
    declare the activation unquantized (a weight-only kernel) to the activation itself:
    the golden product plus the exact float64 effect of the activation values that differ
    (zero where none do).
    """
    out_dtype, roundings = numerics.out_dtype, numerics.output_roundings
    n = loaded.layer.weight.codes.shape[0]
    # Reference: golden float64 product of the dequantized operands, plus the bias; the
    # same product recomputed here in float64 is the center of the bit-exact interval.
    b = loaded.inputs["bias"].double() if bias else torch.zeros(n).double()
    w = loaded.layer.weight.dequantize(torch.float64)
    x, input_scale = loaded.x, loaded.layer.input_scale
    a = multiplied_activation(x, scheme, input_scale, conventions, numerics)
    reference = loaded.y_ref.double() + b
    if scheme_as_multiplied(scheme, conventions, numerics) is not scheme:
        reference = reference + (a - multiplied_activation(x, scheme, input_scale)) @ w.t()
    # The interval of the loaded operands as the path multiplies them (paths.bounds)
    acc = linear_gemm_interval(a, w, b if bias else None, numerics)
    # vs golden: the radius, the exact effect of a declared operand rounding (zero where
    # it changes nothing), the golden's float32 storage (u_f32 |y|), and the path's
    # roundings to the output dtype (u_out |y| each; u_out |product| before a bias).
    other = other_than_emulated(a, w, numerics)
    operand_effect = torch.zeros_like(acc.radius)
    if rounds_operands(a, w, numerics):
        operand_effect = (acc.center - (a @ w.t() + b)).abs()
    # A rounding before the bias is added errs by u_out |product| (the reference without
    # its bias), the others by u_out |y|: the two agree without a bias.
    before_bias = numerics.roundings_before_bias if bias else 0
    units = numerics.rounding_units  # u per rounding to nearest, 2u toward zero
    bound = (
        acc.radius
        + operand_effect
        + rounding_bound(reference, torch.float32)
        + rounding_bound(reference - b, out_dtype, roundings=before_bias * units)
        + rounding_bound(reference, out_dtype, roundings=(roundings - before_bias) * units)
    )
    lo, hi = acc.lo, acc.hi
    beyond = (acc.center.abs() + acc.radius) > torch.finfo(out_dtype).max
    # Quantization quality: the unquantized float64 product; the exact sum's cancellation
    # (computed from the unquantized inputs) is added back before comparing with the floor.
    exact = loaded.x.double() @ loaded.inputs["w"].double().t() + b
    cancellation = cancellation_db(loaded.x, loaded.inputs["w"], b if bias else None)
    return ExpectedOutput(
        reference, bound, lo, hi, exact, cancellation, roundings, scheme, other, beyond
    )


def _where_in_range(y: torch.Tensor, exp: ExpectedOutput, other: torch.Tensor) -> torch.Tensor:
    """``y`` with ``other`` where the exact result is beyond the output dtype's range
    (those outputs are held to the declared overflow rule by `check_finite` and the
    rounding interval, not by bounds)."""
    return torch.where(exp.in_range, y.double(), other.double())


def check_finite(y: torch.Tensor, exp: ExpectedOutput) -> CheckResult:
    """No NaN; no Inf but where the exact result is beyond the output dtype's range and
    the declared rounding (`Numerics.overflow`) gives that Inf (lo == hi == y)."""
    declared_inf = ~exp.in_range & torch.isinf(exp.lo) & (exp.lo == exp.hi)
    values = y.detach().cpu().double()
    allowed = torch.where(declared_inf & (values == exp.lo), torch.zeros_like(values), values)
    return core_checks.check_finite("finite", allowed, "outputs")


def check_vs_golden(y: torch.Tensor, exp: ExpectedOutput, path: str) -> CheckResult:
    y = _where_in_range(y, exp, exp.reference)
    return check_within_bound(
        "vs_golden",
        y,
        exp.reference,
        exp.bound,
        f"{path} vs golden reference",
        max_abs_error="max_abs_err_vs_golden",
        worst_ratio="worst_error_to_bound",
    )


def check_rounding_interval(y: torch.Tensor, exp: ExpectedOutput, path: str) -> CheckResult:
    return core_checks.check_rounding_interval(y, exp.lo, exp.hi, exp.roundings, path)


def check_bits_vs_emulated(
    y: torch.Tensor, y_emulated: torch.Tensor | None, exp: ExpectedOutput, path: str
) -> CheckResult:
    if y_emulated is not None:  # emulated rounds by IEEE; a path may declare saturation
        y_emulated = torch.where(exp.in_range, y_emulated, y)
    return core_checks.check_bits_vs_emulated(
        y, y_emulated, exp.lo, exp.hi, exp.roundings, path, exp.other_operands
    )


def check_vs_emulated(
    y: torch.Tensor, y_emulated: torch.Tensor | None, exp: ExpectedOutput, path: str
) -> CheckResult:
    """Elsewhere both lie within the bound, so within twice the bound of each other."""
    if y_emulated is None:
        return not_applicable("vs_emulated", f"{path} is the reference path")
    return check_within_bound(
        "vs_emulated",
        _where_in_range(y, exp, exp.reference),
        _where_in_range(y_emulated, exp, exp.reference),
        2 * exp.bound,
        f"{path} vs emulated",
        worst_ratio="worst_error_to_bound_vs_emulated",
    )


def check_sqnr_floor(y: torch.Tensor, exp: ExpectedOutput) -> CheckResult:
    """SQNR vs the unquantized product: the floor bounds noise relative to the energy of the
    products, so the exact sum's cancellation is added back before comparing."""
    keep = exp.in_range
    sqnr = sqnr_db(exp.exact[keep], y[keep])
    term_sqnr = sqnr - exp.cancellation_db
    floor = exp.scheme.sqnr_floor_db
    metrics = {"sqnr_db": sqnr, "term_sqnr_db": term_sqnr, "sqnr_floor_db": floor}
    if term_sqnr >= floor:
        return passed("sqnr_floor", **metrics)
    return failed(
        "sqnr_floor",
        f"SQNR {sqnr:.1f} dB (+{-exp.cancellation_db:.1f} dB cancellation of the exact sum = "
        f"{term_sqnr:.1f} dB) below the floor {floor} dB for {exp.scheme.name}",
        **metrics,
    )


def linear_checks(
    y: torch.Tensor, y_emulated: torch.Tensor | None, exp: ExpectedOutput, path: str
) -> list[CheckResult]:
    """Every check of one output, in `LINEAR_CHECKS` order (``y_emulated`` None: the path
    is the reference)."""
    return [
        check_finite(y, exp),
        check_vs_golden(y, exp, path),
        check_rounding_interval(y, exp, path),
        check_bits_vs_emulated(y, y_emulated, exp, path),
        check_vs_emulated(y, y_emulated, exp, path),
        check_sqnr_floor(y, exp),
    ]
