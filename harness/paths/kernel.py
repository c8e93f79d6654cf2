"""One description of a native kernel's contract, so that ``accepts`` is written once.

A `Kernel` is data: its name (the decision a dispatch table names), what it multiplies
(an operand check: `OperandContract` for one format on both operands, `MixedOperands` for
a kernel whose two operands differ, `SpecCheck` for an engine's own rule per operand),
which activation scales it runs (`ActivationScales`: dynamic or static, to which tiles,
and the engine's reason), and the capability probe that gates it. Adapters and the
harness's own native paths describe their kernels with it (or subclass it, adding how to
call the kernel), instead of each writing a contract class with its own ``accepts``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from harness.core.schemes import QuantSpec, Scheme
from harness.core.spec import Block, granularity
from harness.paths.base import Support


def first_problem(problems: Iterable[str]) -> Support:
    """Support.no(the first non-empty problem), else Support.yes() (lazily: the first
    problem stops the rest)."""
    for problem in problems:
        if problem:
            return Support.no(problem)
    return Support.yes()


class OperandCheck(Protocol):
    """What a kernel takes on its two operands (`OperandContract` is one)."""

    def check(self, scheme: Scheme) -> Support: ...


@dataclass(frozen=True)
class SpecCheck:
    """Both operands judged by one rule of the engine's (a function of the operand's spec
    and its role returning why it cannot be taken, or ""); an unquantized operand is
    passed as None, so the rule decides whether the kernel takes one."""

    problem: Callable[[QuantSpec | None, str], str]

    def check(self, scheme: Scheme) -> Support:
        return first_problem(
            self.problem(spec, role)
            for spec, role in ((scheme.weight, "weight"), (scheme.activation, "activation"))
        )


@dataclass(frozen=True)
class OperandSide:
    """What a kernel takes on one operand: element formats, scale format, scale tiles."""

    formats: frozenset[str]
    scale_format: str  # a harness.core.scale_formats.SCALE_FORMATS key
    blocks: frozenset[Block]

    def problem(self, spec: QuantSpec | None, role: str) -> str:
        if spec is None:
            return f"{role} is not quantized; the kernel takes quantized operands on both sides"
        if spec.format not in self.formats:
            return f"{role} format {spec.format} is not one of {sorted(self.formats)}"
        if spec.scale_format != self.scale_format:
            return f"{role} scales are {spec.scale_format}, the kernel takes {self.scale_format}"
        if spec.block not in self.blocks:
            takes = ", ".join(str(b) for b in sorted(self.blocks, key=str))
            return f"{role} scales are {spec.granularity}; the kernel takes tiles {takes}"
        return ""


@dataclass(frozen=True)
class MixedOperands:
    """A kernel whose two operands differ in element and scale format (FP8 activations with
    float32 row scales times MXFP4 weights with E8M0 1x32 scales, say), each side stated on
    its own; `OperandContract` takes one format for both."""

    weight: OperandSide
    activation: OperandSide

    def check(self, scheme: Scheme) -> Support:
        return first_problem(
            side.problem(spec, role)
            for side, spec, role in (
                (self.weight, scheme.weight, "weight"),
                (self.activation, scheme.activation, "activation"),
            )
        )


@dataclass(frozen=True)
class ActivationScales:
    """Which activation scales a kernel runs, beyond the tiles its operands take: dynamic
    ones (computed per call) and static ones (calibrated, from the checkpoint), each to the
    tiles given (None: every tile its operands take; empty: none), with the engine's
    reason for the limit, which a refusal quotes."""

    dynamic: frozenset[Block] | None = None
    static: frozenset[Block] | None = None
    why: str = ""

    def check(self, activation: QuantSpec | None) -> Support:
        if activation is None:
            return Support.yes()
        kind = "dynamic" if activation.dynamic else "static"
        runs = self.dynamic if activation.dynamic else self.static
        if runs is None or activation.block in runs:
            return Support.yes()
        if runs:
            takes = " or ".join(sorted(granularity(b) for b in runs))
            problem = f"{kind} activation scales are {activation.granularity}, not {takes}"
        else:
            problem = f"the activation scales are {kind}; the kernel runs no {kind} ones"
        return Support.no(f"{problem} ({self.why})" if self.why else problem)


ANY_ACTIVATION = ActivationScales()


@dataclass(frozen=True)
class Kernel:
    """A native kernel's contract (a `KernelContract`), as data.

    ``probe`` names the capability probe that gates it (harness.platform.capabilities; ""
    for none: the engine decides, or it runs wherever torch does); with
    ``probe_per_format`` the scheme's weight element format is appended, as probes of
    hardware arithmetic are per format.
    """

    name: str
    operands: OperandCheck
    activation: ActivationScales = ANY_ACTIVATION
    probe: str = ""
    probe_per_format: bool = False

    def accepts(self, scheme: Scheme) -> Support:
        """The operands first, then the activation's scales."""
        fits = self.operands.check(scheme)
        return fits if not fits.ok else self.activation.check(scheme.activation)

    def capability(self, scheme: Scheme) -> str:
        if self.probe_per_format:
            return f"{self.probe}.{scheme.weight.format}"
        return self.probe


# An operand check that takes every scheme: a kernel that computes on dequantized values.
ANY_OPERANDS = SpecCheck(lambda spec, role: "")


class ContractedKernel:
    """For a kernel class with behaviour of its own (how it runs a problem): its contract is
    the `Kernel` in ``contract``, and ``name``, ``accepts`` and ``capability`` are its."""

    contract: Kernel

    @property
    def name(self) -> str:
        return self.contract.name

    def accepts(self, scheme: Scheme) -> Support:
        return self.contract.accepts(scheme)

    def capability(self, scheme: Scheme) -> str:
        return self.contract.capability(scheme)
