"""Named checks: each returns a `CheckResult`, so a failure says which check failed and where.

A suite test runs its checks in a fixed order, evaluates every one of them (one bug often
breaks several, and the set that fails points at the cause), records each verdict and
fails listing every failed check by name. Element-wise checks carry their first offending
element (index, got, expected, bound) so the message shows a number, not only a count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.core.compare import (
    bit_difference_mask,
    bit_mismatches,
    outside_interval,
    within_bound,
)


@dataclass(frozen=True)
class Offender:
    """One element a check rejects: where it is, what it is, and what it should have been."""

    index: tuple[int, ...]
    got: float
    expected: float | str  # a value, or a description such as an interval "[lo, hi]"
    bound: float | None = None  # the allowed |got - expected|, for bound checks

    def describe(self) -> str:
        where = f"first at {list(self.index)}: got {self.got!r}, expected {self.expected}"
        return where if self.bound is None else f"{where} within {self.bound:.6g}"

    def __str__(self) -> str:
        return self.describe()


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one named check; ``metrics`` go into the test's result record."""

    name: str
    passed: bool
    message: str = ""
    offender: Offender | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    applicable: bool = True  # False: the check does not apply here (message says why)

    @property
    def failed(self) -> bool:
        return self.applicable and not self.passed

    def verdict(self) -> str:
        """What the result record holds: "pass", "fail: ...", or "n/a: ..."."""
        if not self.applicable:
            return f"n/a: {self.message}"
        if self.passed:
            return "pass"
        detail = self.message if self.offender is None else f"{self.message}; {self.offender}"
        return f"fail: {detail}"


def passed(name: str, /, **metrics: Any) -> CheckResult:
    return CheckResult(name, True, metrics=metrics)


def failed(
    name: str, message: str, offender: Offender | None = None, /, **metrics: Any
) -> CheckResult:
    return CheckResult(name, False, message, offender, metrics)


def not_applicable(name: str, why: str) -> CheckResult:
    return CheckResult(name, True, why, applicable=False)


def verdicts(results: Iterable[CheckResult]) -> dict[str, str]:
    """``{check name: verdict}`` in the order the checks ran."""
    return {r.name: r.verdict() for r in results}


def failure_summary(results: Iterable[CheckResult]) -> str | None:
    """One line per failed check (name: what, first offender), or None if all passed."""
    lines = [f"{r.name}: {r.verdict().removeprefix('fail: ')}" for r in results if r.failed]
    if not lines:
        return None
    return f"{len(lines)} check(s) failed:\n  " + "\n  ".join(lines)


def first_offender(
    mask: torch.Tensor,
    got: torch.Tensor,
    expected: torch.Tensor | tuple[torch.Tensor, torch.Tensor] | str,
    bound: torch.Tensor | None = None,
) -> Offender | None:
    """The first element (row-major) where ``mask`` holds; ``expected`` a tensor, an
    interval (lo, hi) or a description."""
    hits = mask.detach().cpu().nonzero()
    if hits.numel() == 0:
        return None
    index = tuple(int(i) for i in hits[0])

    def at(t: torch.Tensor) -> float:
        return float(t.detach().cpu().double().expand(mask.shape)[index])

    want: float | str
    if isinstance(expected, str):
        want = expected
    elif isinstance(expected, tuple):
        want = f"[{at(expected[0])!r}, {at(expected[1])!r}]"
    else:
        want = at(expected)
    return Offender(index, at(got), want, None if bound is None else at(bound))


def check_finite(name: str, values: torch.Tensor, what: str) -> CheckResult:
    """No NaN or Inf in ``values``."""
    bad = ~torch.isfinite(values.detach().cpu())
    if not bool(bad.any()):
        return passed(name)
    return failed(
        name,
        f"{int(bad.sum())} non-finite {what}",
        first_offender(bad, values, "a finite value"),
    )


def check_within_bound(
    name: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    bound: torch.Tensor,
    label: str,
    **metric_names: str,
) -> CheckResult:
    """|actual - expected| <= bound element-wise (`within_bound`); NaN never passes.

    ``metric_names`` maps a `Comparison` field (``worst_ratio``, ``max_abs_error``) to the
    result-record key it is recorded under.
    """
    result = within_bound(actual, expected, bound)
    metrics = {key: getattr(result, attr) for attr, key in metric_names.items()}
    if result.ok:
        return passed(name, **metrics)
    a = actual.detach().double().cpu()
    e = expected.detach().double().cpu().expand_as(a)
    b = bound.detach().double().cpu().expand_as(a)
    mask = ~((a - e).abs() <= b) | ~torch.isfinite(a)  # as `within_bound` counts them
    offender = first_offender(mask, a, e, b)
    return failed(name, f"{label}: {result.describe()}", offender, **metrics)


def check_bit_exact(
    name: str, actual: torch.Tensor, expected: torch.Tensor, label: str
) -> CheckResult:
    """Every element of ``actual`` has the bits of ``expected`` (`bit_mismatches`)."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return failed(
            name,
            f"{label}: {tuple(actual.shape)} {actual.dtype} vs "
            f"{tuple(expected.shape)} {expected.dtype}",
        )
    n = bit_mismatches(actual, expected)
    if n == 0:
        return passed(name)
    differ = bit_difference_mask(actual, expected)
    return failed(
        name, f"{label}: {n}/{actual.numel()} differ", first_offender(differ, actual, expected)
    )


def check_rounding_interval(
    y: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, roundings: int, path: str
) -> CheckResult:
    """Rounded once to nearest, the result lies between the rounded ends of the
    accumulation interval; where both ends round alike, it is determined bit for bit."""
    name = "rounding_interval"
    if roundings != 1:
        return not_applicable(name, f"{path} rounds {roundings} times to the output dtype")
    determined = lo == hi
    outside = outside_interval(y, lo, hi)
    metrics = {"determined_fraction": float(determined.float().mean())}
    if not bool(outside.any()):
        return passed(name, **metrics)
    return failed(
        name,
        f"{path}: {int(outside.sum())}/{y.numel()} outputs are not a rounding of any value "
        f"within the accumulation bound ({int((outside & determined).sum())} of them "
        "where the correctly rounded result is unique)",
        first_offender(outside, y, (lo, hi)),
        **metrics,
    )


def check_bits_vs_emulated(
    y: torch.Tensor,
    y_emulated: torch.Tensor | None,
    lo: torch.Tensor,
    hi: torch.Tensor,
    roundings: int,
    path: str,
    other_operands: str = "",
) -> CheckResult:
    """Where the rounded result is unique, the path and `emulated` agree bit for bit.

    ``other_operands``: why the path multiplies other operands than `emulated` (a declared
    operand rounding that changes values); the bits then need not agree."""
    name = "bits_vs_emulated"
    if y_emulated is None:
        return not_applicable(name, f"{path} is the reference path")
    if other_operands:
        return not_applicable(name, other_operands)
    if roundings != 1:
        return not_applicable(name, f"{path} rounds {roundings} times to the output dtype")
    differ = (y != y_emulated) & (lo == hi)
    n = int(differ.sum())
    metrics = {"bit_differences_vs_emulated": n}
    if n == 0:
        return passed(name, **metrics)
    return failed(
        name,
        f"{path} and emulated differ in {n} outputs whose correctly rounded value is unique",
        first_offender(differ, y, y_emulated),
        **metrics,
    )
